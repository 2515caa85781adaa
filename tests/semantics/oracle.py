"""The semantics oracle: every construct over every value kind, compiled by Kiln and
compared with CPython running the same function.

For each construct one function ``case(v)`` is made; for each kind it is compiled
afresh (``kiln.reset()`` between kinds, so no recompile limit interferes) with a
counting backend and called on two values of the kind (guarded inputs), and a second
function calls it on a value made inside the frame.  What each call returns (value and
type, recursively; identity where eager returns the input itself) or raises (the
exception type), and the state of the input afterwards, must equal eager's.  A graph
break is allowed and recorded; a different answer is a difference.

``python -m tests.semantics.oracle`` runs the matrix and prints the figures.
"""
from __future__ import annotations

import dataclasses
import enum
import functools as _functools_module
import io
import logging
import itertools
import math
import re
import time
import types
from dataclasses import dataclass, field

import collections
import operator

import torch

import kiln
from kiln.metrics import metrics
from kiln.testing import CompileCounter

from . import kinds as kinds_module
from .constructs import Construct, all_constructs, ci_constructs
from .kinds import KINDS, Kind

# a fake-tensor run that raises (an op Python rejects too) logs the error: expected here
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_GLOBALS = {"torch": torch, "collections": collections, "operator": operator, "SINK": io.StringIO(),
            "functools": _functools_module}
# kinds every method construct also runs over, besides the types that have the method
_METHOD_CONTROLS = ("int", "obj_getattr")


# values whose identity CPython itself does not promise (``frozenset(fs) is fs``): by value
_IMMUTABLE = (int, float, complex, str, bytes, type(None), bool, tuple, frozenset, range, slice, torch.device,
              torch.dtype, torch.Size, enum.Enum)


def _is_iterator(r) -> bool:
    return hasattr(type(r), "__next__") and hasattr(type(r), "__iter__")


def canon(r, inputs=(), depth=0):
    """What a result is, in a form that compares equal exactly when two results are the
    same as far as a program can tell (the input itself, by identity)."""
    for i, x in enumerate(inputs):
        if r is x and not isinstance(r, _IMMUTABLE):
            return ("<input>", i)
    if depth > 6:
        return ("<deep>", type(r))
    t = type(r)
    sub = lambda x: canon(x, inputs, depth + 1)   # noqa: E731
    if isinstance(r, torch.Tensor):
        return ("tensor", t, r.dtype, tuple(r.shape), r.tolist(), r.requires_grad)
    if t is float:
        return (t, "nan" if math.isnan(r) else r)
    if t is complex:
        return (t, repr(r))
    if t is str:
        return (t, _ADDRESS.sub("0x?", r))
    if t in (int, bool, bytes, type(None), type(Ellipsis), torch.dtype, torch.device) or isinstance(r, enum.Enum):
        return (t, r)
    if isinstance(r, (list, tuple, collections.deque)):
        extra = (r.maxlen,) if isinstance(r, collections.deque) else ()
        return (t, extra, tuple(sub(x) for x in r))
    if isinstance(r, dict):
        return (t, tuple((sub(k), sub(v)) for k, v in r.items()), getattr(r, "default_factory", None))
    if isinstance(r, (set, frozenset)):
        return (t, tuple(sorted(repr(sub(x)) for x in r)))
    if isinstance(r, types.MappingProxyType):
        return (t, sub(dict(r)))
    if isinstance(r, (type({}.keys()), type({}.values()), type({}.items()))):
        return (t, tuple(sub(x) for x in r))
    if isinstance(r, range):
        return (t, r)
    if isinstance(r, slice):
        return (t, sub(r.start), sub(r.stop), sub(r.step))
    if _is_iterator(r):
        try:
            return (t, "iterator", tuple(sub(x) for x in itertools.islice(r, 12)))
        except Exception as e:   # noqa: BLE001 - consuming raises as it would for eager
            return (t, "iterator raised", type(e))
    if isinstance(r, (types.MethodType, types.BuiltinMethodType)) and not isinstance(r.__self__, types.ModuleType):
        return ("method", t, r.__name__, sub(r.__self__))
    if isinstance(r, types.FunctionType):
        return (t, r.__code__, tuple(sub(c.cell_contents) for c in r.__closure__ or ()))
    if isinstance(r, functools_partial):
        return (t, r.func, sub(r.args))
    if dataclasses.is_dataclass(r) and not isinstance(r, type):
        return (t, tuple(sub(getattr(r, f.name)) for f in dataclasses.fields(r)))
    if type(r).__module__ == kinds_module.__name__ and not isinstance(r, type):
        state = {k: sub(getattr(r, k)) for k in getattr(type(r), "__slots__", ()) if hasattr(r, k)}
        state.update({k: sub(v) for k, v in getattr(r, "__dict__", {}).items()})
        return ("object", t, tuple(sorted(state.items(), key=lambda kv: kv[0])))
    return ("same object", t, id(r))


import functools as _functools   # noqa: E402 - after canon, which names it
functools_partial = _functools.partial


def _outcome(call, inputs, compare):
    try:
        r = call()
    except Exception as e:   # noqa: BLE001 - the exception type is the outcome
        return ("raised", type(e).__name__)
    try:
        got = canon(r, inputs)
        if compare == "type":
            got = type(r)
        return ("returned", got, tuple(canon(x) for x in inputs))
    except Exception as e:   # noqa: BLE001
        return ("result raised", type(e).__name__)


