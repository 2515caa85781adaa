"""Is a compiled result as accurate as eager?  Judged against a float64 reference.

Why not a fixed tolerance.  ``rtol=1e-4``-style checks (``torch._dynamo.utils.same``,
``allclose``) pass real bugs whenever the bug is smaller than the tolerance.  Our case in
point: a BigBird training step whose compiled gradients were off by ~3e-5 absolute,
about 1000x the float32 rounding noise of those gradients, passed ``same(tol=1e-4)``.
The tolerance that matters is the noise eager itself has, and that can be measured.

The rule, per floating-point tensor, with ``ref`` the same computation done in float64
(model and inputs converted with :func:`fp64_copy`):

* ``scale = max |ref|`` over the finite entries (1.0 if that is 0), the tensor's own scale;
* ``noise = max |expected - ref| / scale``, the eager (e.g. float32) error;
* ``err   = max |actual   - ref| / scale``, the compiled error;
* pass iff ``err <= multiplier * noise + floor_eps * eps(dtype)``.

Max-abs rather than RMS because one badly wrong element is a bug however many right
ones surround it.  ``multiplier`` (default 10) leaves room for a compiled kernel summing
in a different order, which typically lands within 1-3x of eager's error; an error
1000x the noise fails.  The floor (default 4 eps, ~4.8e-7 relative for float32) covers
tensors on which eager happens to be exact or nearly so, where any reordering would
otherwise look infinitely worse.  For the BigBird gradients above (scale ~0.1-1) the
limit is ~1e-6 relative, against an error of ~3e-5 or more: it fails.

Everything else must match exactly: structure and container types, keys, shapes,
dtypes, devices, ``requires_grad`` (a compiled output that lost its autograd history
breaks training silently), integer and bool tensors, non-finite positions (NaN where
eager has NaN, the same infinities), ints, strings and None.  Python floats use the
same rule as tensors, with float32's eps for the floor since they usually come from
float32 tensors.  Without a reference (``fp64_ref=None`` or a missing leaf) the noise
cannot be measured; the compiled value is then compared with eager and must be within
``no_ref_tol`` of the scale.

Strides and memory formats are not compared.
"""
from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import trace
from ..comparison import parts as children, readable_path as child_path

__all__ = ["AccuracyReport", "TensorError", "compare", "fp64_copy"]

_FLOAT_EPS_FOR_NUMBERS = torch.finfo(torch.float32).eps


@dataclass(frozen=True)
class TensorError:
    """How far one compiled value is from the float64 reference, next to eager's noise.

    ``err`` and ``noise`` are relative to the value's scale (max |ref|); ``limit`` is the
    most ``err`` may be; ``index`` is where the worst compiled error sits.
    """

    name: str
    err: float
    noise: float
    limit: float
    index: tuple[int, ...] | None = None

    @property
    def ok(self) -> bool:
        return self.err <= self.limit

    @property
    def ratio(self) -> float:
        """``err / limit``: above 1 fails."""
        if self.limit > 0:
            return self.err / self.limit
        return 0.0 if self.err == 0 else math.inf

    def __str__(self) -> str:
        at = f" at {list(self.index)}" if self.index else ""
        return (f"{self.name}: error {self.err:.3g} vs eager noise {self.noise:.3g} "
                f"(limit {self.limit:.3g}){at}")


@dataclass
class AccuracyReport:
    """The outcome of :func:`compare`.  ``bool(report)`` is ``report.ok``."""

    name: str
    entries: list[TensorError] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches and all(e.ok for e in self.entries)

    @property
    def worst(self) -> TensorError | None:
        """The value closest to (or furthest over) its limit, or None if there were none."""
        return max(self.entries, key=lambda e: e.ratio, default=None)

    @property
    def failures(self) -> list[str]:
        return self.mismatches + [str(e) for e in self.entries if not e.ok]

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        worst = self.worst
        summary = f"{len(self.entries)} floating value(s) compared"
        if worst is not None:
            summary += f"; worst {worst}"
        if self.ok:
            return f"accuracy of {self.name}: OK, {summary}"
        lines = [f"accuracy of {self.name}: FAILED, {len(self.failures)} problem(s); {summary}"]
        lines += [f"  {f}" for f in self.failures[:20]]
        if len(self.failures) > 20:
            lines.append(f"  ... and {len(self.failures) - 20} more")
        return "\n".join(lines)


def compare(expected: Any, actual: Any, fp64_ref: Any, *, name: str = "output",
            multiplier: float = 10.0, floor_eps: float = 4.0, no_ref_tol: float = 1e-5) -> AccuracyReport:
    """Compare ``actual`` (compiled) with ``expected`` (eager) using ``fp64_ref`` to measure noise.

    The three are nested structures of the same shape (tensors, tuples, lists, dicts,
    dataclasses / ``ModelOutput``, numbers, None).  See the module docstring for the rule.
    """
    report = AccuracyReport(name)
    _Walker(report, multiplier, floor_eps, no_ref_tol).walk(expected, actual, fp64_ref, name)
    if trace.active():
        trace.emit("accuracy", name=name, ok=report.ok, compared=len(report.entries),
                   worst=str(report.worst) if report.worst else None, failures=report.failures[:20])
    return report


