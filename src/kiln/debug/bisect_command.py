"""kiln bisect SCRIPT.py:NAME --backend B — which captured graph, and which node in it,
first makes the end-to-end result wrong under B (for inductor: also which stage).

NAME and its example inputs are loaded as by ``kiln explain``.  Exit status: 0 if nothing
fails, 1 if a culprit was found.
"""
from __future__ import annotations

from .bisect import bisect
from .minify_command import Progress, add_failure_arguments, load, resolve_backend

HELP = "bisect a backend failure to the first graph and node that break the result"


def add_arguments(parser) -> None:
    add_failure_arguments(parser)


def run(args) -> int:
    backend = resolve_backend(args.backend)
    target = load(args, "__kiln_bisect__")
    with Progress(f"bisecting {args.target} under {args.backend}") as step:
        result = bisect(target.fn, target.args, target.kwargs, backend=backend, accuracy=args.accuracy,
                        training=args.training, progress=step)
    print(result)
    if result.graph_index is not None:
        print(f"graph: {result.graph_index + 1} of {result.graphs}")
        print(f"op:    {result.op}  ({result.node})")
    if result.stages:
        print("stages: " + ", ".join(f"{name} {'FAILS' if failing else 'ok'}" for name, failing in result.stages))
    print(f"({result.runs} runs, {result.seconds:.1f}s)")
    return 0 if result.graph_index is None else 1
