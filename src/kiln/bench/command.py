"""kiln bench: run the model suite under Kiln and/or torch.compile and report.

Each model runs in its own subprocess (a crash or hang costs one row); results are
shown as a table with a summary, and optionally written as CSV and a PNG chart.
The options follow PyTorch's benchmarks/dynamo runners where they overlap.

Examples:
  kiln bench --suite quick --frontend both      # the demo: 4 small models, Kiln beside torch.compile
  kiln bench --suite hf --frontend both --plot chart.png --output results.csv
  kiln bench --only bert --training --backend aot_eager --accuracy
  kiln bench --suite quick --report reports/          # one HTML report per model
  kiln bench --suite quick --dynamic --frontend both  # a series of input sizes per model
"""
from __future__ import annotations

import argparse
import os
import time
from contextlib import nullcontext

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..cli import UsageError
from ..report import write_report
from . import driver, dynamic, dynamic_report, frontends as fe_mod, registry, report, runner
from .plot import plot
from .results import DEVICES, FRONTENDS, RunOptions

#: the terminal width the table is kept readable in (report.build_table), and the
#: width of the table written to a pipe or file
TABLE_WIDTH = 120

HELP = "benchmark the model suite (accuracy, speed, graphs, breaks), optionally side by side with torch.compile"


def _split(values):
    """Flatten repeated and comma-separated values: ``--only a,b --only c``."""
    return [v for value in values or [] for v in value.split(",") if v]


def add_arguments(p: argparse.ArgumentParser) -> None:
    sel = p.add_argument_group("which models")
    sel.add_argument("--suite", default="quick", help=f"model suite: {', '.join(registry.suites())} (default: quick)")
    sel.add_argument("--only", action="append", metavar="NAME", help="run only these models (repeatable, or a,b)")
    sel.add_argument("-k", action="append", dest="pattern", metavar="PATTERN",
                     help="keep models whose name contains PATTERN (repeatable)")
    sel.add_argument("--no-skip", action="store_true", help="also run models on the known-failure list (skips.py)")
    sel.add_argument("--list", action="store_true", help="list the models of the selection and exit")

    how = p.add_argument_group("how to run them")
    how.add_argument("--frontend", choices=(*FRONTENDS, "both"), default="kiln",
                     help="kiln, torch (torch.compile, same backend) or both side by side (default: kiln)")
    how.add_argument("--backend", default="eager", help="backend name, the same for both frontends (default: eager)")
    how.add_argument("--accuracy", action="store_true", help="check accuracy (default: accuracy and performance)")
    how.add_argument("--performance", action="store_true", help="measure speed (default: accuracy and performance)")
    mode = how.add_mutually_exclusive_group()
    mode.add_argument("--inference", dest="mode", action="store_const", const="inference",
                      help="forward under no_grad (the default)")
    mode.add_argument("--training", dest="mode", action="store_const", const="training",
                      help="forward + loss + backward; accuracy compares loss and every gradient")
    prec = how.add_mutually_exclusive_group()
    prec.add_argument("--float32", dest="precision", action="store_const", const="float32", help="(the default)")
    prec.add_argument("--bfloat16", dest="precision", action="store_const", const="bfloat16")
    how.add_argument("--dynamic", action="store_true",
                     help=f"compile each model once and call it over a series of {len(dynamic.SERIES)} input sizes "
                          "(sequence lengths, batch sizes); reports graphs, recompiles, limit hits, the series' "
                          "time and the accuracy of every call")
    how.add_argument("--devices", action="append", choices=DEVICES, metavar="DEVICE",
                     help="cpu or cuda (repeatable; default cpu)")
    how.add_argument("-n", "--repeat", type=int, default=20, help="timed rounds; the median is reported (default: 20)")
    how.add_argument("--warmup", type=int, default=2, help="untimed calls before timing (default: 2)")
    how.add_argument("--threads", type=int, default=1,
                     help="torch intra-op threads per worker; 1 keeps timings stable on shared machines (default: 1)")
    how.add_argument("--timeout", type=float, default=300.0,
                     help="seconds per model and frontend before giving up (default: 300)")
    how.add_argument("--heartbeat", type=float, default=driver.HEARTBEAT_S, metavar="SECONDS",
                     help="while a worker runs, say every SECONDS that it is alive and in which phase "
                          f"(default: {driver.HEARTBEAT_S:g})")

    out = p.add_argument_group("output")
    out.add_argument("--output", metavar="CSV", help="write every row to this CSV file")
    out.add_argument("--plot", metavar="PNG", help="write a chart comparing the frontends to this PNG file")
    out.add_argument("--report", metavar="DIR",
                     help="write an HTML report of what Kiln did per model into DIR (traces in DIR/traces)")
    p.set_defaults(mode="inference", precision="float32")


