"""Generators made by calling a generator function inside traced code.

Python runs a generator's frame lazily: nothing on the call, then up to the next
``yield`` each time a value is asked for, and never past the last value taken.
``GeneratorValue`` keeps the generator's own Tracer and steps it on demand, so code
after a ``yield`` (the exit half of a ``@contextmanager``, a grad-mode restore)
runs when Python would run it, interleaved correctly with the consumer.
"""
from __future__ import annotations

import inspect
import types

from ...exc import Unsupported
from .base import const
from .iterators import IteratorValue


class GeneratorValue(IteratorValue):
    def __init__(self, tracer):
        super().__init__([])
        self.tracer = tracer       # a child Tracer stopped before its next instruction
        self.arguments = dict(tracer.locals)   # as bound by the call that made it

    def describe(self):
        return f"generator {self.tracer.code.co_qualname}"

    def python_type(self):
        return types.GeneratorType

    @property
    def return_value(self):
        """What ``yield from`` on this generator evaluates to (once exhausted)."""
        return self.tracer.return_value or const(None)

    def next(self, tx):
        t = self.tracer
        produced = len(t.yields)
        try:
            while not t.done and len(t.yields) == produced:
                t.step()
        except BaseException:
            t.done = True          # an exception leaving a generator finishes it
            raise
        if len(t.yields) == produced:
            return None
        item = t.yields[produced]
        return self.took(item)

    def contents(self):
        return []

    def reconstruct(self, cg):
        """A generator not started yet (``m.parameters()`` handed to a callee that breaks
        before iterating it) is made again by calling its function with the same
        arguments: calling a generator function runs none of its body, so the new one is
        indistinguishable from the traced one.  A started one holds a suspended frame."""
        fn = self.tracer.fn_value
        if self.tracer.ip != 0 or fn is None:
            raise Unsupported(f"{self.describe()} is suspended inside the compiled region and cannot be rebuilt")
        code = self.tracer.code
        names = code.co_varnames
        npos, nkw = code.co_argcount, code.co_kwonlyargcount
        parts = [cg.expr(self.arguments[n]) for n in names[:npos]]
        i = npos + nkw
        if code.co_flags & inspect.CO_VARARGS:
            parts.append(f"*{cg.expr(self.arguments[names[i]])}")
            i += 1
        parts += [f"{n}={cg.expr(self.arguments[n])}" for n in names[npos:npos + nkw]]
        if code.co_flags & inspect.CO_VARKEYWORDS:
            parts.append(f"**{cg.expr(self.arguments[names[i]])}")
        # one generator however many places hold it (``zip(g, g)``)
        return cg.new_object(self, f"{cg.expr(fn)}({', '.join(parts)})")
