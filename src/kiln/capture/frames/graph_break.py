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

from ...compile_settings import CompileSettings
from ...exc import Unsupported
from ...runtime import caches, CalleeCompiler, has_hooks, LoopExit, StepFactory
from ..basics import decode, enclosing_loops, exception_table, exit_of, LAYOUT, stack_depths, stack_inputs
from .resume import (Resumption, check_resumable, continuation_code, live_locals, origin_of, probed, root_label,
                     step_code)
from ..values import BoundMethodValue, ModuleValue, NullValue, TensorValue, UserFunctionValue, Value


class FrameCompiler(Protocol):
    """How the frames a graph break creates get compiled.

    A break's continuations and the callee of a breaking call run as compiled frames
    of their own.  Compiled functions belong to the API layer above capture; it passes
    an object with this interface into ``compile_frame.capture`` (``kiln.api.Compiler``).
    """

    settings: CompileSettings   # the kiln.compile call's: backend, fullgraph, dynamic, mode, options
    graph_backend: Callable     # what captured graphs are compiled with (the backend, maybe wrapped)

    def compile_function(self, fn: types.FunctionType) -> Callable:
        """``fn`` wrapped so that its calls are captured and cached."""

    def compile_callee(self, obj) -> Callable:
        """The compiled version of a callable (modules with hooks, C functions pass through)."""

_LIVENESS: dict = caches.register_dict("capture.frames.graph_break.liveness", {})   # code -> live locals per instruction


def _liveness(code, instructions):
    hit = _LIVENESS.get(code)
    if hit is None:
        hit = _LIVENESS[code] = live_locals(code, instructions)
    return hit


_LOOPS: dict = caches.register_dict("capture.frames.graph_break.loops", {})   # code -> (instructions, stack depths)


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

    def write_glue_end(self, cg, fn) -> None:
        """The end of the glue at this break: the values the step takes, the side effects,
        then the call of the step function (``step_factory``) that runs the breaking
        instruction as Python and goes on in a continuation."""
        args = [cg.expr(v) for v in self.values()]
        cg.lines.append(f"___args = ({''.join(a + ', ' for a in args)})")
        cg.side_effect_lines()
        step = cg.ref(self.step_factory(fn))
        closure = "___fn.__closure__"
        if self.cells:
            cells = ", ".join(cg.cell(c) for c in self.cells)
            closure = f"(___fn.__closure__ or ()) + ({cells},)"
        where = self.reason.location or "?"
        reason = " ".join(self.reason.reason.split())   # one comment line, whatever the message holds
        cg.lines += [f"# graph break at {where}: {reason}",
                     f"# {self.ins.opname} runs as Python, then the frame resumes compiled"]
        cg.mark(self.reason.location)
        cg.lines.append(f"return {step}({closure})(*___args)")

    def step_factory(self, fn) -> StepFactory:
        """What the glue calls at the break (``runtime.steps``), with the code objects built
        now and the continuations inside loops built when first picked."""
        label = root_label(fn)
        exits = [LoopExit(functools.partial(_continuation_at_exit, self.code, res, label=label),
                          functools.partial(_reads_next_loop, self.code, res, label=label))
                 if res.loops else continuation_code(self.code, res, label) for _kind, res in self.exits]
        offset = self.ins.offset
        in_try = any(start <= offset < end for start, end, *_ in exception_table(self.code))
        step = step_code(self.code, self.at, self.untouched, self.exits, in_try)
        return StepFactory(step, fn.__globals__, exits, self.compiler.compile_function,
                           memoise=not self.code.co_cellvars,
                           where=f"{self.code.co_name}+{offset} ({self.ins.opname})")


def _continuation_at_exit(code, res: Resumption, exhausted: int, label: str | None = None):
    """The copy of the continuation at ``res`` entered with ``exhausted`` loops run out."""
    return continuation_code(code, res.at_exit(exhausted), label)


def _reads_next_loop(code, res: Resumption, exhausted: int, label: str | None = None) -> bool:
    """Whether the copy for ``exhausted`` run-out loops depends on the next loop's
    iterator (assumed until it has been captured; ``runtime.steps.LoopExitPicker``)."""
    read = probed(_continuation_at_exit(code, res, exhausted, label))
    return read is None or res.param(res.loops[exhausted]) in read


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


class _CompiledCallee(Value):
    """The callable of a breaking call, replaced by its compiled version in the glue."""

    def __init__(self, target, compiler: FrameCompiler):
        self.target = target
        self.compiler = compiler

    def describe(self):
        return f"compiled {self.target.describe()}"

    def reconstruct(self, cg):
        return f"{cg.ref(CalleeCompiler(self.compiler))}({cg.expr(self.target)})"
