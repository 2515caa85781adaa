"""Turning a graph break into glue: which values the continuation needs, the step
function that runs the breaking instruction as Python, and the continuations.

See resume.py for how the code objects are built.
"""
from __future__ import annotations

import functools
import inspect
import sys
import types
from typing import Callable, Protocol

import torch

from ..exc import Unsupported
from .instructions import decode, enclosing_loops, exception_table, exit_of, stack_depths, stack_inputs
from .opcodes import LAYOUT
from .resume import Resumption, check_resumable, continuation_code, live_locals, origin_of, probed, step_code
from .values.base import NullValue, Value
from .values.functions import BoundMethodValue, UserFunctionValue
from .values.iterators import has_items
from .values.nn_modules import ModuleValue, has_hooks
from .values.tensor import TensorValue


class FrameCompiler(Protocol):
    """How the frames a graph break creates get compiled.

    A break's continuations and the callee of a breaking call run as compiled frames
    of their own.  Compiled functions belong to the API layer above capture; it passes
    an object with this interface into ``compile_frame.capture`` (``kiln.api.Compiler``).
    """

    backend: Callable        # the user's backend (caches are keyed by it)
    graph_backend: Callable  # what captured graphs are compiled with (the backend, maybe wrapped)
    backend_name: str
    dynamic: bool | None   # kiln.compile's dynamic=: the policy of every frame compiled with it

    def compile_function(self, fn: types.FunctionType) -> Callable:
        """``fn`` wrapped so that its calls are captured and cached."""

    def compile_callee(self, obj) -> Callable:
        """The compiled version of a callable (modules with hooks, C functions pass through)."""

_LIVENESS: dict = {}


def _liveness(code, instructions):
    hit = _LIVENESS.get(code)
    if hit is None:
        hit = _LIVENESS[code] = live_locals(code, instructions)
    return hit


_LOOPS: dict = {}


def _loops_at(code, index: int, depth: int) -> tuple:
    """Stack slots of the iterators of the ``for`` loops around ``code``'s instruction
    ``index``, innermost first (none where the stack there is not the one expected)."""
    hit = _LOOPS.get(code)
    if hit is None:
        instructions = decode(code)
        hit = _LOOPS[code] = (instructions, stack_depths(code, instructions))
    instructions, depths = hit
    if depths[index] != depth:
        return ()
    return enclosing_loops(instructions, depths, index)


class BreakPlan:
    """Everything the glue needs to hand a frame over to its step function."""

    def __init__(self, tracer, ins, reason, compiler: FrameCompiler):
        code = tracer.code
        # a continuation breaks again: resume from the original code, so every break of
        # a loop body maps to the same continuation code instead of a new one each time
        origin, index_map = origin_of(code)
        self._to_origin = (lambda i: i) if index_map is None else index_map.__getitem__
        check_resumable(origin, ins)
        _check_frame_reader(tracer, ins)
        popped = stack_inputs(ins)
        if popped is None or popped > len(tracer.stack):
            raise Unsupported(f"Kiln cannot resume a frame after a break at {ins.opname}")
        self.code = origin
        self.ins = ins
        self.reason = reason
        self.compiler = compiler
        live = _liveness(code, tracer.instructions)
        order = {n: i for i, n in enumerate(code.co_varnames)}
        self.implicit = _implicit_self(origin)
        names = tuple(sorted((n for n in live[ins.index] | self.implicit if n in tracer.locals),
                             key=lambda n: order.get(n, 1 << 30)))
        self.stack_values = list(tracer.stack)
        self.local_values = [tracer.locals[n] for n in names]
        layout = tuple(not isinstance(v, NullValue) for v in tracer.stack)
        self.at = Resumption(self._to_origin(ins.index), layout, names, _self_first(names, self.implicit))
        self.untouched = len(layout) - popped
        self.instructions = tracer.instructions
        self.exits = []
        if ins.opname not in LAYOUT.no_fallthrough:
            self.exits.append(("fall", self._resumption(ins, layout, live, names, jump=False)))
        if ins.jump_target is not None:
            self.exits.append(("jump", self._resumption(ins, layout, live, names, jump=True)))
        self._compile_callee(tracer, ins)
        # the frame's own cells, in co_cellvars order (they continue as free variables)
        self.cells = [tracer.cells.get(name) for name in code.co_cellvars]

    def _resumption(self, ins, layout, live, names, jump):
        index, outputs = exit_of(self.instructions, ins, jump)
        after = layout[:self.untouched] + (True,) * outputs
        kept = tuple(n for n in names if n in live[index] or n in self.implicit)
        target = self._to_origin(index)
        if target is None:
            raise Unsupported("internal: a graph break resumes inside a continuation's prologue")
        loops = tuple(s for s in _loops_at(self.code, target, len(after)) if after[s])
        return Resumption(target, after, kept, _self_first(kept, self.implicit), loops)

    callee_compiled = False

    def _compile_callee(self, tracer, ins):
        """A break at a call: the callee runs as its own compiled frame (breaks and all)."""
        slots = LAYOUT.callable_slots(ins.opname, ins.arg or 0, len(self.stack_values))
        if slots is None:
            return
        callable_slot, null_slot = slots
        if min(slots) < 0 or not isinstance(self.stack_values[null_slot], NullValue):
            return
        target = self.stack_values[callable_slot]
        if not any(_holds_tensor(v) for v in self.stack_values[max(slots) + 1:]) and \
                not isinstance(target, ModuleValue):
            # a callee given no tensors gains nothing from capture (e.g. numpy helpers):
            # it runs as plain Python, and its results are not specialised on
            return
        if isinstance(target, (UserFunctionValue, ModuleValue)) or (
                isinstance(target, BoundMethodValue) and isinstance(target.func, UserFunctionValue)):
            self.stack_values[callable_slot] = _CompiledCallee(target, self.compiler)
            # a module with hooks runs as a whole, as Python (_CalleeCompiler): the break
            # is this frame's to record
            self.callee_compiled = not (isinstance(target, ModuleValue) and has_hooks(target.obj))

    def values(self) -> list:
        return self.at.order([v for v in self.stack_values if not isinstance(v, NullValue)], self.local_values)

    def step_factory(self, fn) -> "StepFactory":
        return StepFactory(self, fn.__globals__)


