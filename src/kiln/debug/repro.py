"""Repro scripts: a minimized graph, its inputs and its backend as one runnable Python file.

A repro is what someone else runs to see the bug, so it must stand alone and must blame
the right thing.  The script written by :func:`render_repro`

* imports torch and kiln, and the backend: a registered name as a string, a callable
  from an importable module by ``from module import name`` (adding the directory it was
  imported from to ``sys.path``), and otherwise says plainly that the backend could not
  be imported and asks for ``--backend``;
* holds the graph as readable code (``class Repro(torch.nn.Module)``, the graph's own
  generated ``forward``), traced back into an FX graph with ``torch.fx.symbolic_trace``;
* holds the inputs as an :class:`~kiln.debug.inputs.InputSet` literal: layout, autograd
  role, aliasing and values (``--independent-inputs`` rebuilds every input in its own
  buffer, to show whether the failure needs the aliasing);
* calls :func:`run_repro`, which runs :func:`kiln.debug.graph_check.check_graph`, the
  very check the minifier used, prints the verdict and exits 1 if the graph fails, 0 if
  it does not (2 if the script cannot run: no backend, or eager itself fails).

``python repro.py --backend eager`` must exit 0: with the eager backend both sides run
the same code, so a failure there would be the harness's fault, not the backend's.
"""
from __future__ import annotations

import argparse
import builtins
import importlib
import math
import os
import re
import sys
import types
from typing import Any, Sequence

import torch
import torch.fx

from ..backends import lookup
from ..fx_ops import count_ops
from .graph_check import check_graph, short_path
from .inputs import InputSet

__all__ = ["BackendRef", "backend_ref", "render_repro", "run_repro", "load_repro"]


class BackendRef:
    """How a repro names its backend: source lines that bind ``BACKEND``, and a label."""

    def __init__(self, lines: list[str], label: str, importable: bool):
        self.lines, self.label, self.importable = lines, label, importable


def backend_ref(backend: Any) -> BackendRef:
    while getattr(backend, "wrapped_backend", None) is not None:   # Kiln's own wrappers (DDP splitting)
        backend = backend.wrapped_backend
    if isinstance(backend, str):
        return BackendRef([f"BACKEND = {backend!r}"], backend, True)
    module_name = getattr(backend, "__module__", None)
    qualname = getattr(backend, "__qualname__", None) or getattr(type(backend), "__qualname__", "?")
    label = f"{module_name}.{qualname}" if module_name else repr(backend)
    if not hasattr(backend, "__qualname__"):   # an instance: name its class's module, it cannot be imported
        why = f"the backend is an instance of {type(backend).__module__}.{type(backend).__qualname__}, not an importable name"
        return BackendRef(_not_importable(why), label, False)
    if module_name in (None, "__main__") or "<locals>" in qualname:
        why = (f"the backend {qualname} is defined in {'a function' if '<locals>' in qualname else 'the main script'}"
               f" and cannot be imported")
        return BackendRef(_not_importable(why), label, False)
    try:
        found: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception as e:
        return BackendRef(_not_importable(f"importing {label} failed: {type(e).__name__}: {e}"), label, False)
    if found is not backend:
        return BackendRef(_not_importable(f"{label} does not name the backend that was used"), label, False)
    lines = []
    root = _import_root(module_name)
    if root is not None:
        lines.append(f"sys.path.insert(0, {root!r})  # where {module_name} was imported from")
    head, _, rest = qualname.partition(".")
    lines.append(f"from {module_name} import {head}" + (f"\nBACKEND = {head}.{rest}" if rest else f" as BACKEND"))
    return BackendRef(lines, label, True)


def _not_importable(why: str) -> list[str]:
    return [f"# NOT IMPORTABLE: {why}.", "# Run with --backend NAME (a registered name or module:attr).",
            f"BACKEND = None", f"BACKEND_MISSING = {why!r}"]


def _import_root(module_name: str) -> str | None:
    """The sys.path entry ``module_name`` was found under, unless it is site-packages."""
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if not path:
        return None
    path = os.path.abspath(path)
    depth = module_name.count(".") + 1
    if os.path.basename(path) == "__init__.py":
        depth += 1
    root = path
    for _ in range(depth):
        root = os.path.dirname(root)
    if "site-packages" in root or "dist-packages" in root:
        return None
    return root


#: what a repro compares with accuracy on (:func:`kiln.debug.graph_check.check_graph`)
CHECKED = ("values (against a float64 reference); aliasing (which outputs share memory with which inputs, "
           "and with each other); mutation (which inputs change in place, and their version counters)")


