"""Per-call overhead of a compiled model: what the frontend costs on top of its graphs.

overhead = (time of one compiled call) - (time of calling the compiled graphs directly
with the example inputs they were compiled with).  The backend is wrapped by a
:class:`GraphRecorder`, which keeps what the backend returned for each graph and the
example inputs, so the difference is the frontend's own work on each call: guard
checks, glue that gathers inputs (parameters included) and rebuilds outputs, and
resumed frames after breaks.  Measured the same way for Kiln and torch.compile in one
process (``benchmarks/overhead.py``, ``kiln bench``).
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

from ..backends import declare_like


class GraphRecorder:
    """A backend that compiles with ``inner`` (default: run the GraphModule as it is) and
    keeps each compiled graph with its example inputs and the grad mode it was compiled
    under (the mode its calls run in: an inference graph replayed with grad enabled would
    build autograd history, and a ``scan`` would trace its backward, on every call) for
    timing.  ``__name__`` is the inner backend's name, which is what frontends label the
    backend with."""

    def __init__(self, inner: Callable | None = None, name: str = "eager"):
        self.inner = inner
        self.__name__ = name
        self.graphs: list[tuple[Callable, list, bool]] = []
        declare_like(self, inner)     # the graphs get the rules they get under ``inner``

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        compiled = gm.forward if self.inner is None else self.inner(gm, example_inputs)
        self.graphs.append((compiled, list(example_inputs), torch.is_grad_enabled()))
        return compiled

    def concrete_graphs(self) -> list[tuple[Callable, list, bool]]:
        """The graphs whose example inputs are real (symbolic ones cannot be replayed)."""
        return [(gm, ex, grad) for gm, ex, grad in self.graphs
                if not any(isinstance(e, (torch.SymInt, torch.SymFloat, torch.SymBool))
                           or type(e).__name__ == "FakeTensor" for e in ex)]


def interleaved_times(fns: list[Callable[[], object]], rounds: int, now=time.perf_counter) -> list[list[float]]:
    """Seconds of every call of each of ``fns``, called in turn ``rounds`` times (so
    that drift and bursts of load hit all of them alike)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(max(rounds, 1)):
        for fn, bucket in zip(fns, times):
            t0 = now()
            fn()
            bucket.append(now() - t0)
    return times


def interleaved_medians(fns: list[Callable[[], object]], rounds: int, now=time.perf_counter) -> list[float]:
    """Median seconds per call of each of ``fns`` (see ``interleaved_times``)."""
    return [statistics.median(b) for b in interleaved_times(fns, rounds, now)]


def spread(times: list[float]) -> float | None:
    """Interquartile range over median: how far apart the middle half of the repetitions
    lie, relative to the number reported (None below 4 repetitions, too few to say)."""
    if len(times) < 4:
        return None
    q1, median, q3 = statistics.quantiles(times, n=4)
    return (q3 - q1) / median if median > 0 else None


def model_overhead_us(compiled_call: Callable[[], object], backend: GraphRecorder,
                      calls: int = 200, rounds: int = 7, now: Callable[[], float] = time.perf_counter) -> float | None:
    """µs per call that ``compiled_call`` spends outside its graphs (None: not measurable:
    graphs with symbolic inputs, or a difference lost in timing noise).  ``now`` is the
    clock: wall time by default; ``time.thread_time`` counts only the CPU time of the
    calling thread, which other jobs on a shared machine do not inflate (with one torch
    thread, as the benchmarks run, all of a call's work is on that thread)."""
    graphs = backend.concrete_graphs()
    if not graphs or len(graphs) != len(backend.graphs):
        return None

    def run_compiled():
        for _ in range(calls):
            compiled_call()

    def run_graphs():
        for _ in range(calls):
            for gm, ex, grad in graphs:
                with torch.set_grad_enabled(grad):
                    gm(*ex)

    compiled_s, graphs_s = interleaved_medians([run_compiled, run_graphs], rounds, now)
    if compiled_s <= graphs_s:      # below the timing noise: not a measurement of zero
        return None
    return (compiled_s - graphs_s) / calls * 1e6
