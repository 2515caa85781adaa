"""Run one model under one frontend, in this process, and fill in a :class:`Result`.

This is what a worker subprocess does; it is a plain function so that it can also
be called directly (tests, debugging with ``pdb``).  The sequence is fixed so the
numbers mean the same thing for every model and frontend:

1. build the model and its inputs from seed 0 (torch, numpy and ``random`` alike);
   take the fp64 reference copy before anything runs;
2. eager: one seeded call (kept for accuracy), the fp64 reference call, warm-up;
3. warm the frontend up on ``lambda x: x + 1``, so its one-time start-up is not
   counted as the model's capture (it is timed, as ``first_compile_s``);
4. compiled: reset the frontend, compile (the backend wrapped by a
   ``bench.overhead.GraphRecorder``), one seeded call timed as the first call
   (capture and backend compile happen here), warm-up;
5. steady state: ``repeat`` rounds of one eager call then one compiled call, and
   the median of each, and their spread (``overhead.spread``).  Interleaving matters
   on a shared, noisy machine: a burst of
   load slows both sides of a round instead of skewing one median; then (inference)
   the model's own per-call overhead: a compiled call minus calling its compiled
   graphs directly on their example inputs (``bench.overhead``);
6. read the frontend's graph / break / recompile counts, compare accuracy.

A step is one forward (inference, under ``no_grad``) or forward + loss + backward
with gradients cleared first (training).  The phase being run is announced through
``on_phase`` so that a worker that crashes or hangs can still say where.
"""
from __future__ import annotations

import os
import random
import statistics
import time
import traceback
from dataclasses import asdict
from typing import Callable

import numpy as np
import torch

from .. import trace
from ..config import config
from . import checks, frontends, registry
from .overhead import GraphRecorder, interleaved_times, model_overhead_us, spread
from .results import EAGER_FAIL, FAIL_ACCURACY, FAIL_COMPILE, FAIL_RUN, PASS, Result, RunOptions

SEED = 0


def seed_all(seed: int = SEED) -> None:
    """Seed every RNG a model might draw from (BigBird's attention uses numpy's)."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def describe(exc: BaseException, limit: int = 300) -> str:
    """One line for the table: exception type and the first line of its message."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"[:limit]


def _cast_inputs(inputs: dict, device: torch.device, dtype: torch.dtype) -> dict:
    out = {}
    for k, v in inputs.items():
        if isinstance(v, torch.Tensor):
            v = v.to(device=device, dtype=dtype) if v.dtype.is_floating_point else v.to(device)
        out[k] = v
    return out


def run_settings(opts: RunOptions):
    """(training, device, dtype, clock) for a run with these options."""
    device = torch.device(opts.device)
    dtype = torch.bfloat16 if opts.precision == "bfloat16" else torch.float32
    return opts.mode == "training", device, dtype, _timer(device)


def build_model(spec: registry.ModelSpec, training: bool, device: torch.device, dtype: torch.dtype):
    """The model, seeded, on its device and dtype and in its mode, with its step function."""
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("CUDA was requested but torch.cuda.is_available() is False")
    seed_all()
    model = spec.build(training).to(device=device, dtype=dtype)
    model.train(training)
    return model, make_step(spec, training, model)


def make_step(spec: registry.ModelSpec, training: bool, model: torch.nn.Module):
    """``step(fn, inputs) -> {name: tensor}``: one benchmarked call of ``fn``.

    ``fn`` is the model or its compiled wrapper; gradients are always read from
    ``model`` itself so both sides name parameters the same way (a wrapper such as
    torch's OptimizedModule would prefix them).
    """

    def step(fn, inputs):
        if not training:
            with torch.no_grad():
                return checks.flatten(fn(**inputs))
        for p in model.parameters():
            p.grad = None
        loss = spec.loss(fn(**inputs))
        loss.backward()
        grads = {f"grad.{n}": p.grad for n, p in model.named_parameters() if p.grad is not None}
        return {"loss": loss.detach(), **grads}

    return step