# builtins that read the calling frame's locals: called from a step function they would
# see the step's (the saved stack, the live locals only), not the frame's
_FRAME_READERS = {locals: 0, vars: 0, dir: 0, eval: None, exec: None, sys._getframe: None,
                  inspect.currentframe: None}


def _check_frame_reader(tracer, ins) -> None:
    """A break at a call that reads the frame's locals (``locals()``; PEP 667 made them
    a snapshot in 3.13, a dict refreshed from the frame before) cannot resume: the frame
    runs as Python instead."""
    slots = LAYOUT.callable_slots(ins.opname, ins.arg or 0, len(tracer.stack))
    if slots is None or min(slots) < 0:
        return
    target = tracer.stack[slots[0]]
    real = getattr(target, "fn", None)
    try:
        reads = real in _FRAME_READERS
    except TypeError:   # unhashable
        return
    if reads and (_FRAME_READERS[real] is None or ins.arg == _FRAME_READERS[real]):
        raise Unsupported(f"{real.__name__}() reads the frame's locals; a graph break there cannot "
                          f"resume").with_location(*tracer.location())


def _implicit_self(code) -> frozenset:
    """A method's first argument, which zero-argument super() reads without LOAD_FAST."""
    if "__class__" in code.co_freevars and code.co_argcount:
        return frozenset(code.co_varnames[:1])
    return frozenset()


def _self_first(names, implicit) -> bool:
    return bool(names) and names[0] in implicit


def _holds_tensor(v, depth=0) -> bool:
    """Tensors (or modules, which hold them) among a call's arguments."""
    if isinstance(v, (TensorValue, ModuleValue)):
        return True
    if depth > 4:
        return False
    return any(_holds_tensor(c, depth + 1) for c in v.contents())


