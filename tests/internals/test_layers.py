"""Kiln's import graph follows the layer order written in docs/architecture.md.

The graph is built from the source with ``ast`` (nothing is imported), so the test
sees function-level imports too; imports under ``if TYPE_CHECKING:`` are left out.
Every module must be placed in the layer list, no module may import from a later
entry of the list, and there must be no import cycle at all.  Function-level imports
must say why they are there (a comment on the line or the line above): they are for
cost or optional dependencies, never to dodge a cycle.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "kiln"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


# -- the layer list --------------------------------------------------------------------

def read_layers(text: str) -> list[tuple[str, list[str]]]:
    """The ```layers block of architecture.md: ``name: entry entry ...`` per line, lowest
    first.  An entry is a module under ``kiln`` (``capture.semantics.state``), ``kiln`` itself, or
    ``NAME.*``: NAME and every module under it, a group whose members may import each
    other (cycles are still refused)."""
    match = re.search(r"```layers\n(.*?)```", text, re.S)
    assert match, "docs/architecture.md has no ```layers block"
    layers = []
    for line in match.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, entries = line.partition(":")
        layers.append((name.strip(), entries.split()))
    return layers


@dataclass(frozen=True)
class Rank:
    layer: int
    position: int
    entry: str

    @property
    def group(self) -> bool:
        return self.entry.endswith(".*")


def _matches(entry: str, module: str) -> bool:
    full = entry if entry == "kiln" else f"kiln.{entry}"
    if full.endswith(".*"):
        stem = full[:-2]
        return module == stem or module.startswith(stem + ".")
    return module == full


def rank_of(layers, module: str) -> Rank | None:
    for li, (_, entries) in enumerate(layers):
        for pi, entry in enumerate(entries):
            if _matches(entry, module):
                return Rank(li, pi, entry)
    return None


# -- the import graph ------------------------------------------------------------------

@dataclass(frozen=True)
class Import:
    source: str        # importing module
    target: str        # imported kiln module
    line: int
    in_function: bool
    has_reason: bool   # a comment on the line or the line above
    named_from: str = ""   # the module after ``from`` (a package, for ``from pkg import submodule``)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    parts = parts[:len(parts) - (level - 1)]
    return ".".join(parts + ([name] if name else []))


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(module: str, path: Path, modules: dict) -> list[Import]:
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def reason_at(lineno: int) -> bool:
        here = lines[lineno - 1]
        above = lines[lineno - 2].strip() if lineno >= 2 else ""
        return "#" in here or above.startswith("#")

    def visit(node, in_function: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub, in_function)
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, True)
                continue
            targets, base = [], ""
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(module, is_package, child.level, child.module)
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for t in targets:
                if t == "kiln" or t.startswith("kiln."):
                    found.append(Import(module, t, child.lineno, in_function, reason_at(child.lineno),
                                        base or t))
            if targets and in_function and not any(t == "kiln" or t.startswith("kiln.") for t in targets):
                # third-party imports inside functions need a reason too
                found.append(Import(module, "", child.lineno, True, reason_at(child.lineno)))
            visit(child, in_function)

    visit(tree, False)
    return found


def import_graph():
    modules = all_modules()
    edges = [imp for m, p in modules.items() for imp in imports_of(m, p, modules)]
    return modules, edges


def find_cycles(modules, edges) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    graph = {m: sorted({e.target for e in edges if e.source == m and e.target in modules and e.target != m})
             for m in modules}
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def strongconnect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            strongconnect(v)
    return out


# -- the tests -------------------------------------------------------------------------

LAYERS = read_layers(ARCHITECTURE.read_text())


def test_every_module_is_placed_in_exactly_one_layer_entry():
    modules = all_modules()
    unplaced = [m for m in modules if rank_of(LAYERS, m) is None]
    assert not unplaced, f"modules missing from the ```layers block of docs/architecture.md: {unplaced}"
    entries = [e for _, es in LAYERS for e in es]
    assert len(entries) == len(set(entries)), "an entry is listed twice"
    unknown = [e for e in entries if not any(_matches(e, m) for m in modules)]
    assert not unknown, f"layer entries that match no module: {unknown}"


def test_no_import_cycles():
    modules, edges = import_graph()
    cycles = find_cycles(modules, edges)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_module_imports_from_a_higher_layer():
    modules, edges = import_graph()
    bad = []
    for e in edges:
        if not e.target or e.target == e.source or e.target not in modules:
            continue
        src, dst = rank_of(LAYERS, e.source), rank_of(LAYERS, e.target)
        if src is None or dst is None:
            continue   # reported by the placement test
        lower = (dst.layer, dst.position) < (src.layer, src.position)
        same_group = dst == src and src.group
        if not (lower or same_group):
            bad.append(f"{modules[e.source].relative_to(ROOT)}:{e.line}: {e.source} ({LAYERS[src.layer][0]}) "
                       f"imports {e.target} ({LAYERS[dst.layer][0]})")
    assert not bad, "imports that go up the layer order:\n" + "\n".join(bad)


