"""kiln export SCRIPT.py:NAME --out prog.pt2 — export NAME from SCRIPT with ``kiln.export``
and save the ExportedProgram with ``torch.export.save``.

NAME is a function or nn.Module defined by the script, exported with the example
arguments returned by ``NAME_inputs()`` (or ``example_inputs()``): a tuple of
positional arguments, or (args, kwargs).  If the script defines ``NAME_dynamic_shapes``
(a value, or a function returning one) it is passed as ``dynamic_shapes``.  A program
that is not one graph prints every problem Kiln found, each with the user's file:line,
and exits with status 1.
"""
from __future__ import annotations

import sys
import time

import torch

from .cli import UsageError
from .debug import script_target
from .exc import Unsupported
from .exporting import export
from .fx_ops import count_ops

HELP = "export a function or module as a torch.export ExportedProgram (.pt2), captured by Kiln"


def add_arguments(parser) -> None:
    parser.add_argument("target", metavar="SCRIPT.py:NAME",
                        help=f"a script and the function or module in it. {script_target.INPUTS_HELP}")
    parser.add_argument("--out", required=True, help="where to save the program (torch.export.save), e.g. prog.pt2")
    parser.add_argument("--print", action="store_true", dest="show", help="also print the exported program")


def run(args) -> int:
    try:
        target = script_target.load(args.target, run_name="__kiln_export__")
    except script_target.TargetError as e:
        raise UsageError(str(e)) from None
    spec = target.namespace.get(f"{target.name}_dynamic_shapes")
    if callable(spec):
        spec = spec()
    start = time.perf_counter()
    try:
        ep = export(target.obj, target.args, target.kwargs, dynamic_shapes=spec)
    except Unsupported as e:
        print(f"kiln export: {target.spec} cannot be exported as one graph:\n{e}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - start
    torch.export.save(ep, args.out)
    sig = ep.graph_signature
    print(f"exported {target.spec} in {seconds:.2f}s: {count_ops(ep.graph_module)} ops, "
          f"{len(sig.parameters)} parameters, {len(sig.buffers)} buffers, {len(sig.user_inputs)} inputs, "
          f"{len(sig.user_outputs)} outputs")
    if ep.range_constraints:
        print("range constraints: " + ", ".join(f"{k}: {v}" for k, v in ep.range_constraints.items()))
    print(f"saved to {args.out}")
    if args.show:
        print(ep)
    return 0