def _timer(device: torch.device) -> Callable[[], float]:
    if device.type == "cuda":
        def now():
            torch.cuda.synchronize(device)
            return time.perf_counter()
        return now
    return time.perf_counter


class _EagerBroke(Exception):
    """The eager side failed during timing; carries the original exception."""


def warm_up_frontend(frontend) -> None:
    """Compile and call ``x + 1``: imports and first-use initialisation happen here, not
    in the first model's capture.  (Nothing is timed: each model's own overhead is
    measured after its run, see ``bench.overhead``.)"""
    def add_one(x):
        return x + 1

    x = torch.ones(1)
    frontend.reset()
    compiled = frontend.compile(add_one, "eager")
    for _ in range(3):
        compiled(x)


def trace_name(model: str, opts: RunOptions) -> str:
    """The per-model folder under ``opts.trace_dir`` (and the report's file name, less .html)."""
    return f"{model}-{opts.mode}-{opts.device}"


def run_model(name: str, frontend_name: str, opts: RunOptions,
              on_phase: Callable[[str], None] = lambda phase: None) -> Result:
    """Run ``name`` under ``frontend_name`` with ``opts``; never raises for model errors.

    With ``opts.trace_dir`` and the kiln frontend, the compiled side (from compile to
    the end of timing) writes Kiln's trace, and the row itself is added to it as a
    ``bench_result`` record, for ``kiln bench --report``.
    """
    return traced_row(_run_model, name, frontend_name, opts, on_phase)


def traced_row(run, *args):
    """``run(*args)``, whose row is added to Kiln's trace as a ``bench_result`` record when
    the run wrote a trace (``_start_trace``); the trace is closed either way."""
    try:
        res = run(*args)
        if config.trace_dir:
            trace.emit("bench_result", **asdict(res))
        return res
    finally:
        if config.trace_dir:
            config.trace_dir = ""
            trace.close()


def _start_trace(name: str, frontend_name: str, opts: RunOptions) -> None:
    if opts.trace_dir and frontend_name == "kiln":
        config.trace_dir = os.path.join(opts.trace_dir, trace_name(name, opts))


