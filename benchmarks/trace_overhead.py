"""What the structured trace (KILN_TRACE_DIR / kiln.config.trace_dir) costs in capture time.

    .venv/bin/python benchmarks/trace_overhead.py [--rounds N] [--only bert,gpt2]

For each model of the bench's quick suite, in one process: capture it (kiln.reset(),
then one compiled call) with the trace off and on, alternating which goes first,
``rounds`` times each after one discarded warm-up round, and report the medians of
``kiln.metrics.capture_seconds`` (capture wall time, backend compile included) and
of the first call's wall time.  Alternating and taking medians keeps a shared
machine's load from landing on one side only.

On a busy machine the difference of two medians is still noisy, so the last column
measures the trace's own cost directly: the time spent inside ``kiln.trace``'s entry
points during the traced captures (each wrapped in a timer), as a share of capture time.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

import kiln
from kiln import trace
from kiln.bench import registry
from kiln.bench.runner import seed_all
from kiln.report.collect import load


TRACE_ENTRY_POINTS = ("capture_start", "capture_end", "graph", "entry", "graph_break", "fallback", "recompile",
                      "recompile_limit", "backend_compile", "backend_fallback", "note_origin", "emit")


class TraceTimer:
    """Wraps kiln.trace's entry points (capture code calls them as ``trace.NAME``) with a timer."""

    def __init__(self):
        self.seconds = 0.0
        self.saved = {}

    def __enter__(self):
        for name in TRACE_ENTRY_POINTS:
            fn = self.saved[name] = getattr(trace, name)
            setattr(trace, name, self._timed(fn))
        return self

    def _timed(self, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
        return timed

    def __exit__(self, *exc):
        for name, fn in self.saved.items():
            setattr(trace, name, fn)


def first_call(model, inputs, trace_dir: str) -> tuple[float, float]:
    """(capture seconds, first-call seconds) of a fresh compile."""
    kiln.reset()
    kiln.config.trace_dir = trace_dir
    try:
        compiled = kiln.compile(model)
        seed_all()
        t0 = time.perf_counter()
        with torch.no_grad():
            compiled(**inputs)
        wall = time.perf_counter() - t0
    finally:
        kiln.config.trace_dir = ""
        trace.close()
    return kiln.metrics.capture_seconds, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", help="comma-separated model names (default: the quick suite)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = args.only.split(",") if args.only else [s.name for s in registry.select("quick", [], [])]
    print(f"{'model':8} {'capture off':>12} {'capture on':>12} {'overhead':>9}   "
          f"{'1st call off':>12} {'1st call on':>12} {'captures':>8}   {'in trace code':>14}")
    totals = {"off": 0.0, "on": 0.0}
    for name in names:
        spec = registry.get(name)
        seed_all()
        model = spec.build(False).eval()
        inputs = spec.inputs(False, torch.Generator().manual_seed(0))
        runs: dict = {"off": [], "on": []}
        captures = 0
        own: list = []          # (seconds inside kiln.trace, capture seconds) per traced run
        for r in range(args.rounds + 1):
            order = ("off", "on") if r % 2 == 0 else ("on", "off")
            for side in order:
                with tempfile.TemporaryDirectory() as d, TraceTimer() as timer:
                    result = first_call(model, inputs, d if side == "on" else "")
                    if side == "on":
                        captures = len(load(d).captures)
                        if r > 0:
                            own.append((timer.seconds, result[0]))
                if r > 0:
                    runs[side].append(result)
        cap = {s: statistics.median(c for c, _ in runs[s]) for s in runs}
        wall = {s: statistics.median(w for _, w in runs[s]) for s in runs}
        totals["off"] += cap["off"]
        totals["on"] += cap["on"]
        print(f"{name:8} {cap['off'] * 1e3:10.1f}ms {cap['on'] * 1e3:10.1f}ms {100 * (cap['on'] / cap['off'] - 1):8.1f}%   "
              f"{wall['off'] * 1e3:10.1f}ms {wall['on'] * 1e3:10.1f}ms {captures:8d}   "
              f"{statistics.median(t for t, _ in own) * 1e3:6.2f}ms {100 * statistics.median(t / c for t, c in own):5.2f}%")
    print(f"{'total':8} {totals['off'] * 1e3:10.1f}ms {totals['on'] * 1e3:10.1f}ms "
          f"{100 * (totals['on'] / totals['off'] - 1):8.1f}%")


if __name__ == "__main__":
    main()
