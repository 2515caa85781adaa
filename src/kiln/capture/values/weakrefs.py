"""Weak references: ``weakref.ref`` objects read from outside the frame, and made in it.

Calling a weak reference is a read of whatever it points to.  One read from outside the
frame (``nn.LSTM``'s ``_flat_weight_refs``) is called at trace time and its referent
(or None) is wrapped from the source ``ref()``, so it is guarded like any read: a
referent replaced or gone behind the reference fails the guard.  One made in the frame
from an object read from outside it (``weakref.ref(self.w)``) stands for that object:
calling it gives the object's Value, and the glue rebuilds it as ``weakref.ref(obj)``
if it escapes.  References to objects made in the frame (whose lifetime eager decides
by reference counting) and references with callbacks are not modelled.
"""
from __future__ import annotations

import weakref

from ...exc import Unsupported
from ..basics import CallSource
from .base import Value, raise_python

DEREF = weakref.ReferenceType.__call__


def call_real_ref(tx, value, args, kwargs):
    """``ref()`` on a real weak reference with a source; None if not applicable."""
    if value.source is None or args or kwargs:
        return None
    return tx.wrap(value.obj(), CallSource(id(DEREF), value.source, (), DEREF))


class WeakRefValue(Value):
    """``weakref.ref(obj)`` made in the frame, ``obj`` being a Value read from outside it."""

    def __init__(self, referent: Value):
        self.referent = referent

    def python_type(self):
        return weakref.ReferenceType

    def describe(self):
        return f"weak reference to {self.referent.describe()}"

    def contents(self):
        return [self.referent]

    def call(self, tx, args, kwargs):
        if args or kwargs:
            raise_python(TypeError, f"weakref() takes no arguments ({len(args) + len(kwargs)} given)")
        return self.referent

    def reconstruct(self, cg):
        return cg.new_object(self, f"{cg.ref(weakref.ref)}({cg.expr(self.referent)})")


def _make_ref(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        raise Unsupported("weakref.ref with a callback")
    cls = args[0].python_type()
    if cls.__weakrefoffset__ == 0:   # the type decides: ints, lists, tuples refuse
        raise_python(TypeError, f"cannot create weak reference to '{cls.__name__}' object")
    if args[0].source is None:
        raise Unsupported(f"a weak reference to {args[0].describe()}, made in the frame (its lifetime "
                          "is eager's reference counting)")
    return WeakRefValue(args[0])


WEAKREFS = {weakref.ref: _make_ref}
