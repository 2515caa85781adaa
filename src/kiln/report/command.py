"""kiln report TRACE_DIR | SCRIPT.py:NAME — a self-contained HTML page of what Kiln did.

With a directory, renders the trace that a run with KILN_TRACE_DIR=DIR (or
kiln.config.trace_dir) wrote there.  With SCRIPT.py:NAME, first runs NAME compiled
with the trace on, then renders that.  The page shows the source coloured by graph
with the breaks marked, every compiled frame's entries (guards, graph, glue, times),
recompiles and a timeline; see docs/report.md.

Examples:
  KILN_TRACE_DIR=trace python train.py && kiln report trace -o report.html
  kiln report tests/models/bigbird_script.py:model -o bigbird.html --measure 5
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

from .. import api, trace
from ..cli import UsageError
from ..config import config
from ..debug import script_target
from . import write_report

HELP = "write an HTML report of what Kiln did (from a trace directory, or by running SCRIPT.py:NAME)"


def add_arguments(parser) -> None:
    parser.add_argument("target", metavar="TRACE_DIR|SCRIPT.py:NAME",
                        help="a directory of kiln-trace-*.jsonl files, or a script and the function or module in it. "
                             + script_target.INPUTS_HELP)
    parser.add_argument("-o", "--output", default="report.html", help="the HTML file to write (default: report.html)")
    parser.add_argument("--title", help="the page title (default: from the target)")
    run = parser.add_argument_group("SCRIPT.py:NAME only")
    run.add_argument("--backend", default="eager",
                     help="backend to compile with: a registered name or module:attr (default: eager)")
    run.add_argument("--calls", type=int, default=1, help="compiled calls to make (default: 1)")
    run.add_argument("--measure", type=int, default=0, metavar="N",
                     help="also time N eager and N compiled calls, interleaved, and show the medians")
    run.add_argument("--trace-dir", help="keep the trace here (default: a temporary directory)")


def run(args) -> int:
    if os.path.isdir(args.target):
        trace_dir, title = args.target, args.title or f"Kiln report: {args.target}"
    elif ":" not in args.target:
        raise UsageError(f"{args.target} is neither a trace directory nor SCRIPT.py:NAME")
    else:
        if args.calls < 1 or args.measure < 0:
            raise UsageError("--calls must be at least 1 and --measure at least 0")
        try:
            backend = script_target.resolve_backend(args.backend)
            target = script_target.load(args.target, run_name="__kiln_report__")
        except script_target.TargetError as e:
            raise UsageError(str(e)) from None
        trace_dir = args.trace_dir or tempfile.mkdtemp(prefix="kiln-trace-")
        trace_script(target, trace_dir, backend, args.calls, args.measure)
        title = args.title or f"Kiln report: {target.spec}"
    try:
        report = write_report(trace_dir, args.output, title)
    except FileNotFoundError as e:
        raise UsageError(str(e)) from None
    print(f"wrote {args.output}: {len(report.graphs)} graphs, {len(report.graph_breaks)} graph breaks, "
          f"{len(report.fallbacks)} eager fallbacks, {len(report.recompiles)} recompiles (trace in {trace_dir})")
    return 0


def trace_script(target, trace_dir: str, backend, calls: int = 1, measure: int = 0) -> None:
    """Call the target compiled ``calls`` times with the trace written to ``trace_dir``."""
    api.reset()
    saved = config.trace_dir
    config.trace_dir = trace_dir
    try:
        compiled = api.compile(target.obj, backend=backend)
        for _ in range(calls):
            compiled(*target.args, **target.kwargs)
        if measure:
            eager_s, compiled_s = _interleaved(target, compiled, measure)
            trace.emit("measure", calls=measure, eager_ms=eager_s * 1e3, compiled_ms=compiled_s * 1e3,
                       what="median wall time of one call, eager and compiled calls interleaved")
    finally:
        config.trace_dir = saved
        trace.close()


def _interleaved(target, compiled, n: int) -> tuple[float, float]:
    eager, comp = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        target.obj(*target.args, **target.kwargs)
        t1 = time.perf_counter()
        compiled(*target.args, **target.kwargs)
        t2 = time.perf_counter()
        eager.append(t1 - t0)
        comp.append(t2 - t1)
    return statistics.median(eager), statistics.median(comp)