class StepFactory:
    """Builds the step function and its compiled continuations for one closure.

    Code objects are made once; per closure only function objects are made (memoised
    when the closure is the function's own, which is stable; frames with cell
    variables get fresh cells on every call).
    """

    def __init__(self, plan: BreakPlan, fn_globals: dict):
        self.plan = plan
        self.globals = fn_globals
        self.cont_codes = [continuation_code(plan.code, res) for _kind, res in plan.exits]
        offset = plan.ins.offset
        in_try = any(start <= offset < end for start, end, *_ in exception_table(plan.code))
        self.step = step_code(plan.code, plan.at, plan.untouched, plan.exits, in_try)
        self.memoise = not plan.code.co_cellvars
        self._made: dict = {}

    def __call__(self, closure):
        if self.memoise:
            hit = self._made.get(id(closure))
            if hit is not None and hit[0] is closure:
                return hit[1]
        plan = self.plan
        conts = []
        for (_kind, res), code in zip(plan.exits, self.cont_codes):
            if res.loops:
                conts.append(LoopExitPicker(self, res, closure))
            else:
                conts.append(self.compile(code, closure))
        step = types.FunctionType(self.step, self.globals, self.step.co_name, None, closure)
        bound = functools.partial(step, *conts)
        if self.memoise:
            self._made[id(closure)] = (closure, bound)
        return bound

    def compile(self, code, closure):
        return self.plan.compiler.compile_function(types.FunctionType(code, self.globals, code.co_name, None, closure))

    def __repr__(self):
        return f"<kiln step at {self.plan.code.co_name}+{self.plan.ins.offset} ({self.plan.ins.opname})>"


class LoopExitPicker:
    """Picks the continuation for a resume point inside ``for`` loops, per iteration.

    A continuation inside a loop runs the rest of the body, takes the next item from
    the carried iterator (``CarriedIteratorValue``) and runs on to the break again; on
    the last iteration it finds the iterator empty and leaves the loop instead: the
    same code, traced two ways.  As one code object that would be two entries, the
    second made by every first call (counted as a recompile, and taking a place under
    the recompile limit).  So the last iteration resumes in a copy of the continuation
    (``Resumption.exhausted``, code named ``resume_at_N_exitD``), a separate code object
    with its own cache: this picker, called by the step function with the iterators of
    the loops around the resume point (innermost first), returns the copy for the
    number of them that have run out, as the trace of the continuation would see them.

    It counts a loop as run out only where that matters: when the copy so far has been
    captured and none of its entries read that loop's iterator (the continuation breaks
    again before the loop's head, or leaves the loop by ``break``), that copy serves
    every iteration, so a body with two breaks does not trace its first part twice.
    The pick only chooses a cache; the entries' guards still decide what runs.
    """

    def __init__(self, factory: StepFactory, res: Resumption, closure):
        self.factory, self.res, self.closure = factory, res, closure
        self.made: dict = {}
        self.body = None    # the continuation for "the innermost loop goes on", once made

    def __call__(self, *iterators):
        if self.body is not None and has_items(iterators[0]):   # every iteration but the last
            return self.body
        exhausted = 0
        while exhausted < len(iterators) and not has_items(iterators[exhausted]) and self._reads(exhausted):
            exhausted += 1
        fn = self.made.get(exhausted)
        if fn is None:
            code = continuation_code(self.factory.plan.code, self.res.at_exit(exhausted))
            fn = self.made[exhausted] = self.factory.compile(code, self.closure)
            if exhausted == 0:
                self.body = fn
        return fn

    def _reads(self, exhausted: int) -> bool:
        """Whether the copy for ``exhausted`` run-out loops depends on the next loop's
        iterator (assumed until it has been captured)."""
        read = probed(continuation_code(self.factory.plan.code, self.res.at_exit(exhausted)))
        return read is None or self.res.param(self.res.loops[exhausted]) in read


class _CompiledCallee(Value):
    """The callable of a breaking call, replaced by its compiled version in the glue."""

    def __init__(self, target, compiler: FrameCompiler):
        self.target = target
        self.compiler = compiler

    def describe(self):
        return f"compiled {self.target.describe()}"

    def reconstruct(self, cg):
        return f"{cg.ref(_CalleeCompiler(self.compiler))}({cg.expr(self.target)})"


_CALLEE_MEMO: dict = {}   # (id(callee), id(backend)) -> (callee, its compiled version)


def reset_compiled_callees() -> None:
    """Forget every compiled callee (``kiln.reset``)."""
    _CALLEE_MEMO.clear()


class _CalleeCompiler:
    """Wraps a callee with kiln.compile at run time, memoised per callee object."""

    def __init__(self, compiler: FrameCompiler):
        self.compiler = compiler

    def __call__(self, obj):
        if isinstance(obj, torch.nn.Module) and has_hooks(obj):
            return obj    # hooks may be added after the first call: checked every time
        key = (id(obj), id(self.compiler.backend))
        hit = _CALLEE_MEMO.get(key)
        if hit is not None and hit[0] is obj:
            return hit[1]
        compiled = self.compiler.compile_callee(obj)
        _CALLEE_MEMO[key] = (obj, compiled)
        return compiled
