"""Where Kiln's per-call time goes on the real models of ``overhead.py``.

    .venv/bin/python benchmarks/overhead_anatomy.py [--backend eager] [--only BertModel ...]

For each model's (first) entry, all in one process: medians of 41 interleaved rounds of
100 calls of each part (``interleaved_medians``: bursts of load hit every part alike),
the garbage collector paused:

* ``call``: one compiled call; ``graphs``: the captured graphs called directly;
* ``guard``: the entry's guard alone (the C accelerator's plan where it is built, else
  the Python function); ``py guard``: the generated Python guard function alone; ``in situ``: the guard followed by the
  glue, minus the glue alone (larger than ``guard``: the guard's reads of hundreds of
  objects evict what the glue and graphs then need from the CPU caches);
* ``tensor chk``: what the Python guard's tensor checks cost (it minus a copy of it
  with those checks removed);
* ``reads only``: a copy of the Python guard with every check removed: only the
  attribute and item reads that bind the values the checks test;
* ``glue``: the entry's glue minus its graphs (output rebuilding, the model's own
  output object, side effects);
* ``path``: the compiled call minus the guard and glue called back to back
  (``nn.Module.__call__``, ``CompiledFunction.__call__``).

``--glue-lines`` also prints what each statement of the glue after the graph call costs
(``glue_lines``), which says where the ``glue`` column goes (on the transformers models:
the model's own ``ModelOutput`` constructor, nearly all of it).

The copies are made from the entry's dumped guard source, so the figures are of the
code a user can read with ``entry.guard_source``.
"""
from __future__ import annotations

import argparse
import ast
import gc
import inspect
import re

import torch

import kiln
from kiln.bench.overhead import GraphRecorder, interleaved_medians
from kiln.runtime.guard_plan import python_guard_of
from overhead import real_models

# every tensor guard checks requires_grad, whether its sizes are static or symbolic
_TENSOR_CHECK = re.compile(r"\.requires_grad is (?:True|False)")


def medians_us(parts: dict, calls: int = 100, rounds: int = 41) -> dict:
    """µs per call of each of ``parts`` (name -> zero-argument callable)."""
    def repeated(fn):
        def run():
            for _ in range(calls):
                fn()
        return run

    gc.collect()
    gc.disable()
    try:
        seconds = interleaved_medians([repeated(fn) for fn in parts.values()], rounds)
    finally:
        gc.enable()
    return {name: s / calls * 1e6 for name, s in zip(parts, seconds)}


def guard_without(entry, drop) -> object:
    """A copy of ``entry``'s guard function whose checks matching ``drop`` never run."""
    lines = []
    for line in entry.guard_source.split("\n"):
        stripped = line.strip()
        if stripped.startswith("if not (") and drop(stripped[len("if not ("):-2]):
            line = line[:len(line) - len(stripped)] + "if False:"
        lines.append(line)
    python = python_guard_of(entry.guard)
    namespace = dict(python.__globals__)
    exec(compile("\n".join(lines), "<guard copy>", "exec"), namespace)
    copy = namespace[python.__name__]
    copy.__defaults__, copy.__kwdefaults__ = python.__defaults__, python.__kwdefaults__
    return copy