def _run_model(name: str, frontend_name: str, opts: RunOptions, on_phase: Callable[[str], None]) -> Result:
    """run_model's work; see run_model.

    Runs with ``opts.threads`` intra-op threads (1 by default): on a small shared
    machine, OpenMP threads that wait for each other at every op barrier turn any
    outside load into 10-100x slowdowns of whole calls, which swamps the frontend
    costs this harness is about.  One thread per worker keeps the numbers stable.
    """
    torch.set_num_threads(opts.threads)
    fe = frontends.get(frontend_name)
    res = Result(model=name, frontend=frontend_name, backend=fe.backend_label(opts.backend), mode=opts.mode,
                 precision=opts.precision, device=opts.device)
    spec = registry.get(name)
    training, device, dtype, now = run_settings(opts)

    # 1-2. eager side
    on_phase("eager")
    try:
        model, step = build_model(spec, training, device, dtype)
        inputs = _cast_inputs(spec.inputs(training, torch.Generator().manual_seed(SEED)), device, dtype)
        do_accuracy = opts.accuracy and checks.available()
        if do_accuracy:
            ref_model, ref_inputs = checks.fp64_copy(model), checks.fp64_copy(inputs)
        seed_all()
        eager_out = checks.snapshot(step(model, inputs))
        if do_accuracy:
            on_phase("fp64 reference")
            seed_all()
            ref_out = checks.snapshot(make_step(spec, training, ref_model)(ref_model, ref_inputs))
            del ref_model, ref_inputs
        on_phase("eager warm-up")
        for _ in range(opts.warmup):
            step(model, inputs)
    except Exception as exc:  # the model itself is broken: not the compiler's fault
        traceback.print_exc()
        res.status, res.reason = EAGER_FAIL, describe(exc)
        return res

    # 3. warm the frontend up (imports, first-use initialisation), which should not be
    # billed to the first model's capture time.
    probe_error = ""
    on_phase("warm-up")
    try:
        t0 = time.perf_counter()
        warm_up_frontend(fe)
        res.first_compile_s = time.perf_counter() - t0
    except Exception as exc:  # not worth failing a row over
        traceback.print_exc()
        probe_error = f"frontend warm-up failed: {describe(exc)}"

    # 4. compiled side: errors from compile() or from a frontend during the first
    # call are the frontend's (fail_compile); anything else is a run failure.
    on_phase("compile")
    fe.reset()
    _start_trace(name, frontend_name, opts)
    try:
        recorder = GraphRecorder(fe.backend_callable(opts.backend), opts.backend)
        compiled = fe.compile(model, recorder)
    except Exception as exc:
        traceback.print_exc()
        res.status, res.reason = FAIL_COMPILE, describe(exc)
        return res
    try:
        seed_all()
        t0 = now()
        compiled_out = checks.snapshot(step(compiled, inputs))
        res.first_call_s = now() - t0
    except Exception as exc:
        traceback.print_exc()
        res.status = FAIL_COMPILE if fe.is_frontend_error(exc) else FAIL_RUN
        res.reason = describe(exc)
        fill_stats(res, fe)
        return res

    # 5. steady state, eager and compiled interleaved
    on_phase("timing")

    def eager_call():
        try:
            step(model, inputs)
        except Exception as exc:
            raise _EagerBroke() from exc

    try:
        for _ in range(max(opts.warmup - 1, 0)):
            step(compiled, inputs)
        eager_times, compiled_times = interleaved_times([eager_call, lambda: step(compiled, inputs)],
                                                        opts.repeat if opts.performance else 1, now)
        eager_s, compiled_s = statistics.median(eager_times), statistics.median(compiled_times)
    except _EagerBroke as broke:
        traceback.print_exception(broke.__cause__)
        res.status, res.reason = EAGER_FAIL, "eager failed after compiling: " + describe(broke.__cause__)
        fill_stats(res, fe)
        return res
    except Exception as exc:
        traceback.print_exc()
        res.status, res.reason = FAIL_RUN, describe(exc)
        fill_stats(res, fe)
        return res

    if opts.performance and not training:
        on_phase("overhead")
        try:
            res.overhead_us = model_overhead_us(lambda: step(compiled, inputs), recorder)
        except Exception as exc:  # not worth failing a row over
            traceback.print_exc()
            probe_error = f"overhead measurement failed: {describe(exc)}"

    # 6. counts and accuracy
    fill_stats(res, fe)
    res.capture_s = max(res.first_call_s - eager_s, 0.0)
    if opts.performance:
        res.eager_ms, res.compiled_ms = eager_s * 1e3, compiled_s * 1e3
        res.speedup = eager_s / compiled_s if compiled_s > 0 else None
        res.eager_spread, res.compiled_spread = spread(eager_times), spread(compiled_times)
    res.status = PASS
    if opts.accuracy:
        on_phase("accuracy")
        if do_accuracy:
            try:
                res.accuracy, detail = checks.compare(eager_out, compiled_out, ref_out, name=name)
            except Exception as exc:   # no verdict is not a pass
                traceback.print_exc()
                res.accuracy, detail = "fail", f"the accuracy check itself raised {describe(exc)}"
        else:
            res.accuracy, detail = "unavailable", f"{checks.ACCURACY_MODULE} is not available; accuracy not checked"
        if res.accuracy == "fail":
            res.status, res.reason = FAIL_ACCURACY, detail
        elif res.accuracy == "unavailable":
            res.reason = detail
    if probe_error:
        res.reason = (res.reason + "; " if res.reason else "") + probe_error
    return res


def fill_stats(res, fe) -> None:
    """Copy the frontend's graph, break and recompile counts onto a result row (either kind)."""
    try:
        stats = fe.stats()
    except Exception as exc:
        traceback.print_exc()
        res.top_breaks = f"(stats unavailable: {describe(exc, 100)})"
        return
    res.graphs, res.breaks, res.recompiles = stats["graphs"], stats["breaks"], stats["recompiles"]
    res.top_breaks = stats["top_breaks"]