def test_function_level_imports_say_why():
    modules, edges = import_graph()
    silent = sorted({f"{modules[e.source].relative_to(ROOT)}:{e.line}" for e in edges
                     if e.in_function and not e.has_reason})
    assert not silent, ("function-level imports without a comment saying why (cost or an optional "
                        "dependency):\n" + "\n".join(silent))


# What runs on every compiled call (kiln.runtime) may import only the foundation line of
# the layers, besides its own modules: nothing of the compile-time side (capture, backends,
# cache, api, distributed, the tools), which passes in what a run-time object needs instead.
# Derived from the layers block, so a module joining the foundation needs no second list.
RUNTIME_MAY_IMPORT = {f"kiln.{e}" for e in dict(LAYERS)["foundation"]}


def test_runtime_imports_only_the_foundation():
    assert {"kiln.exc", "kiln.config", "kiln.trace"} <= RUNTIME_MAY_IMPORT   # the line is read
    modules, edges = import_graph()
    runtime = [m for m in modules if m == "kiln.runtime" or m.startswith("kiln.runtime.")]
    assert "kiln.runtime.fallback" in runtime    # the check looks at the real package
    bad = sorted(f"{modules[e.source].relative_to(ROOT)}:{e.line}: {e.source} imports {e.target}"
                 for e in edges if e.source in runtime and e.target
                 and e.target not in RUNTIME_MAY_IMPORT and e.target not in runtime)
    assert not bad, "kiln.runtime imports outside the foundation:\n" + "\n".join(bad)


def test_the_checker_sees_cycles_and_upward_imports():
    # the checker itself: a two-module cycle and an import from a higher entry are found
    layers = read_layers("```layers\nlow: exc\nhigh: api\n```")
    modules = {"kiln.exc": None, "kiln.api": None}
    edges = [Import("kiln.exc", "kiln.api", 1, False, False), Import("kiln.api", "kiln.exc", 1, False, False)]
    assert find_cycles(modules, edges) == [["kiln.api", "kiln.exc"]]
    low, high = rank_of(layers, "kiln.exc"), rank_of(layers, "kiln.api")
    assert (low.layer, low.position) < (high.layer, high.position)
    group = read_layers("```layers\ntools: bench.*\n```")
    assert rank_of(group, "kiln.bench.runner") == rank_of(group, "kiln.bench")


# Packages with a public face: a module outside one of them imports what it needs from
# the package itself (its ``__init__`` re-exports it), never from the modules inside, so
# a package can regroup its insides without its users changing.  A submodule taken as an
# object through the face (``from kiln.runtime import caches``) is allowed, and so is an
# import with a comment above it saying why it goes past the face ("past ... face").
FACED_PACKAGES = ["kiln.capture", "kiln.capture.basics", "kiln.capture.values", "kiln.capture.hops",
                  "kiln.capture.semantics", "kiln.capture.frames", "kiln.runtime", "kiln.backends"]


def _inside(module: str, package: str) -> bool:
    return module.startswith(package + ".")


def _says_past_face(path: Path, line: int) -> bool:
    above = path.read_text().splitlines()[line - 2] if line >= 2 else ""
    return above.strip().startswith("#") and "past" in above and "face" in above


def test_packages_are_used_through_their_faces():
    modules, edges = import_graph()
    assert all(p in modules for p in FACED_PACKAGES)
    bad = []
    for e in edges:
        for package in FACED_PACKAGES:
            if _inside(e.named_from, package) and not (e.source == package or _inside(e.source, package)) \
                    and not _says_past_face(modules[e.source], e.line):
                bad.append(f"{modules[e.source].relative_to(ROOT)}:{e.line}: {e.source} imports from "
                           f"{e.named_from}, inside {package}: import it from {package}")
                break
    assert not bad, "imports that reach past a package's face:\n" + "\n".join(sorted(set(bad)))


MAX_MODULE_LINES = 600   # the brief's "modules under ~600 lines, one job each"


def test_no_module_is_over_the_size_limit():
    big = sorted(f"{p.relative_to(ROOT)}: {n} lines" for p in PACKAGE.rglob("*.py")
                 if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES)
    assert not big, f"modules over {MAX_MODULE_LINES} lines (split them by job):\n" + "\n".join(big)
