"""Generators made by calling a generator function inside traced code.

Python runs a generator's frame lazily: nothing on the call, then up to the next
``yield`` each time a value is asked for, and never past the last value taken.
``GeneratorValue`` keeps the generator's own Tracer and steps it on demand, so code
after a ``yield`` (the exit half of a ``@contextmanager``, a grad-mode restore)
runs when Python would run it, interleaved correctly with the consumer.
"""
from __future__ import annotations

from ...exc import Unsupported
from .base import const
from .iterators import IteratorValue


class GeneratorValue(IteratorValue):
    def __init__(self, tracer):
        super().__init__([])
        self.tracer = tracer       # a child Tracer stopped before its next instruction

    def describe(self):
        return f"generator {self.tracer.code.co_qualname}"

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
        raise Unsupported(f"{self.describe()} is suspended inside the compiled region and cannot be rebuilt")