class _Walker:
    def __init__(self, report: AccuracyReport, multiplier: float, floor_eps: float, no_ref_tol: float):
        self.report = report
        self.multiplier, self.floor_eps, self.no_ref_tol = multiplier, floor_eps, no_ref_tol

    def mismatch(self, path: str, what: str) -> None:
        self.report.mismatches.append(f"{path}: {what}")

    def walk(self, e: Any, a: Any, r: Any, path: str) -> None:
        if isinstance(e, torch.Tensor) or isinstance(a, torch.Tensor):
            self.tensor(e, a, r, path)
            return
        if e is None or a is None:
            if not (e is None and a is None):
                self.mismatch(path, f"eager gave {_kind(e)}, compiled gave {_kind(a)}")
            return
        kids = children(e)
        if kids is not None:
            self.container(e, a, r, kids, path)
            return
        self.scalar(e, a, r, path)

    def container(self, e: Any, a: Any, r: Any, kids: list, path: str) -> None:
        if type(e) is not type(a):
            self.mismatch(path, f"eager gave {_kind(e)}, compiled gave {_kind(a)}")
            return
        if isinstance(e, Mapping):
            ek, ak = list(e.keys()), list(a.keys())
            if ek != ak:
                missing = [k for k in ek if k not in a]
                extra = [k for k in ak if k not in e]
                self.mismatch(path, f"keys differ (compiled lacks {missing}, has extra {extra})"
                              if missing or extra else f"keys in a different order: {ek} vs {ak}")
            for k, ev in kids:
                if k in a:
                    self.walk(ev, a[k], _ref_child(r, k), child_path(path, k))
            return
        a_kids = children(a)
        if len(kids) != len(a_kids):
            self.mismatch(path, f"eager gave {len(kids)} items, compiled gave {len(a_kids)}")
        for (k, ev), (_, av) in zip(kids, a_kids):
            self.walk(ev, av, _ref_child(r, k), child_path(path, k))

    def scalar(self, e: Any, a: Any, r: Any, path: str) -> None:
        if type(e) is not type(a):
            self.mismatch(path, f"eager gave {_kind(e)}, compiled gave {_kind(a)}")
            return
        if isinstance(e, float):
            ref = float(r) if isinstance(r, (int, float)) and not isinstance(r, bool) else None
            self.number(e, a, ref, path)
            return
        try:
            same = bool(e == a)
        except Exception as exc:
            self.mismatch(path, f"cannot compare {_kind(e)} values ({type(exc).__name__}: {exc})")
            return
        if not same:
            self.mismatch(path, f"eager gave {e!r}, compiled gave {a!r}")

    def number(self, e: float, a: float, r: float | None, path: str) -> None:
        if math.isnan(e) or math.isnan(a) or math.isinf(e) or math.isinf(a):
            if not (e == a or (math.isnan(e) and math.isnan(a))):
                self.mismatch(path, f"eager gave {e!r}, compiled gave {a!r}")
            return
        floor = self.floor_eps * _FLOAT_EPS_FOR_NUMBERS
        if r is None or not math.isfinite(r):
            scale = abs(e) or 1.0
            self.report.entries.append(TensorError(path, abs(a - e) / scale, 0.0, self.no_ref_tol))
            return
        scale = abs(r) or 1.0
        noise = abs(e - r) / scale
        self.report.entries.append(TensorError(path, abs(a - r) / scale, noise, self.multiplier * noise + floor))

    def tensor(self, e: Any, a: Any, r: Any, path: str) -> None:
        if not (isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor)):
            self.mismatch(path, f"eager gave {_kind(e)}, compiled gave {_kind(a)}")
            return
        for attr in ("shape", "dtype", "device", "requires_grad"):
            ev, av = getattr(e, attr), getattr(a, attr)
            if ev != av:
                self.mismatch(path, f"{attr} differs: eager {_fmt(ev)}, compiled {_fmt(av)}")
                if attr != "requires_grad":
                    return
        e, a = e.detach(), a.detach()
        if not (e.is_floating_point() or e.is_complex()):
            if not torch.equal(e, a):
                bad = int((e != a).sum())
                self.mismatch(path, f"{bad} of {e.numel()} {_fmt(e.dtype)} values differ")
            return
        if e.numel() == 0:
            return
        floor = self.floor_eps * torch.finfo(e.dtype).eps
        if e.is_complex():
            e, a = torch.view_as_real(e.resolve_conj()), torch.view_as_real(a.resolve_conj())
        e64, a64 = e.to(torch.float64), a.to(torch.float64)
        if not self.same_nonfinite(e64, a64, path):
            return
        ref = self.reference(r, e, path)
        mask = torch.isfinite(e64)
        if ref is None:
            scale = _masked_max(e64.abs(), mask) or 1.0
            err, index = _masked_max_at((a64 - e64).abs(), mask)
            self.report.entries.append(TensorError(path, err / scale, 0.0, self.no_ref_tol, index))
            return
        mask &= torch.isfinite(ref)
        scale = _masked_max(ref.abs(), mask) or 1.0
        noise = _masked_max((e64 - ref).abs(), mask) / scale
        err, index = _masked_max_at((a64 - ref).abs(), mask)
        self.report.entries.append(
            TensorError(path, err / scale, noise, self.multiplier * noise + floor, index))

    def same_nonfinite(self, e64: torch.Tensor, a64: torch.Tensor, path: str) -> bool:
        """NaN where eager has NaN, the same infinities; False (reported) otherwise."""
        e_bad, a_bad = ~torch.isfinite(e64), ~torch.isfinite(a64)
        if not e_bad.any() and not a_bad.any():
            return True
        same = torch.equal(e_bad, a_bad) and torch.equal(torch.isnan(e64), torch.isnan(a64)) \
            and torch.equal(torch.where(e_bad & ~torch.isnan(e64), e64, 0), torch.where(a_bad & ~torch.isnan(a64), a64, 0))
        if not same:
            self.mismatch(path, f"non-finite values differ: eager has {int(e_bad.sum())} "
                                f"({int(torch.isnan(e64).sum())} NaN), compiled has {int(a_bad.sum())} "
                                f"({int(torch.isnan(a64).sum())} NaN)")
        return same

    def reference(self, r: Any, e: torch.Tensor, path: str) -> torch.Tensor | None:
        if not isinstance(r, torch.Tensor):
            return None
        r = r.detach()
        if r.is_complex():
            r = torch.view_as_real(r.resolve_conj())
        if r.shape != e.shape:
            self.mismatch(path, f"the float64 reference has shape {list(r.shape)}, eager {list(e.shape)}")
            return None
        return r.to(device=e.device, dtype=torch.float64)


