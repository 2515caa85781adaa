"""``kiln bench --dynamic``: one compile, then a series of input sizes.

What a user of dynamic shapes waits for is not one steady call but a stream of
calls whose sizes keep changing (sequence lengths, batch sizes): every capture and
recompile along the way is part of the cost.  So a dynamic run builds the model
once, compiles it once with the frontend's defaults (``kiln.compile(model,
backend=B)`` and ``torch.compile(model, backend=B)``, both ``dynamic=None``:
automatic dynamic, first call static, a size that changes becomes symbolic on the
recompile) and calls it at every size of :data:`SERIES`, the same series for both
frontends.  The sequence:

1. build the model (seed 0) and the inputs of every call (call ``i`` from a
   generator seeded ``i``); take the fp64 reference copy;
2. eager: one untimed call at the first size (one-time lazy initialisation), then the
   whole series timed (``eager_series_s``), then the fp64 reference series;
3. warm the frontend up on a trivial function with the run's backend, so one-time
   imports are billed to neither the model nor the series;
4. reset the frontend, compile, and time the whole compiled series (``series_s``):
   captures, recompiles and backend compiles included.  Every call is seeded the
   same way on both sides;
5. read graphs, breaks, recompiles and recompile-limit hits; compare every call's
   outputs with eager's on the same inputs (``checks.compare``, fp64 reference).

A model whose spec has no ``sized_inputs`` cannot run the series and is reported as
``skipped`` with that reason.  Models whose inputs have no sequence dimension (the
MLP, images, Whisper's fixed-length features) vary only the batch size: the
``varies`` and ``shapes`` columns say what the series really exercised.
"""
from __future__ import annotations

import traceback
from typing import Callable

import torch

from . import checks, frontends, registry
from .results import EAGER_FAIL, FAIL_ACCURACY, FAIL_COMPILE, FAIL_RUN, PASS, SKIPPED, DynamicResult, RunOptions
from .runner import (SEED, _cast_inputs, _start_trace, build_model, describe, fill_stats, make_step, run_settings,
                     seed_all, traced_row)

#: sequence lengths of the series, at batch size 2 (changing up and down, repeats included)
SEQ_LENGTHS = (8, 9, 12, 16, 5, 20, 24, 7, 31, 10, 14, 18)
#: then the batch size changes (1 is a size both frontends specialise on)
BATCHES = ((16, 4), (12, 3), (16, 1))
#: (sequence length, batch size) of every call, in order
SERIES: tuple[tuple[int, int], ...] = tuple((s, 2) for s in SEQ_LENGTHS) + BATCHES


def series_inputs(spec: registry.ModelSpec, training: bool, series=SERIES) -> list[dict]:
    """The keyword arguments of every call: call ``i`` draws from a generator seeded ``i``."""
    return [spec.sized_inputs(seq, batch)(training, torch.Generator().manual_seed(SEED + i))
            for i, (seq, batch) in enumerate(series)]


def shape_key(inputs: dict) -> tuple:
    """The tensor shapes of one call's inputs, by argument name."""
    return tuple(sorted((k, tuple(v.shape)) for k, v in inputs.items() if isinstance(v, torch.Tensor)))


def varies(inputs: list[dict]) -> str:
    """``"seq,batch"``, ``"batch"``, ``"seq"`` or ``"nothing"``: which sizes of the series changed.

    The batch size is every input's first dimension; any other dimension that changes
    counts as a sequence length.
    """
    batch = seq = False
    for k in {k for inp in inputs for k, v in inp.items() if isinstance(v, torch.Tensor)}:
        shapes = {tuple(inp[k].shape) for inp in inputs if k in inp}
        dims = max((len(s) for s in shapes), default=0)
        for d in range(dims):
            if len({s[d] for s in shapes if len(s) > d}) > 1:
                batch, seq = batch or d == 0, seq or d > 0
    return ",".join(n for n, on in (("seq", seq), ("batch", batch)) if on) or "nothing"


def _warm_up(fe, backend: str) -> None:
    """Compile and call ``x + 1`` with the run's backend: the frontend's and the backend's
    one-time start-up (imports, first-use initialisation) happens here."""
    def add_one(x):
        return x + 1

    fe.reset()
    compiled = fe.compile(add_one, backend)
    for _ in range(2):
        compiled(torch.ones(2))


