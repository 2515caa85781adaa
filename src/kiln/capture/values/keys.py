"""Dict keys and set items: the hashable Python object a Value stands for, hashing and
comparing as Python would (a user class's ``__hash__`` / ``__eq__`` traced).

Dict and set Values keep their contents in real Python dicts keyed by these objects,
so Python's own hash table decides lookups, duplicates and set algebra, calling back
into the trace where the user's class would run code.
"""
from __future__ import annotations

import itertools
import operator
import types

import torch

from ...exc import Unsupported
from .base import ConstantValue, Value, const, raise_python, type_name

_LITERALS = (int, float, bool, str, bytes, type(None))


def key_of(v: Value, tx=None):
    """The hashable Python object a Value stands for when used as a dict key / set item,
    hashing and comparing as Python would: a constant is itself; a tuple is the tuple of
    its items' keys; a value whose class defines ``__hash__`` or ``__eq__`` in Python is a
    ``TracedKey`` (its ``__hash__`` traced now, its ``__eq__`` traced when the dict
    compares it: ``tx`` is needed then); an unhashable one raises TypeError as Python
    does; anything else hashes by identity (the real object, or the Value itself)."""
    if isinstance(v, ConstantValue):
        return v.value
    try:
        t = v.python_type()
    except Unsupported:
        t = object     # a value of no particular Python type: hashed by identity, as before
    items = getattr(v, "items", None)
    if issubclass(t, tuple) and isinstance(items, list):     # a tuple (or namedtuple) Value
        return tuple(key_of(item, tx) for item in items)
    if t is frozenset and isinstance(items, dict):          # a frozenset Value: keyed already
        return frozenset(items)
    hash_fn = _class_entry(t, "__hash__")
    if hash_fn is None:
        raise_python(TypeError, f"unhashable type: '{type_name(t)}'")
    if not issubclass(t, torch.Tensor) and (isinstance(hash_fn, types.FunctionType)
                                              or isinstance(_class_entry(t, "__eq__"), types.FunctionType)):
        if tx is None:
            raise Unsupported(f"a {t.__name__} key, whose __hash__ / __eq__ are Python code, where Kiln "
                              f"does not trace them")
        return TracedKey(v, tx, _traced_hash(tx, v, hash_fn))
    real = getattr(v, "real_object", None)
    if real is not None:
        return real()
    return _IdentityKey(v)


_MISSING = object()


def _class_entry(t: type, name: str):
    """The raw class attribute ``name`` through ``t``'s MRO (``_MISSING`` when none)."""
    for klass in t.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return _MISSING


def _traced_hash(tx, v: Value, hash_fn) -> int:
    """``hash(v)``: a ``__hash__`` written in Python is traced (it reads the object's
    attributes through their guarded sources); a C one (``object.__hash__`` kept beside a
    Python ``__eq__``) hashes the real object, or the Value's identity for one made in
    the frame."""
    if not isinstance(hash_fn, types.FunctionType):
        real = getattr(v, "real_object", None)
        return hash(real()) if real is not None else id(v)
    dunder = getattr(v, "_dunder", None)
    method = dunder(tx, "__hash__") if dunder is not None else v.getattr(tx, "__hash__")
    result = method.call(tx, [], {})
    if not result.is_constant():
        raise Unsupported(f"{v.describe()}.__hash__() returned {result.describe()}, not a constant")
    h = result.as_constant()
    if not isinstance(h, int):
        raise_python(TypeError, "__hash__ method should return an integer")
    return hash(h)


_KEY_SERIALS = itertools.count()


class TracedKey:
    """A dict key / set item whose class hashes and compares in Python: the dict calls
    ``__eq__`` on a hash match (after its own identity check, as CPython's does), and
    that traces the class's ``__eq__`` through ``tx.apply_operator`` (reflected operands
    included); a comparison that is not a constant is a graph break.  The newer of two
    keys' tracers runs it (the probe of a lookup is the newer)."""

    def __init__(self, v: Value, tx, h: int):
        self.v, self.tx, self.h = v, tx, h
        self.serial = next(_KEY_SERIALS)

    def __hash__(self):
        return self.h

    def __eq__(self, other):
        if isinstance(other, TracedKey):
            b, tx = other.v, other.tx if other.serial > self.serial else self.tx
        else:
            b, tx = key_value(other), self.tx
        if self.v is b:
            return True
        return bool(tx.apply_operator(operator.eq, self.v, b).truth(tx))


def key_value(k) -> Value:
    """The Value a Python key made by ``key_of`` stands for."""
    if isinstance(k, (TracedKey, _IdentityKey)):
        return k.v
    if type(k) is tuple and not all(type(x) in _LITERALS for x in k):
        raise Unsupported("a user key compared with a tuple key that holds symbolic values")
    return const(k)


class _IdentityKey:
    """Hashes a symbolic value by identity (e.g. a tensor used as a dict key)."""

    def __init__(self, v):
        self.v = v

    def __hash__(self):
        return id(self.v)

    def __eq__(self, other):
        if isinstance(other, _IdentityKey):
            return other.v is self.v
        return NotImplemented   # a TracedKey's __eq__ decides (reflected), as the user class would


def set_items(tx, values) -> dict:
    """A set's items from ``values`` in order: of equal ones the first stays, as in Python."""
    items: dict = {}
    for v in values:
        items.setdefault(key_of(v, tx), v)
    return items
