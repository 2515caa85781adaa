"""``collections.deque`` made in the frame.

A deque is a list with two open ends and an optional ``maxlen``: it is held as a
ListValue whose methods follow deque's rules (appending to a full deque drops an item
from the other end; no slicing), and escapes as a real deque with the same items and
``maxlen``.  A deque read from outside the frame is guarded by length and ``maxlen``
like a list, and written back in place (``clear`` + ``extend``) when the trace changed it.
"""
from __future__ import annotations

import collections

from ...exc import Unsupported
from .base import ConstantValue, const, raise_python
from .containers import ListValue


class DequeValue(ListValue):
    def __init__(self, items, maxlen: int | None, source=None):
        super().__init__(items, source)
        self.maxlen = maxlen
        self._trim(left=True)

    def python_type(self):
        return collections.deque

    def describe(self):
        return f"deque(maxlen={self.maxlen})"

    def like(self, items):
        """``d + d``, ``d * n``: a deque with this one's ``maxlen``."""
        return DequeValue(items, self.maxlen)

    def concat_type(self):
        return collections.deque

    def _trim(self, left: bool):
        """Drop items from the ``left`` (or right) end until ``maxlen`` holds."""
        while self.maxlen is not None and len(self.items) > self.maxlen:
            self.items.pop(0 if left else -1)

    def getitem(self, tx, key):
        if not isinstance(key, ConstantValue) or isinstance(key.value, bool) or not isinstance(key.value, int):
            raise_python(TypeError, f"sequence index must be integer, not '{key.python_type().__name__}'")
        if not -len(self.items) <= key.value < len(self.items):
            raise_python(IndexError, "deque index out of range")
        return self.items[key.value]

    def setitem(self, tx, key, value):
        self.getitem(tx, key)
        super().setitem(tx, key, value)

    def call_method(self, tx, name, args, kwargs):
        se = tx.state.side_effects
        if name in ("append", "extend"):
            super().call_method(tx, name, args, kwargs)
            self._trim(left=True)
            return const(None)
        if name in ("appendleft", "extendleft"):
            se.mutated(self)
            new = [args[0]] if name == "appendleft" else args[0].unpack(tx)
            for item in new:
                self.items.insert(0, item)
            self._trim(left=False)
            return const(None)
        if name in ("pop", "popleft"):
            if args:
                raise_python(TypeError, f"deque.{name}() takes no arguments ({len(args)} given)")
            if not self.items:
                raise_python(IndexError, f"{name} from an empty deque")
            se.mutated(self)
            return self.items.pop(0 if name == "popleft" else -1)
        if name == "rotate":
            se.mutated(self)
            n = args[0].as_constant() if args else 1
            if self.items:
                n %= len(self.items)
                self.items[:] = self.items[-n:] + self.items[:-n]
            return const(None)
        if name == "copy":
            return DequeValue(self.items, self.maxlen)
        if name in ("insert", "sort"):
            if name == "sort":
                raise_python(AttributeError, "'collections.deque' object has no attribute 'sort'")
            if self.maxlen is not None and len(self.items) >= self.maxlen:
                raise_python(IndexError, "deque already at its maximum size")
        return super().call_method(tx, name, args, kwargs)

    def getattr(self, tx, name):
        if name == "maxlen":
            return const(self.maxlen)
        if not hasattr(collections.deque, name):
            raise_python(AttributeError, f"'collections.deque' object has no attribute {name!r}")
        return super().getattr(tx, name)

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.source_expr(self.source)   # its contents are written back in place
        return cg.new_object(self, f"{cg.ref(collections.deque)}({self.rebuild_contents(cg)}, {self.maxlen!r})")

    def write_back(self, target: str, contents: str) -> list[str]:
        """The glue's in-place update of the real deque (no slice assignment on deques)."""
        return [f"{target}.clear()", f"{target}.extend({contents})"]


def _deque(tx, args, kwargs):
    iterable = args[0] if args else kwargs.get("iterable")
    maxlen = args[1] if len(args) > 1 else kwargs.get("maxlen", const(None))
    if not isinstance(maxlen, ConstantValue):
        raise Unsupported("deque() with a maxlen that is not a constant")
    return DequeValue(iterable.unpack(tx) if iterable is not None else [], maxlen.value)


DEQUES = {collections.deque: _deque}