def render_repro(gm: torch.fx.GraphModule, inputs: InputSet, *, backend: Any, accuracy: bool, training: bool,
                 reason: str, kind: str, exc_type: str | None, title: str) -> str:
    """The text of a repro script (see the module docstring)."""
    code = gm.graph.python_code("self")
    imports = _global_imports({k: v for k, v in code.globals.items()
                               if re.search(rf"\b{re.escape(k)}\b", code.src)})
    ref = backend_ref(backend)
    forward = "\n".join("    " + line if line.strip() else "" for line in code.src.strip("\n").splitlines())
    aliasing = inputs.aliasing_summary()
    ops = count_ops(gm)
    doc = [f"Kiln repro: {title}.", "",
           f"Backend: {ref.label}.  Minimized graph: {ops} op(s).",
           f"Failure kept by the minifier ({kind}): {reason}",
           f"Checked: {CHECKED if accuracy else 'that the backend does not raise'}"
           f"{'; gradients too (training)' if training else ''}."]
    if aliasing:
        doc.append(f"Aliasing: {aliasing} (as in the real run).")
    doc += ["", "    python THIS.py                       exit 1: fails as described; 0: does not",
            "    python THIS.py --backend eager       must exit 0 (the harness itself is sound)",
            "    python THIS.py --independent-inputs  every input in its own buffer (no aliasing)"]
    parts = ['#!/usr/bin/env python',
             '"""' + "\n".join(doc) + '\n"""',
             "import sys", "", "import torch", "", "import kiln  # noqa: F401",
             "from kiln.debug.inputs import InputSet, StorageSpec, TensorInput, ValueInput, decode  # noqa: F401",
             "from kiln.debug.repro import run_repro"]
    parts += imports
    parts += [""] + ref.lines + ["", "", "class Repro(torch.nn.Module):", forward, "", "",
                                 "INPUTS = " + inputs.to_source(), "", "",
                                 'if __name__ == "__main__":',
                                 f"    sys.exit(run_repro(Repro, INPUTS, BACKEND, accuracy={accuracy}, "
                                 f"training={training},",
                                 f"                       expected={(kind, exc_type)!r}, "
                                 f"missing=globals().get('BACKEND_MISSING')))", ""]
    return "\n".join(parts)


def _global_imports(globals_: dict[str, Any]) -> list[str]:
    """Import lines for the names the generated forward refers to."""
    lines = []
    for name, obj in sorted(globals_.items()):
        if name in ("torch", "fx_pytree", "pytree", "NoneType") or getattr(builtins, name, None) is obj:
            if name == "NoneType":
                lines.append("NoneType = type(None)")
            continue
        if isinstance(obj, float):
            lines.append(f"{name} = float({'inf' if obj > 0 else '-inf'!r})" if math.isinf(obj)
                         else f"{name} = float('nan')" if math.isnan(obj) else f"{name} = {obj!r}")
        elif isinstance(obj, types.ModuleType):
            lines.append(f"import {obj.__name__} as {name}" if obj.__name__ != name else f"import {name}")
        elif getattr(obj, "__module__", None) and getattr(obj, "__qualname__", None) and "<" not in obj.__qualname__:
            head, _, rest = obj.__qualname__.partition(".")
            lines.append(f"from {obj.__module__} import {head} as {name}" if not rest
                         else f"from {obj.__module__} import {head} as _{name}_owner\n{name} = _{name}_owner.{rest}")
        else:
            lines.append(f"# cannot write {name} = {obj!r} as an import; the graph refers to it")
    return lines


def load_repro(source: str) -> types.ModuleType:
    """Execute a repro's source as a module (not as ``__main__``) to reach Repro and INPUTS."""
    module = types.ModuleType("kiln_repro_check")
    exec(compile(source, "<kiln repro>", "exec"), module.__dict__)
    return module


def trace_repro(repro_cls: type) -> torch.fx.GraphModule:
    return torch.fx.symbolic_trace(repro_cls())


def run_repro(repro_cls: type, inputs: InputSet, backend: Any, *, accuracy: bool, training: bool,
              expected: tuple[str, str | None], missing: str | None = None,
              argv: Sequence[str] | None = None) -> int:
    """The ``main`` of a repro script; returns its exit status (see the module docstring)."""
    parser = argparse.ArgumentParser(description="Run a Kiln repro.")
    parser.add_argument("--backend", help="a registered backend name or module:attr, instead of the recorded one")
    parser.add_argument("--independent-inputs", action="store_true",
                        help="rebuild every input in a buffer of its own (drops aliasing)")
    args = parser.parse_args(argv)
    if args.backend:
        backend = _resolve(args.backend)
    elif backend is None:
        print(f"cannot run: {missing or 'no backend'}; pass --backend NAME", file=sys.stderr)
        return 2
    backend_fn = lookup(backend)
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
    gm = trace_repro(repro_cls)
    verdict = check_graph(gm, inputs, backend_fn, accuracy=accuracy, training=training,
                          independent=args.independent_inputs)
    where = f"backend {name}" + (" (independent inputs)" if args.independent_inputs else "")
    if verdict.invalid:
        print(f"cannot judge {where}: {verdict.invalid}")
        return 2
    if verdict.failure is None:
        worst = verdict.report.worst if verdict.report is not None else None
        print(f"PASS: {where} matches eager" + (f" (worst: {short_path(str(worst))})" if worst else ""))
        return 0
    same = verdict.failure.kind == expected[0] and verdict.failure.exc_type == expected[1]
    print(f"FAIL: {where}: {verdict.failure.reason}")
    if not same:
        print(f"(a different failure from the one minimized: {expected[0]} {expected[1] or ''})".replace(" )", ")"))
    return 1


def _resolve(text: str) -> Any:
    if ":" in text:
        module, _, attr = text.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj
    return text

