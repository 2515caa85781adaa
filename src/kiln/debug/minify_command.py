"""kiln minify SCRIPT.py:NAME --backend B — find the first graph B gets wrong and write a
minimized, standalone repro script for it.

NAME and its example inputs are loaded as by ``kiln explain``.  B is a registered backend
name or ``module:attr``.  Exit status: 0 if nothing fails, 1 if a repro was written.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from ..cli import UsageError
from .minify import minify
from .script_target import load_target, resolve_backend as script_resolve_backend, TargetError

HELP = "minify a backend failure (error or accuracy) to a small standalone repro script"


def add_failure_arguments(parser) -> None:
    """What ``kiln minify`` and ``kiln bisect`` both take: the target, the backend under
    suspicion and what counts as failing."""
    parser.add_argument("target", metavar="SCRIPT.py:NAME", help="a script and the function or module in it")
    parser.add_argument("--backend", required=True, help="a registered backend name or module:attr")
    parser.add_argument("--training", action="store_true", help="also compare gradients (backward pass)")
    parser.add_argument("--no-accuracy", dest="accuracy", action="store_false",
                        help="only look for backend errors, not wrong values")


def add_arguments(parser) -> None:
    add_failure_arguments(parser)
    parser.add_argument("--out-dir", default=None, help="where to write the repro (default: ./kiln_repros)")
    parser.add_argument("--time-limit", type=float, default=150.0, help="seconds for shrinking (default: 150)")


def resolve_backend(text: str) -> Any:
    """:func:`script_target.resolve_backend`, a bad name a usage error."""
    try:
        return script_resolve_backend(text)
    except TargetError as e:
        raise UsageError(str(e)) from None


class Progress:
    """Each step as a timestamped line, with a spinner on a terminal (rich)."""

    def __init__(self, title: str):
        # function-level: rich is only needed when a command runs, not to build the parser
        from rich.console import Console
        self.console = Console(stderr=True, highlight=False)
        self.title = title
        self.start = time.monotonic()
        self.status = None

    def __enter__(self) -> Callable[[str], None]:
        if self.console.is_terminal:
            self.status = self.console.status(self.title)
            self.status.__enter__()
        return self.step

    def step(self, message: str) -> None:
        self.console.print(f"[dim]{time.monotonic() - self.start:6.1f}s[/dim] {message}")
        if self.status is not None:
            self.status.update(f"{self.title}: {message}")

    def __exit__(self, *exc) -> None:
        if self.status is not None:
            self.status.__exit__(*exc)


def load(args, run_name: str):
    try:
        return load_target(args.target, run_name)
    except TargetError as e:
        raise UsageError(str(e)) from None


def run(args) -> int:
    backend = resolve_backend(args.backend)
    target = load(args, "__kiln_minify__")
    with Progress(f"minifying {args.target} under {args.backend}") as step:
        result = minify(target.fn, target.args, target.kwargs, backend=backend, accuracy=args.accuracy,
                        training=args.training, out_dir=args.out_dir, time_limit=args.time_limit, progress=step)
    print(result)
    if result.code:
        print("\nminimized graph:\n" + result.code.strip("\n"))
    if result.path:
        print(f"\nrepro: {result.path}")
    return 1 if result.path else 0
