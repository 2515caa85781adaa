"""kiln explain SCRIPT.py:NAME — run NAME from SCRIPT under Kiln and print what happened:
graphs, every graph break with its file:line and source line, op counts, guards.

NAME is a function or nn.Module defined by the script.  It is called with the
arguments returned by ``NAME_inputs()`` (or ``example_inputs()``) if the script
defines one — a tuple of positional arguments, or (args, kwargs) — else with none;
a NAME that needs arguments and has neither is an error that says which are missing.
"""
from __future__ import annotations

from ..cli import UsageError
from . import script_target
from .explain import explain

HELP = "explain what Kiln captures for a function: graphs, graph breaks, guards"


def add_arguments(parser) -> None:
    parser.add_argument("target", metavar="SCRIPT.py:NAME",
                        help=f"a script and the function or module in it. {script_target.INPUTS_HELP}")
    parser.add_argument("--backend", default="eager",
                        help="backend to compile with: a registered name or module:attr (default: eager)")
    parser.add_argument("--guards", action="store_true", help="also print each entry's guard function")


def run(args) -> int:
    try:
        backend = script_target.resolve_backend(args.backend)
        target = script_target.load(args.target, run_name="__kiln_explain__")
    except script_target.TargetError as e:
        raise UsageError(str(e)) from None
    report = explain(target.obj, backend=backend)(*target.args, **target.kwargs)
    print(report)
    if args.guards:
        for e in report.entries:
            print(f"\n# {e.frame}\n{e.guard_source}")
    return 0
