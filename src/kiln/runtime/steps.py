"""What the glue of an entry that ends in a graph break calls on every call: the step
function's factory, and the pickers that choose a loop's continuation.

At a break the glue calls ``StepFactory(closure)(*values)``: a *step function* (a copy of
the frame's code that runs the breaking instruction as Python) bound to the
*continuations* it calls where that instruction continues (copies of the code that
resume there, each compiled as a frame of its own).  The code objects are built at
compile time (``capture.frames.resume``, ``capture.frames.graph_break.BreakPlan``) and handed in; here
only function objects are made, once per closure, and the continuations are compiled
through the callback the compile-time side passes (``kiln.api.Compiler``), so this
module imports nothing above Kiln's foundation.
"""
from __future__ import annotations

import functools
import types
from typing import Callable

from .iterators import has_items


class LoopExit:
    """An exit of a step function that resumes inside ``for`` loops: how to get the
    continuation for a number of run-out loops (``continuation(exhausted) -> code``) and
    whether that copy's entries read the next loop's iterator (``reads(exhausted)``; see
    ``LoopExitPicker``).  Both are compile-time callbacks (``capture.frames.graph_break``)."""

    __slots__ = ("continuation", "reads")

    def __init__(self, continuation: Callable[[int], types.CodeType], reads: Callable[[int], bool]):
        self.continuation, self.reads = continuation, reads


class StepFactory:
    """Builds the step function and its compiled continuations for one closure.

    ``exits``: per exit of the breaking instruction, the continuation's code object, or a
    ``LoopExit``.  Code objects are made once; per closure only function objects are made
    (memoised when ``memoise``: the closure is the function's own, which is stable; frames
    with cell variables get fresh cells on every call).
    """

    def __init__(self, step: types.CodeType, fn_globals: dict, exits: list, compile_function: Callable,
                 memoise: bool, where: str):
        self.step = step
        self.globals = fn_globals
        self.exits = exits
        self.compile_function = compile_function
        self.memoise = memoise
        self.where = where
        self._made: dict = {}

    def __call__(self, closure):
        if self.memoise:
            hit = self._made.get(id(closure))
            if hit is not None and hit[0] is closure:
                return hit[1]
        conts = [LoopExitPicker(self, exit, closure) if isinstance(exit, LoopExit) else self.compile(exit, closure)
                 for exit in self.exits]
        step = types.FunctionType(self.step, self.globals, self.step.co_name, None, closure)
        bound = functools.partial(step, *conts)
        if self.memoise:
            self._made[id(closure)] = (closure, bound)
        return bound

    def compile(self, code, closure):
        return self.compile_function(types.FunctionType(code, self.globals, code.co_name, None, closure))

    def __repr__(self):
        return f"<kiln step at {self.where}>"


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

    def __init__(self, factory: StepFactory, exit: LoopExit, closure):
        self.factory, self.exit, self.closure = factory, exit, closure
        self.made: dict = {}
        self.body = None    # the continuation for "the innermost loop goes on", once made

    def __call__(self, *iterators):
        if self.body is not None and has_items(iterators[0]):   # every iteration but the last
            return self.body
        exhausted = 0
        while exhausted < len(iterators) and not has_items(iterators[exhausted]) and self.exit.reads(exhausted):
            exhausted += 1
        fn = self.made.get(exhausted)
        if fn is None:
            fn = self.made[exhausted] = self.factory.compile(self.exit.continuation(exhausted), self.closure)
            if exhausted == 0:
                self.body = fn
        return fn
