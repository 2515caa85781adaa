"""Turning a graph break into glue: which values the continuation needs, the step
function that runs the breaking instruction as Python, and the continuations.

See resume.py for how the code objects are built.
"""
from __future__ import annotations

import types

from ..exc import Unsupported
from .instructions import stack_inputs, stack_outputs
from .resume import Resumption, check_resumable, continuation_code, live_locals, step_code
from .values.base import NullValue, Value
from .values.functions import BoundMethodValue, UserFunctionValue
from .values.objects import ModuleValue

_LIVENESS: dict = {}


def _liveness(code, instructions):
    hit = _LIVENESS.get(code)
    if hit is None:
        hit = _LIVENESS[code] = live_locals(code, instructions)
    return hit


class BreakPlan:
    """Everything the glue needs to hand a frame over to its step function."""

    def __init__(self, tracer, ins, reason, backend, backend_name):
        code = tracer.code
        check_resumable(code, ins)
        popped = stack_inputs(ins)
        if popped is None or popped > len(tracer.stack):
            raise Unsupported(f"Kiln cannot resume a frame after a break at {ins.opname}")
        self.code = code
        self.ins = ins
        self.reason = reason
        self.backend, self.backend_name = backend, backend_name
        live = _liveness(code, tracer.instructions)
        order = {n: i for i, n in enumerate(code.co_varnames)}
        names = tuple(sorted((n for n in live[ins.index] if n in tracer.locals), key=lambda n: order.get(n, 1 << 30)))
        self.stack_values = list(tracer.stack)
        self.local_values = [tracer.locals[n] for n in names]
        layout = tuple(not isinstance(v, NullValue) for v in tracer.stack)
        self.at = Resumption(ins.index, layout, names)
        self.untouched = len(layout) - popped
        self.exits = []
        if ins.opname not in ("JUMP_FORWARD", "JUMP_BACKWARD", "RAISE_VARARGS", "RERAISE"):
            self.exits.append(("fall", self._resumption(ins.index + 1, ins, layout, live, names, jump=False)))
        if ins.jump_target is not None:
            self.exits.append(("jump", self._resumption(ins.jump_target, ins, layout, live, names, jump=True)))
        self._compile_callee(tracer, ins)

    def _resumption(self, index, ins, layout, live, names, jump):
        after = layout[:self.untouched] + (True,) * stack_outputs(ins, jump)
        kept = tuple(n for n in names if n in live[index])
        return Resumption(index, after, kept)

    def _compile_callee(self, tracer, ins):
        """A break at a call: the callee runs as its own compiled frame (breaks and all)."""
        if ins.opname != "CALL":
            return
        n = ins.arg
        below, callable_slot = len(self.stack_values) - n - 2, len(self.stack_values) - n - 1
        if below < 0 or not isinstance(self.stack_values[below], NullValue):
            return
        target = self.stack_values[callable_slot]
        if isinstance(target, (UserFunctionValue, ModuleValue)) or (
                isinstance(target, BoundMethodValue) and isinstance(target.func, UserFunctionValue)):
            self.stack_values[callable_slot] = _CompiledCallee(target, self.backend, self.backend_name)

    def values(self) -> list:
        return [v for v in self.stack_values if not isinstance(v, NullValue)] + self.local_values

    def step_factory(self, fn) -> "StepFactory":
        return StepFactory(self, fn.__globals__)


class StepFactory:
    """Builds (once per closure) the step function and its compiled continuations."""

    def __init__(self, plan: BreakPlan, fn_globals: dict):
        self.plan = plan
        self.globals = fn_globals
        self._made: dict = {}

    def __call__(self, closure):
        key = id(closure)
        hit = self._made.get(key)
        if hit is not None and hit[0] is closure:
            return hit[1]
        from ..api import CompiledFunction
        plan = self.plan
        conts = []
        for _kind, res in plan.exits:
            code = continuation_code(plan.code, res)
            fn = types.FunctionType(code, self.globals, code.co_name, None, closure)
            conts.append(CompiledFunction(fn, plan.backend, plan.backend_name, False))
        code = step_code(plan.code, plan.at, plan.untouched, plan.exits, conts)
        step = types.FunctionType(code, self.globals, code.co_name, None, closure)
        self._made[key] = (closure, step)
        return step

    def __repr__(self):
        return f"<kiln step at {self.plan.code.co_name}+{self.plan.ins.offset} ({self.plan.ins.opname})>"


class _CompiledCallee(Value):
    """The callable of a breaking call, replaced by its compiled version in the glue."""

    def __init__(self, target, backend, backend_name):
        self.target = target
        self.backend, self.backend_name = backend, backend_name

    def describe(self):
        return f"compiled {self.target.describe()}"

    def reconstruct(self, cg):
        wrapper = _CalleeCompiler(self.backend, self.backend_name)
        return f"{cg.ref(wrapper)}({cg.expr(self.target)})"


class _CalleeCompiler:
    """Wraps a callee with kiln.compile at run time, memoised per callee object."""

    _memo: dict = {}

    def __init__(self, backend, backend_name):
        self.backend, self.backend_name = backend, backend_name

    def __call__(self, obj):
        key = (id(obj), id(self.backend))
        hit = self._memo.get(key)
        if hit is not None and hit[0] is obj:
            return hit[1]
        from ..api import compile_callee
        compiled = compile_callee(obj, self.backend, self.backend_name)
        self._memo[key] = (obj, compiled)
        return compiled
