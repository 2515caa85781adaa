"""kiln explain SCRIPT.py:NAME — run NAME from SCRIPT under Kiln and print what happened:
graphs, every graph break with its file:line and source line, op counts, guards.

NAME is a function or nn.Module defined by the script.  It is called with the
arguments returned by ``NAME_inputs()`` (or ``example_inputs()``) if the script
defines one — a tuple of positional arguments, or (args, kwargs) — else with none.
"""
from __future__ import annotations

import os
import runpy

from ..cli import UsageError
from .explain import explain

HELP = "explain what Kiln captures for a function: graphs, graph breaks, guards"


def add_arguments(parser) -> None:
    parser.add_argument("target", metavar="SCRIPT.py:NAME", help="a script and the function or module in it")
    parser.add_argument("--backend", default="eager", help="backend to compile with (default: eager)")
    parser.add_argument("--guards", action="store_true", help="also print each entry's guard function")


def run(args) -> int:
    path, sep, name = args.target.rpartition(":")
    if not sep or not path or not name:
        raise UsageError(f"expected SCRIPT.py:NAME, got {args.target!r}")
    if not os.path.exists(path):
        raise UsageError(f"no such script: {path}")
    namespace = runpy.run_path(path, run_name="__kiln_explain__")
    if name not in namespace:
        known = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_"))
        raise UsageError(f"{path} defines no {name!r}; callables there: {', '.join(known)}")
    target = namespace[name]
    maker = namespace.get(f"{name}_inputs") or namespace.get("example_inputs")
    call_args, call_kwargs = (), {}
    if maker is not None:
        made = maker()
        if isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], dict) and isinstance(made[0], tuple):
            call_args, call_kwargs = made
        else:
            call_args = made if isinstance(made, tuple) else (made,)
    report = explain(target, backend=args.backend)(*call_args, **call_kwargs)
    print(report)
    if args.guards:
        for e in report.entries:
            print(f"\n# {e.frame}\n{e.guard_source}")
    return 0