def run_series(name: str, frontend_name: str, opts: RunOptions,
               on_phase: Callable[[str], None] = lambda phase: None, series=SERIES) -> DynamicResult:
    """Run ``name``'s series under ``frontend_name``; never raises for model errors.

    With ``opts.trace_dir`` and the kiln frontend, the compiled series writes Kiln's
    trace (as ``runner.run_model`` does), ending with the row as a ``bench_result``.
    """
    return traced_row(_run_series, name, frontend_name, opts, on_phase, series)


def _run_series(name, frontend_name, opts, on_phase, series) -> DynamicResult:
    torch.set_num_threads(opts.threads)   # one thread by default: see runner._run_model
    fe = frontends.get(frontend_name)
    res = DynamicResult(model=name, frontend=frontend_name, backend=fe.backend_label(opts.backend), mode=opts.mode,
                        precision=opts.precision, device=opts.device)
    spec = registry.get(name)
    if spec.sized_inputs is None:
        res.status = SKIPPED
        res.reason = "no sized inputs: the model spec cannot make inputs at a given size (ModelSpec.sized_inputs)"
        return res
    training, device, dtype, now = run_settings(opts)

    # 1-2. eager side
    on_phase("eager")
    try:
        model, step = build_model(spec, training, device, dtype)
        inputs = [_cast_inputs(kw, device, dtype) for kw in series_inputs(spec, training, series)]
        res.varies, res.shapes = varies(inputs), len({shape_key(kw) for kw in inputs})
        do_accuracy = opts.accuracy and checks.available()
        if do_accuracy:
            ref_model, ref_inputs = checks.fp64_copy(model), [checks.fp64_copy(kw) for kw in inputs]
        seed_all()
        step(model, inputs[0])           # untimed: one-time lazy initialisation of eager ops
        t0 = now()
        eager_outs = []
        for kw in inputs:
            seed_all()
            eager_outs.append(checks.snapshot(step(model, kw)))
        res.eager_series_s = now() - t0
        if do_accuracy:
            on_phase("fp64 reference")
            ref_step = make_step(spec, training, ref_model)
            ref_outs = []
            for kw in ref_inputs:
                seed_all()
                ref_outs.append(checks.snapshot(ref_step(ref_model, kw)))
            del ref_model, ref_inputs
    except Exception as exc:  # the model itself is broken: not the compiler's fault
        traceback.print_exc()
        res.status, res.reason = EAGER_FAIL, describe(exc)
        return res

    # 3. one-time start-up of the frontend and backend, billed to nobody
    on_phase("warm-up")
    try:
        _warm_up(fe, opts.backend)
    except Exception:   # the model's own compile will say what is wrong
        traceback.print_exc()

    # 4. the compiled series
    on_phase("compile")
    fe.reset()
    _start_trace(name, frontend_name, opts)
    try:
        compiled = fe.compile(model, opts.backend)
    except Exception as exc:
        traceback.print_exc()
        res.status, res.reason = FAIL_COMPILE, describe(exc)
        return res
    on_phase("series")
    outs = []
    hits = frontends.LimitHits()
    try:
        with fe.watch_limits() as hits:
            t0 = now()
            for kw in inputs:
                seed_all()
                outs.append(checks.snapshot(step(compiled, kw)))
            res.series_s = now() - t0
    except Exception as exc:
        traceback.print_exc()
        seq, batch = series[len(outs)]
        res.status = FAIL_COMPILE if fe.is_frontend_error(exc) else FAIL_RUN
        res.reason = f"call {len(outs) + 1} (seq {seq}, batch {batch}): {describe(exc)}"
        res.calls, res.limit_hits = len(outs), hits.count
        fill_stats(res, fe)
        return res
    res.calls, res.limit_hits = len(outs), hits.count
    fill_stats(res, fe)
    res.status = PASS

    # 5. accuracy of every call
    if opts.accuracy:
        on_phase("accuracy")
        if not do_accuracy:
            res.accuracy = "unavailable"
            res.reason = f"{checks.ACCURACY_MODULE} is not available; accuracy not checked"
            return res
        fails = []
        for (seq, batch), expected, actual, ref in zip(series, eager_outs, outs, ref_outs):
            try:
                verdict, detail = checks.compare(expected, actual, ref, name=name)
            except Exception as exc:   # no verdict is not a pass
                traceback.print_exc()
                verdict, detail = "fail", f"the accuracy check itself raised {describe(exc)}"
            if verdict != "ok":
                fails.append(f"seq {seq}, batch {batch}: {detail}")
        res.accuracy_fails = len(fails)
        res.accuracy = "fail" if fails else "ok"
        if fails:
            res.status = FAIL_ACCURACY
            res.reason = f"{len(fails)}/{len(outs)} calls differ; first at " + fails[0]
    return res