def make_case(c: Construct):
    src = f"def factory(fn):\n def case(v):\n  {c.body}\n return case"
    ns = dict(_GLOBALS)
    exec(compile(src, f"<oracle {c.name}>", "exec"), ns)   # noqa: S102 - the construct is the test
    return ns["factory"](c.fn)


def make_inside(case, kind: Kind):
    make = kind.make

    def inside(s):
        return case(make(s))
    return inside


@dataclass
class Report:
    cells: int = 0            # (construct, kind, guarded or made inside) combinations
    constructs: set = field(default_factory=set)
    kinds: set = field(default_factory=set)
    differences: list = field(default_factory=list)
    breaks: dict = field(default_factory=dict)       # reason -> count
    broken_cells: int = 0
    seconds: float = 0.0

    def merge(self, other: "Report"):
        self.cells += other.cells
        self.constructs |= other.constructs
        self.kinds |= other.kinds
        self.differences += other.differences
        for k, n in other.breaks.items():
            self.breaks[k] = self.breaks.get(k, 0) + n
        self.broken_cells += other.broken_cells
        self.seconds += other.seconds


def kinds_for(c: Construct) -> list:
    if not c.only_types:
        return KINDS
    return [k for k in KINDS if isinstance(k.make(0), c.only_types) or k.name in _METHOD_CONTROLS]


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|\([^()]*\)|\[[^\[\]]*\]|\b\d+\b")


def _short(reason: str) -> str:
    """A break reason without the values in it, so that breaks group by their cause."""
    line = _ADDRESS.sub("0x?", reason.split("\n")[0])
    for _ in range(3):
        line = _QUOTED.sub("…", line)
    return line[:120]


def _snapshot(obj):
    """The attributes of a value every run shares (a class, a module, a function, an
    enum member), so one run's ``setattr`` / ``delattr`` does not leak into the next."""
    try:
        return obj, dict(vars(obj))
    except TypeError:
        return obj, None


def _restore(snap) -> None:
    obj, saved = snap
    if saved is None:
        return
    now = vars(obj)
    for name in [n for n in now if n not in saved]:
        delattr(obj, name)
    for name, value in saved.items():
        if now.get(name, _MISSING) is not value:
            setattr(obj, name, value)


_MISSING = object()


def run_cell(c: Construct, case, kind: Kind, inside: bool, report: Report) -> None:
    fn = make_inside(case, kind) if inside else case
    compare = c.compare
    kiln.reset()
    compiled = kiln.compile(fn, backend=CompileCounter())
    for seed in (0, 1):
        arg_e, arg_c = (seed, seed) if inside else (kind.make(seed), kind.make(seed))
        ins_e, ins_c = ((), ()) if inside else ((arg_e,), (arg_c,))
        shared = _snapshot(kind.make(seed))
        expected = _outcome(lambda: fn(arg_e), ins_e, compare)
        _restore(shared)
        got = _outcome(lambda: compiled(arg_c), ins_c, compare)
        _restore(shared)
        try:
            same = got == expected
        except Exception as e:   # noqa: BLE001 - a canonical form that does not compare is a bug here
            same, got = False, (got, f"does not compare: {e}")
        if not same:
            where = "made inside" if inside else "input"
            report.differences.append(f"{c.name} | {kind.name} ({where}, seed {seed}): "
                                      f"eager {expected!r} kiln {got!r}")
            break
    report.cells += 1
    if metrics.breaks:
        report.broken_cells += 1
        for b in metrics.breaks:
            key = _short(b.reason)
            report.breaks[key] = report.breaks.get(key, 0) + 1


# kinds whose value made in the frame is the same kind of Value as the input (a constant):
# the CI run checks them as inputs only
_CONSTANT_KINDS = frozenset({"int", "float", "bool", "complex", "str", "bytes", "None", "Ellipsis", "range",
                             "slice", "dtype", "size", "enum", "list_empty"})


def run_construct(c: Construct, ci: bool = False) -> Report:
    report = Report()
    start = time.perf_counter()
    saved, kiln.config.suppress_errors = kiln.config.suppress_errors, False   # a Kiln bug is a difference
    case = make_case(c)
    for kind in kinds_for(c):
        run_cell(c, case, kind, False, report)
        if kind.inside and not (ci and kind.name in _CONSTANT_KINDS):
            run_cell(c, case, kind, True, report)
        report.kinds.add(kind.name)
    report.constructs.add(c.name)
    kiln.config.suppress_errors = saved
    kiln.reset()
    report.seconds = time.perf_counter() - start
    return report


def summary(report: Report, top: int = 40) -> str:
    lines = [f"semantics oracle: {len(report.constructs)} constructs x {len(report.kinds)} kinds = "
             f"{report.cells} cells in {report.seconds:.1f} s; {len(report.differences)} differences; "
             f"{report.broken_cells} cells broke the graph ({len(report.breaks)} distinct reasons)"]
    lines += [f"  DIFF {d}" for d in report.differences[:top]]
    for reason, n in sorted(report.breaks.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  break x{n}: {reason}")
    return "\n".join(lines)


def main(argv=None) -> int:
    import argparse   # only the command line needs it
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-k", default="", help="only constructs whose name contains this")
    p.add_argument("--top", type=int, default=60)
    p.add_argument("--ci", action="store_true", help="the CI selection (what the test suite runs by default)")
    a = p.parse_args(argv)
    total = Report()
    for c in ci_constructs() if a.ci else all_constructs():
        if a.k in c.name:
            total.merge(run_construct(c, ci=a.ci))
    print(summary(total, a.top))
    return 1 if total.differences else 0


if __name__ == "__main__":
    raise SystemExit(main())