def glue_lines(entry, handed, fn, call_args, kwargs, calls: int = 200, rounds: int = 21) -> list:
    """(µs per call, statement) for each top-level statement of ``entry``'s glue after the
    graph call, each run on its own in a namespace where the statements before it ran
    once.  Statements run repeatedly (side-effect writes again and again): meant for the
    models here, whose writes are idempotent."""
    tree = ast.parse(entry.glue_source).body[0]
    namespace = dict(entry.run.__globals__)
    params = inspect.signature(entry.run).bind(handed, fn, *call_args, **kwargs)
    params.apply_defaults()
    namespace.update(params.arguments)
    for name, p in inspect.signature(entry.run).parameters.items():
        if p.kind is p.VAR_POSITIONAL:
            namespace[name] = tuple(namespace.get(name, ()))
    timed = []
    for statement in tree.body:
        if isinstance(statement, ast.Return):
            break
        if isinstance(statement, ast.Try):        # the graph call: run once, not timed
            statement = statement.body[-1]
            exec(compile(ast.Module([statement], []), "<glue>", "exec"), namespace)
            continue
        code = compile(ast.Module([statement], []), "<glue>", "exec")
        exec(code, namespace)
        timed.append((" ".join(ast.unparse(statement).split()), lambda code=code: exec(code, namespace)))
    empty = compile("pass", "<glue>", "exec")
    t = medians_us({"": lambda: exec(empty, namespace), **{str(i): f for i, (_, f) in enumerate(timed)}},
                   calls, rounds)
    return [(t[str(i)] - t[""], text) for i, (text, _) in enumerate(timed)]


def anatomy(name, model, args, kwargs, backend: str, lines: bool = False) -> str:
    recorder = GraphRecorder(kiln.backends.lookup(backend), backend)
    kiln.reset()
    compiled = kiln.compile(model, backend=recorder)
    for _ in range(3):
        compiled(*args, **kwargs)
    fn = compiled.forward.__func__._kiln_fn
    entry = compiled.forward.entries[0]
    call_args = (compiled, *args)
    handed = entry.guard(fn, *call_args, **kwargs)
    assert handed is not False, "the entry's guard should pass"
    python = python_guard_of(entry.guard)
    no_tensor = guard_without(entry, _TENSOR_CHECK.search)
    reads = guard_without(entry, lambda check: True)
    concrete = recorder.concrete_graphs()
    t = medians_us({
        "graphs": lambda: [g(*inputs) for g, inputs, _ in concrete],
        "call": lambda: compiled(*args, **kwargs),
        "guard": lambda: entry.guard(fn, *call_args, **kwargs),
        "py_guard": lambda: python(fn, *call_args, **kwargs),
        "no_tensor": lambda: no_tensor(fn, *call_args, **kwargs),
        "reads": lambda: reads(fn, *call_args, **kwargs),
        "run": lambda: entry.run(handed, fn, *call_args, **kwargs),
        "guard_run": lambda: entry.run(entry.guard(fn, *call_args, **kwargs), fn, *call_args, **kwargs),
    })
    call, graphs, guard, run = t["call"], t["graphs"], t["guard"], t["run"]
    glue = run - graphs
    no_tensor_us, reads_us, py_guard = t["no_tensor"], t["reads"], t["py_guard"]
    checks = entry.guard_source.count("if not (")
    tensors = len(_TENSOR_CHECK.findall(entry.guard_source))
    row = (f"{name:14} {len(compiled.forward.entries):>7} {checks:>6} {tensors:>7} {call - graphs:>9.1f} "
            f"{guard:>7.1f} {py_guard:>8.1f} {t['guard_run'] - run:>7.1f} {py_guard - no_tensor_us:>10.1f} "
            f"{reads_us:>10.1f} "
            f"{glue:>7.1f} {call - t['guard_run']:>7.1f}")
    if lines:
        row += "".join(f"\n    {us:7.2f} us  {text[:100]}" for us, text in glue_lines(entry, handed, fn, call_args, kwargs))
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--glue-lines", action="store_true", help="also the cost of each glue statement")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"{'model':14} {'entries':>7} {'checks':>6} {'tensors':>7} {'ovh us':>9} {'guard':>7} {'py guard':>8} "
          f"{'in situ':>7} {'tensor chk':>10} {'reads only':>10} {'glue':>7} {'path':>7}")
    for name, model, inputs, kwargs in real_models():
        if args.only and name not in args.only:
            continue
        with torch.no_grad():
            print(anatomy(name, model, inputs, kwargs, args.backend, args.glue_lines), flush=True)


if __name__ == "__main__":
    main()
