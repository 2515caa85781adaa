"""Which timings not to trust, and what the one-time start-up cost, for ``kiln bench``.

Why flag rather than retry: a speedup read off a noisy row (a burst of outside load on
a shared machine, a model whose calls vary by themselves) looks as solid as any other
in the table.  Two signs are cheap and already in every row:

* the **spread** of the timed repetitions: the interquartile range over the median
  (``overhead.spread``) of the eager or the compiled calls, above ``SPREAD_LIMIT``;
* the **eager gap**: the same model's eager call, timed in each frontend's worker
  (same model, same inputs, same thread count), differs by more than ``EAGER_GAP_LIMIT``
  between the two workers: the machine was not the same machine for both.

A flagged row keeps its numbers; the table marks its speedup with ``~`` and the
summary says why, so the reader can rerun with more ``-n`` or on a quieter machine.
"""
from __future__ import annotations

import statistics

from .results import PASS

SPREAD_LIMIT = 0.10      # interquartile range / median of a row's repetitions
EAGER_GAP_LIMIT = 0.20   # |eager a - eager b| / the smaller, between the two frontends' workers
MARK = "~"


def _gap(a: float, b: float) -> float:
    return abs(a - b) / min(a, b) if min(a, b) > 0 else 0.0


def _findings(rows) -> list[tuple[list[tuple], str]]:
    """``[(keys of the rows it concerns, "label: why")]`` over the passing, timed rows."""
    found = []
    timed = [r for r in rows if r.status == PASS and getattr(r, "eager_ms", None) is not None]
    for r in timed:
        spreads = [f"{side} spread {100 * value:.0f}%" for side, value in
                   (("eager", r.eager_spread), ("compiled", r.compiled_spread))
                   if value is not None and value > SPREAD_LIMIT]
        if spreads:
            found.append(([_key(r)], f"{r.model} [{r.frontend}]: {', '.join(spreads)}"))
    by_model: dict[tuple, list] = {}
    for r in timed:
        by_model.setdefault(_key(r)[:3], []).append(r)
    for group in by_model.values():
        if len(group) != 2:
            continue
        a, b = group
        gap = _gap(a.eager_ms, b.eager_ms)
        if gap > EAGER_GAP_LIMIT:
            found.append(([_key(a), _key(b)], f"{a.model}: eager {a.eager_ms:.2f} ms in {a.frontend}'s worker, "
                                              f"{b.eager_ms:.2f} ms in {b.frontend}'s ({100 * gap:.0f}% apart)"))
    return found


def noise_reasons(rows) -> dict[tuple, list[str]]:
    """``{(model, device, mode, frontend): ["label: why", ...]}`` for the passing rows
    whose timings look noisy; rows not in the dict look steady."""
    out: dict[tuple, list[str]] = {}
    for keys, why in _findings(rows):
        for key in keys:
            out.setdefault(key, []).append(why)
    return out


def _key(r) -> tuple:
    return (r.model, r.device, r.mode, r.frontend)


def is_noisy(reasons: dict, row) -> bool:
    return _key(row) in reasons


def noise_lines(rows) -> list[str]:
    """The summary's paragraph on noisy rows (empty when every row looks steady)."""
    found = _findings(rows)
    if not found:
        return []
    return ["", f"noisy timings ({MARK} in the table; spread: interquartile range / median of the repetitions; "
                "rerun with a larger -n or on a quieter machine):",
            *(f"  {why}" for _keys, why in found)]


def startup_lines(rows) -> list[str]:
    """One line on the workers' one-time start-up, per frontend: interpreter start and
    imports, and the frontend's first compile in the process, neither of which is in
    any row's capture time (medians over the workers that reported them)."""
    parts = []
    for fe in dict.fromkeys(r.frontend for r in rows):
        imports = [r.import_s for r in rows if r.frontend == fe and r.import_s is not None]
        first = [r.first_compile_s for r in rows if r.frontend == fe and getattr(r, "first_compile_s", None) is not None]
        if not imports and not first:
            continue
        text = f"{fe} " + (f"imports {statistics.median(imports):.2f} s" if imports else "imports -")
        if first:
            text += f" + first compile {statistics.median(first):.2f} s"
        parts.append(text)
    if not parts:
        return []
    return [f"start-up per worker (median; not in capture s): {'; '.join(parts)}"]