def _check(args) -> tuple[list[str], list[str], RunOptions, list[str]]:
    """Validate what argparse cannot; returns (models, frontends, options, devices)."""
    if args.repeat < 1:
        raise UsageError(f"-n/--repeat must be at least 1, got {args.repeat}")
    if args.warmup < 0:
        raise UsageError(f"--warmup must be >= 0, got {args.warmup}")
    if args.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {args.threads}")
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout:g}")
    if args.heartbeat <= 0:
        raise UsageError(f"--heartbeat must be positive, got {args.heartbeat:g}")
    if args.dynamic and args.plot:
        raise UsageError("--plot draws speedups and capture times, which --dynamic does not measure; "
                         "use --output for the series' CSV")
    try:
        specs = registry.select(args.suite, _split(args.only), _split(args.pattern))
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    if not specs:
        raise UsageError(f"no model matches (suite {args.suite!r}, -k {_split(args.pattern)}); "
                         f"known models: {', '.join(registry.names())}")
    frontends = list(FRONTENDS) if args.frontend == "both" else [args.frontend]
    for name in frontends:
        known = fe_mod.get(name).known_backends()
        if args.backend not in known:
            raise UsageError(f"unknown backend {args.backend!r} for the {name} frontend; "
                             f"known backends: {', '.join(known)}")
    devices = list(dict.fromkeys(args.devices or ["cpu"]))
    if "cuda" in devices:
        if not torch.cuda.is_available():
            raise UsageError("--devices cuda was given but torch.cuda.is_available() is False")
    both = not args.accuracy and not args.performance
    trace_dir = os.path.abspath(os.path.join(args.report, "traces")) if getattr(args, "report", None) else ""
    opts = RunOptions(backend=args.backend, mode=args.mode, precision=args.precision,
                      accuracy=args.accuracy or both, performance=args.performance or both,
                      repeat=args.repeat, warmup=args.warmup, threads=args.threads, trace_dir=trace_dir,
                      dynamic=args.dynamic)
    return [s.name for s in specs], frontends, opts, devices


def run(args) -> int:
    models, frontends, opts, devices = _check(args)
    out, err = Console(), Console(stderr=True)
    if not out.is_terminal:   # pipes and files: the width the table is laid out for, not 80
        out = Console(width=TABLE_WIDTH)
    if args.list:
        for name in models:
            spec = registry.get(name)
            out.print(f"{name:22} {','.join(spec.suites):14} {spec.description}")
        return 0

    jobs = driver.plan(models, frontends, opts, devices)
    what = "accuracy+performance" if opts.accuracy and opts.performance else \
        ("accuracy" if opts.accuracy else "performance")
    if opts.dynamic:
        what = f"dynamic: {len(dynamic.SERIES)} calls of changing sizes" + (", accuracy" if opts.accuracy else "")
    title = (f"kiln bench: {args.suite if not args.only else 'selected'} ({len(models)} models), "
             f"backend {opts.backend}, {opts.mode}, {opts.precision}, {what}")
    rows = _run_with_progress(jobs, args, err)
    if not rows:
        return 130
    shown = dynamic_report if opts.dynamic else report
    out.print(shown.build_table(rows, title=title))
    for line in shown.summary_lines(rows):   # long lines left to the terminal to wrap (and whole in files)
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    if args.output:
        report.write_csv(rows, args.output)
        err.print(f"wrote {args.output}")
    if args.plot:
        plot(rows, args.plot, title=title)
        err.print(f"wrote {args.plot}")
    if args.report:
        for path in _write_reports(jobs, args.report):
            err.print(f"wrote {path}")
    return 0


def _write_reports(jobs, directory: str) -> list[str]:
    """One HTML page per (model, mode, device) whose kiln run left a trace."""
    written = []
    for job in jobs:
        if job.frontend != "kiln":
            continue
        name = runner.trace_name(job.model, job.opts)
        trace_dir = os.path.join(job.opts.trace_dir, name)
        if not os.path.isdir(trace_dir):
            continue
        out = os.path.join(directory, f"{name}.html")
        o = job.opts
        write_report(trace_dir, out, title=f"Kiln report: {job.model} ({o.mode}, {o.backend}, {o.precision}, {o.device})")
        written.append(out)
    return written


def _run_with_progress(jobs, args, err):
    """Run the jobs behind a progress bar; a Ctrl-C keeps the rows done so far.

    Each job says when it starts, every ``--heartbeat`` seconds while its worker
    runs (with the phase the worker is in: a long compile shows as alive), and when it
    ends.  The bar is drawn only on a terminal; otherwise (CI logs, pipes) those are
    plain lines, so logs stay readable.
    """
    rows = []
    start = time.perf_counter()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    progress = Progress(*columns, console=err, transient=True) if err.is_terminal else None
    with progress or nullcontext():
        task = progress.add_task("starting", total=len(jobs)) if progress else None
        say = progress.console.print if progress else err.print

        def on_start(job):
            say(f"  {job.title}: started", markup=False, highlight=False)
            if progress:
                progress.update(task, description=job.title)

        def on_heartbeat(job, elapsed, phase):
            say(f"  {job.title}: still running after {elapsed:.0f} s (phase: {phase})", markup=False,
                highlight=False)

        def on_result(job, row):
            speed = f" {row.speedup:.2f}x" if getattr(row, "speedup", None) else ""
            if getattr(row, "series_s", None) is not None:
                speed = f" series {row.series_s:.2f} s, {row.graphs} graphs"
            wall = f" ({row.wall_s:.1f} s)" if row.wall_s is not None else ""
            say(f"  {job.title}: {row.status}{speed}{wall}", markup=False, highlight=False)
            if progress:
                progress.advance(task)

        try:
            driver.run_all(jobs, args.timeout, no_skip=args.no_skip, on_start=on_start, on_result=on_result,
                           on_heartbeat=on_heartbeat, heartbeat_s=args.heartbeat, collect=rows)
        except KeyboardInterrupt:
            err.print(f"interrupted; reporting the {len(rows)} row(s) finished")
    err.print(f"ran {len(rows)} job(s) in {time.perf_counter() - start:.1f} s")
    return rows