def _ref_child(r: Any, key: Any) -> Any:
    if r is None:
        return None
    try:
        if isinstance(r, Mapping):
            return r.get(key)
        if isinstance(r, (tuple, list)):
            return r[key] if isinstance(key, int) and key < len(r) else None
        if dataclasses.is_dataclass(r) and not isinstance(r, type):
            return getattr(r, key, None)
    except Exception:
        return None
    return None


def _masked_max(x: torch.Tensor, mask: torch.Tensor) -> float:
    if not mask.any():
        return 0.0
    return float(torch.where(mask, x, 0).max())


def _masked_max_at(x: torch.Tensor, mask: torch.Tensor) -> tuple[float, tuple[int, ...] | None]:
    if not mask.any():
        return 0.0, None
    masked = torch.where(mask, x, 0)
    flat = int(masked.argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), masked.shape))
    return float(masked.reshape(-1)[flat]), index


def _kind(x: Any) -> str:
    if x is None:
        return "None"
    if isinstance(x, torch.Tensor):
        return f"a {_fmt(x.dtype)} tensor of shape {list(x.shape)}"
    return f"a {type(x).__name__}"


def _fmt(v: Any) -> str:
    if isinstance(v, torch.Size):
        return str(list(v))
    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "")
    return str(v)


def fp64_copy(obj: Any) -> Any:
    """A float64 copy of a model or of inputs, for computing the reference.

    Modules are deep-copied and converted with ``.double()``.  Floating tensors become
    float64 (complex ones complex128) leaves with the same ``requires_grad``; other
    tensors are cloned so the reference run cannot change the originals.  Containers
    (tuples, lists, dicts, ``ModelOutput``, dataclasses) are rebuilt around converted
    contents; anything else is returned as it is.
    """
    if isinstance(obj, torch.nn.Module):
        return copy.deepcopy(obj).double()
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point() or obj.is_complex():
            dtype = torch.complex128 if obj.is_complex() else torch.float64
            return obj.detach().to(dtype).requires_grad_(obj.requires_grad)
        return obj.detach().clone()
    if isinstance(obj, Mapping):
        items = [(k, fp64_copy(v)) for k, v in obj.items()]
        if dataclasses.is_dataclass(obj):  # ModelOutput: keyword construction keeps its type
            return type(obj)(**dict(items))
        try:
            return type(obj)(items)
        except Exception:
            return dict(items)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(fp64_copy(v) for v in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(fp64_copy(v) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        new = copy.copy(obj)
        for f in dataclasses.fields(obj):
            object.__setattr__(new, f.name, fp64_copy(getattr(obj, f.name)))
        return new
    return obj
