"""One check that a compiled function behaves like eager: values, aliasing, mutation.

``check_same_behaviour`` runs the eager and the compiled function on separate, fresh
inputs (it calls ``make_inputs`` once per run, so inputs that are themselves results of
autograd-tracked computations keep that structure) and compares

* the outputs, with :func:`kiln.debug.accuracy.compare` against a float64 reference
  when ``fn_fp64`` is given (it is called on :func:`fp64_copy` of fresh inputs);
* the inputs after the call, the same way, so in-place updates are checked by value;
* which outputs alias which inputs and which inputs were mutated, with
  :func:`kiln.debug.aliasing.compare_aliasing`.

If the compiled function raises where eager did not, that is reported, not raised.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..comparison import REPORT_WALK, same_values, tensor_leaves
from .accuracy import AccuracyReport, compare, fp64_copy
from .aliasing import CallRecord, compare_aliasing, record_call

__all__ = ["BehaviourReport", "check_same_behaviour"]


@dataclass
class BehaviourReport:
    """The outcome of :func:`check_same_behaviour`.  ``bool(report)`` is ``report.ok``."""

    outputs: AccuracyReport | None
    inputs_after: AccuracyReport | None
    aliasing: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    eager: CallRecord | None = None
    compiled: CallRecord | None = None

    @property
    def ok(self) -> bool:
        return (not self.errors and not self.aliasing
                and bool(self.outputs) and bool(self.inputs_after))

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            return f"same behaviour: OK ({self.outputs}; {self.inputs_after})"
        lines = ["same behaviour: FAILED"]
        lines += [f"  {e}" for e in self.errors]
        lines += [f"  aliasing/mutation: {p}" for p in self.aliasing]
        for rep in (self.outputs, self.inputs_after):
            if rep is not None and not rep.ok:
                lines += ["  " + line for line in str(rep).splitlines()]
        return "\n".join(lines)


def check_same_behaviour(fn_eager: Callable, fn_compiled: Callable,
                         make_inputs: Callable[[], Sequence[Any]], *,
                         fn_fp64: Callable | None = None, **tolerances: Any) -> BehaviourReport:
    """Run both functions on fresh inputs and compare values, aliasing and mutation.

    ``make_inputs()`` must return the same values every time (seed it); this is checked.
    ``tolerances`` are passed to :func:`kiln.debug.accuracy.compare`.
    """
    eager_inputs = list(make_inputs())
    compiled_inputs = list(make_inputs())
    _check_deterministic(eager_inputs, compiled_inputs)
    eager = record_call(fn_eager, eager_inputs)
    try:
        compiled = record_call(fn_compiled, compiled_inputs)
    except Exception as e:
        return BehaviourReport(None, None, errors=[f"the compiled function raised {type(e).__name__}: {e}"],
                               eager=eager)
    ref_out = ref_inputs = None
    if fn_fp64 is not None:
        ref_inputs = fp64_copy(list(make_inputs()))
        ref_out = fn_fp64(*ref_inputs)
    return BehaviourReport(
        outputs=compare(eager.outputs, compiled.outputs, ref_out, name="output", **tolerances),
        inputs_after=compare(list(eager.inputs), list(compiled.inputs), ref_inputs, name="input", **tolerances),
        aliasing=compare_aliasing(eager, compiled),
        eager=eager, compiled=compiled)


def _check_deterministic(a: list, b: list) -> None:
    left, right = list(tensor_leaves(a, "input", REPORT_WALK)), list(tensor_leaves(b, "input", REPORT_WALK))
    if len(left) != len(right) or not all(same_values(x, y) for (_, x), (_, y) in zip(left, right)):
        raise ValueError("make_inputs() returned different values on two calls; "
                         "seed it (e.g. torch.manual_seed) so both runs see the same inputs")
