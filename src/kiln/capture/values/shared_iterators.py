"""``itertools`` iterators whose state is shared or saved: ``groupby``, ``cycle``, ``tee``.

Each pulls items from its source exactly when CPython's does (``Modules/itertoolsmodule.c``),
so a source that is also read elsewhere (a shared iterator, a generator) is consumed as in
eager:

* ``groupby``: the outer iterator skips to the next key, comparing with ``==`` after an
  identity check (``PyObject_RichCompareBool``); a group iterator yields while its key
  equals the current one, and is exhausted as soon as the outer iterator moves on (a group
  kept past its turn is empty, as in eager).
* ``cycle``: the first pass takes the source's items one at a time and saves them; later
  passes repeat the saved items.
* ``tee``: the iterators share one buffer; whichever is ahead pulls the next item.

``cycle`` escaping the frame is rebuilt as a real ``cycle`` in the same state
(``advanced`` over a ``chain`` of the saved items and the rest of the source); a
``groupby`` or ``tee`` iterator escaping is a graph break (its sharing cannot be rebuilt).
"""
from __future__ import annotations

import itertools
import operator

from ...exc import Unsupported
from ...runtime import advanced
from .base import ConstantValue, const, raise_python
from .containers import TupleValue
from .iterators import IteratorValue, as_iterator

_GROUPER = type(next(itertools.groupby([0]))[1])
_TEE = type(itertools.tee(())[0])
_EMPTY = object()


def _equal(tx, a, b) -> bool:
    """``PyObject_RichCompareBool(a, b, Py_EQ)``: identity first, then ``==``."""
    return a is b or tx.apply_operator(operator.eq, a, b).truth(tx)


class GroupByValue(IteratorValue):
    def __init__(self, src: IteratorValue, key):
        super().__init__([], itertools.groupby)
        self.src, self.key = src, key
        self.tgtkey = self.currkey = self.currvalue = _EMPTY
        self.current = None           # the group iterator that may still yield

    def step(self, tx) -> bool:
        v = self.src.next(tx)
        if v is None:
            return False
        self.currkey = v if self.key is None else self.key.call(tx, [v], {})
        self.currvalue = v
        return True

    def next(self, tx):
        self.current = None
        while True:
            if self.currkey is not _EMPTY and (self.tgtkey is _EMPTY or not _equal(tx, self.tgtkey, self.currkey)):
                break
            if not self.step(tx):
                return None
        self.tgtkey = self.currkey
        self.current = GrouperValue(self, self.tgtkey)
        return self.took(TupleValue([self.currkey, self.current]))

    def contents(self):
        return [self.src]

    def reconstruct(self, cg):
        raise Unsupported("an itertools.groupby object leaving the frame (its groups share it)")


class GrouperValue(IteratorValue):
    def __init__(self, parent: GroupByValue, tgtkey):
        super().__init__([], _GROUPER)
        self.parent, self.tgtkey = parent, tgtkey

    def next(self, tx):
        p = self.parent
        if p.current is not self:
            return None
        if p.currvalue is _EMPTY and not p.step(tx):
            return None
        if not _equal(tx, self.tgtkey, p.currkey):
            return None
        v, p.currvalue = p.currvalue, _EMPTY
        return self.took(v)

    def contents(self):
        return []

    def reconstruct(self, cg):
        raise Unsupported("a group of itertools.groupby leaving the frame (it shares the groupby's state)")


class CycleValue(IteratorValue):
    def __init__(self, src: IteratorValue):
        super().__init__([], itertools.cycle)
        self.src, self.saved, self.first_pass, self.pos = src, [], True, 0

    def next(self, tx):
        if self.first_pass:
            v = self.src.next(tx)
            if v is not None:
                self.saved.append(v)
                return self.took(v)
            self.first_pass = False
        if not self.saved:
            return None
        v = self.saved[self.pos % len(self.saved)]
        self.pos += 1
        return self.took(v)

    def unpack(self, tx):
        rest = []
        while self.first_pass and (v := self.next(tx)) is not None:
            rest.append(v)
        if self.saved:
            raise Unsupported("iterating over an endless itertools.cycle to its end")
        return rest          # an empty source: the cycle is empty too

    def contents(self):
        return [self.src, *self.saved]

    def reconstruct(self, cg):
        saved = "".join(cg.expr(v) + ", " for v in self.saved)
        cycle = cg.ref(itertools.cycle)
        if self.first_pass:
            src = f"{cg.ref(itertools.chain)}(({saved}), {cg.expr(self.src)})"
            return cg.new_object(self, f"{cg.ref(advanced)}({cycle}({src}), {len(self.saved)})")
        return cg.new_object(self, f"{cg.ref(advanced)}({cycle}(({saved})), {self.pos % max(1, len(self.saved))})")


class _TeeBuffer:
    def __init__(self, src: IteratorValue):
        self.src, self.items = src, []


class TeeValue(IteratorValue):
    def __init__(self, buffer: _TeeBuffer):
        super().__init__([], _TEE)
        self.buffer, self.pos = buffer, 0

    def next(self, tx):
        b = self.buffer
        if self.pos == len(b.items):
            v = b.src.next(tx)
            if v is None:
                return None
            b.items.append(v)
        v = b.items[self.pos]
        self.pos += 1
        return self.took(v)

    def contents(self):
        return [self.buffer.src, *self.buffer.items]

    def reconstruct(self, cg):
        raise Unsupported("an itertools.tee iterator leaving the frame (it shares a buffer with the others)")


def _groupby(tx, args, kwargs):
    src = args[0] if args else kwargs["iterable"]
    key = args[1] if len(args) > 1 else kwargs.get("key")
    if isinstance(key, ConstantValue) and key.value is None:
        key = None
    return GroupByValue(as_iterator(tx, src), key)


def _cycle(tx, args, kwargs):
    return CycleValue(as_iterator(tx, args[0]))


def _tee(tx, args, kwargs):
    n = args[1] if len(args) > 1 else kwargs.get("n", const(2))
    if not isinstance(n, ConstantValue) or type(n.value) is not int:
        raise Unsupported(f"itertools.tee() with n = {n.describe()}")
    if n.value < 0:
        raise_python(ValueError, "n must be >= 0")
    buffer = _TeeBuffer(as_iterator(tx, args[0]))
    return TupleValue([TeeValue(buffer) for _ in range(n.value)])


SHARED_ITERTOOLS = {itertools.groupby: _groupby, itertools.cycle: _cycle, itertools.tee: _tee}
