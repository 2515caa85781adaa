"""The ``kiln`` command line: one entry point, one subcommand per tool.

``python -m kiln`` (``kiln/__main__.py``) runs the same ``main``.

Why a table of subcommands: each tool (``bench`` now; ``explain`` and ``minify``
from their owners) lives with its own code and registers here with one line.  A
subcommand module provides three names:

* ``HELP``: one line for ``kiln --help``;
* ``add_arguments(parser)``: fills its ``argparse`` sub-parser;
* ``run(args) -> int``: does the work and returns the exit status.

A subcommand raises :class:`UsageError` for a bad combination of arguments that
argparse cannot check itself (an unknown model name, say); ``main`` prints it the
argparse way and exits with status 2.  Modules are imported only when the parser is
built, and must be cheap to import (no model building at import time).
"""
from __future__ import annotations

import argparse
import importlib
import sys

#: subcommand -> module providing HELP, add_arguments(parser) and run(args)
SUBCOMMANDS: dict[str, str] = {
    "bench": "kiln.bench.command",
    "explain": "kiln.debug.explain_command",
    "report": "kiln.report.command",
    "minify": "kiln.debug.minify_command",
    "bisect": "kiln.debug.bisect_command",
    "export": "kiln.export_command",
    "cache": "kiln.cache_command",
}


class UsageError(Exception):
    """Bad command-line input found after parsing; reported as ``kiln <cmd>: error: ...``."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kiln", description="Kiln: a Python-level JIT compiler for PyTorch.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module_name in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=module.HELP, description=(module.__doc__ or "").strip(),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(_run=module.run, _parser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except UsageError as exc:
        args._parser.print_usage(sys.stderr)
        print(f"kiln {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
