"""``kiln.debug.minify``: from a wrong end-to-end result to the smallest graph that is wrong.

Steps:

1. run ``fn`` eagerly, in float64 (the reference) and under Kiln with the user's
   backend wrapped in a :class:`~kiln.debug.record.RecordingBackend`, which keeps every
   captured graph with the real inputs of its first call (aliasing included);
2. decide whether anything fails: a backend exception on any graph (Kiln itself would
   have fallen back to eager and hidden it), or, with ``accuracy=True``, an output, a
   mutated argument or (``training=True``) a gradient further from the reference than
   eager's own error, or an output that shares memory with other arguments or outputs
   than in eager, or an argument changed in place (or its version counter moved) where
   eager's was not, or the reverse (:func:`~kiln.debug.record.compare_runs`).  If nothing
   fails, say so and write nothing;
3. find the first graph, in capture order, that fails on its own recorded inputs
   (:func:`~kiln.debug.graph_check.check_graph`);
4. shrink it (:mod:`kiln.debug.delta`) and write a repro script
   (:mod:`kiln.debug.repro`), then check that the written script, loaded back, still
   fails, and say so if it does not.

If the end-to-end result is wrong but no graph is wrong on its own inputs, the problem
is between the graphs (glue, guards, graph breaks): reported as such, with no repro.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..backends import lookup
from ..fx_ops import count_ops
from .delta import GraphCase, shrink
from .graph_check import Failure, check_graph
from .record import ArgTemplate, GraphRecord, RecordingBackend, compare_runs, run_end_to_end
from .repro import load_repro, render_repro, trace_repro

__all__ = ["MinifyResult", "minify", "find_failure", "minify_graph"]


@dataclass
class MinifyResult:
    """What :func:`minify` found.  ``path`` is None when nothing failed or nothing was written.
    ``graph_index`` counts from 0; messages and file names count graphs from 1."""

    path: str | None
    reason: str
    graph_index: int | None = None
    ops: int | None = None
    original_ops: int | None = None
    graphs: int = 0
    checks: int = 0
    seconds: float = 0.0
    timed_out: bool = False
    code: str | None = None
    reproduces: bool | None = None

    def __str__(self) -> str:
        if self.path is None:
            return f"minify: {self.reason}"
        lines = [f"minify: graph {self.graph_index + 1} of {self.graphs} fails: {self.reason}",
                 f"  minimized from {self.original_ops} to {self.ops} op(s) in {self.checks} checks, "
                 f"{self.seconds:.1f}s" + (" (time limit reached: not fully minimized)" if self.timed_out else ""),
                 f"  repro: {self.path}"]
        if self.reproduces is False:
            lines.append("  WARNING: the written repro, loaded back, does not fail; see its text")
        return "\n".join(lines)


@dataclass
class FoundFailure:
    """The first failing graph of a run, or why there is none."""

    record: GraphRecord | None
    failure: Failure | None
    summary: str
    graphs: int


def find_failure(fn: Callable, args: tuple, kwargs: dict | None, *, backend: Any, accuracy: bool,
                 training: bool, progress: Callable[[str], None] | None = None) -> FoundFailure:
    """Steps 1-3 of the module docstring."""
    say = progress or (lambda msg: None)
    backend_fn = lookup(backend)
    template = ArgTemplate(tuple(args), dict(kwargs or {}))
    say("running eagerly")
    expected = run_end_to_end(fn, template, backend=None, training=training)
    recorder = RecordingBackend(backend_fn)
    say("running under Kiln with the backend")
    compiled, error = None, None
    try:
        compiled = run_end_to_end(fn, template, backend=recorder, training=training)
    except Exception as e:
        error = e
    graphs = len(recorder.graphs)
    for record in recorder.graphs:
        if record.compile_error is not None or record.call_error is not None:
            e = record.compile_error or record.call_error
            verdict = check_graph(record.gm, record.inputs, backend_fn, accuracy=False, training=training)
            if verdict.failure is not None:
                return FoundFailure(record, verdict.failure, f"graph {record.index + 1}: {verdict.failure.reason}", graphs)
            say(f"graph {record.index + 1} raised {type(e).__name__} in the run but not alone")
    if error is not None:
        return FoundFailure(None, None, f"the compiled run raised {type(error).__name__}: {error}, "
                                        f"but no graph fails on its own", graphs)
    if not accuracy:
        return FoundFailure(None, None, f"nothing fails: the backend raised on none of {graphs} graph(s)", graphs)
    say("running the float64 reference")
    try:
        reference = run_end_to_end(fn, template, backend=None, training=training, float64=True)
    except Exception:
        reference = None
    found = compare_runs(expected, compiled, reference)
    report = found.values
    if found.ok:
        return FoundFailure(None, None, f"nothing fails: {graphs} graph(s), every result within eager's noise "
                                        f"({report.worst}), aliasing and mutation as in eager" if report.worst else
                            f"nothing fails: {graphs} graph(s)", graphs)
    for record in recorder.graphs:
        say(f"checking graph {record.index + 1} of {graphs} ({record.ops} ops) on its recorded inputs")
        verdict = check_graph(record.gm, record.inputs, backend_fn, accuracy=True, training=training)
        if verdict.failure is not None:
            return FoundFailure(record, verdict.failure, f"graph {record.index + 1}: {verdict.failure.reason}", graphs)
    first = found.failures[0] if found.failures else str(report)
    return FoundFailure(None, None, f"the end-to-end result is wrong ({first}) but no graph is wrong on its own "
                                    f"recorded inputs: the problem is between graphs (glue, guards, breaks)", graphs)


def minify_graph(gm: torch.fx.GraphModule, inputs, failure: Failure, *, backend: Any, accuracy: bool,
                 training: bool, out_dir: str | None, graph_index: int, title: str,
                 time_limit: float = 150.0, progress: Callable[[str], None] | None = None,
                 file_stem: str | None = None) -> MinifyResult:
    """Step 4: shrink one failing graph and write its repro into ``out_dir``
    (as ``<file_stem>_<time>.py``, by default ``repro_graph<N>_<time>.py``, N counting from 1)."""
    start = time.monotonic()
    backend_fn = lookup(backend)
    original_ops = count_ops(gm)
    case = GraphCase(gm, inputs, training=training)
    small_gm, small_inputs, checks, timed_out = shrink(case, backend_fn, failure, accuracy=accuracy,
                                                       deadline=start + time_limit, progress=progress)
    final = check_graph(small_gm, small_inputs, backend_fn, accuracy=accuracy, training=training)
    kept = final.failure if failure.same_kind(final.failure) else failure
    source = render_repro(small_gm, small_inputs, backend=backend, accuracy=accuracy, training=training,
                          reason=kept.reason, kind=kept.kind, exc_type=kept.exc_type, title=title)
    reproduces = _reproduces(source, backend_fn, failure, accuracy=accuracy, training=training)
    path = _write(source, out_dir, file_stem or f"repro_graph{graph_index + 1}")
    return MinifyResult(path, kept.reason, graph_index, count_ops(small_gm), original_ops, checks=checks,
                        seconds=time.monotonic() - start, timed_out=timed_out, code=small_gm.code,
                        reproduces=reproduces)


def minify(fn: Callable, args: tuple, kwargs: dict | None = None, *, backend: Any, accuracy: bool = True,
           training: bool = False, out_dir: str | None = None, time_limit: float = 150.0,
           progress: Callable[[str], None] | None = None) -> MinifyResult:
    """Find the first graph on which ``backend`` fails and write a minimal repro of it.

    ``fn`` is a function or ``nn.Module``, called as ``fn(*args, **kwargs)``; its
    arguments are copied for every run (a module is deep-copied), so neither is changed.
    ``time_limit`` (seconds) bounds the shrinking; past it the smallest graph found so
    far is written.  See the module docstring for what counts as a failure.
    """
    if isinstance(args, torch.Tensor) or not isinstance(args, (tuple, list)):
        raise TypeError(f"minify(fn, args, ...): args must be a tuple of positional arguments, "
                        f"got {type(args).__name__}")
    start = time.monotonic()
    found = find_failure(fn, tuple(args), kwargs, backend=backend, accuracy=accuracy, training=training,
                         progress=progress)
    if found.record is None or found.failure is None:
        return MinifyResult(None, found.summary, graphs=found.graphs, seconds=time.monotonic() - start)
    record = found.record
    name = getattr(fn, "__qualname__", type(fn).__name__)
    result = minify_graph(record.gm, record.inputs, found.failure, backend=backend, accuracy=accuracy,
                          training=training, out_dir=out_dir, graph_index=record.index,
                          title=f"graph {record.index + 1} of {name} ({found.graphs} captured)",
                          time_limit=max(time_limit - (time.monotonic() - start), 1.0), progress=progress)
    result.graphs = found.graphs
    result.seconds = time.monotonic() - start
    return result


def _reproduces(source: str, backend_fn: Callable, failure: Failure, *, accuracy: bool, training: bool) -> bool:
    """Does the script, loaded back (its graph re-traced from the written code), still fail?"""
    try:
        module = load_repro(source)
        gm = trace_repro(module.Repro)
    except Exception:
        return False
    verdict = check_graph(gm, module.INPUTS, backend_fn, accuracy=accuracy, training=training)
    return failure.same_kind(verdict.failure)


def _write(source: str, out_dir: str | None, stem: str) -> str:
    out_dir = out_dir or os.path.join(os.getcwd(), "kiln_repros")
    os.makedirs(out_dir, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = os.path.join(out_dir, f"{stem}_{stamp}.py")
    n = 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(out_dir, f"{stem}_{stamp}_{n}.py")
    with open(path, "w") as f:
        f.write(source)
    return path
