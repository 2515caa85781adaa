"""Set algebra and comparisons of dict views, as CPython's ``dictobject.c`` runs them.

A keys or items view is a set for ``|``, ``&``, ``-``, ``^`` and the comparisons, and
the result's hash table (so its iteration order) follows from how CPython builds it,
which this module repeats step by step on ``SetValue``s (whose shadows are real sets):

* ``a | b``, ``a - b``, ``a ^ b``: ``set(a)`` (the *left* operand, whichever side the
  view is on: a dict's keys inserted in order), then ``update`` /
  ``difference_update`` / ``symmetric_difference_update`` with the right one; two
  items views ``^`` each other by walking both dicts (``dictitems_xor``).
* ``a & b``: the view on the left; a set at least as long as it answers with
  ``set.intersection(view)``; else the longer of two views is the one looked in, and
  the items of the other are kept, in their order, when the view contains them.
* ``==``, ``<``, ``<=``...: lengths first, then every item of one side is looked up in
  the other (``all_contained_in``); against anything but a set or a view, Python's
  ``NotImplemented`` (``==`` falls back to identity).

A values view has none of these (``TypeError``, identity for ``==``).
"""
from __future__ import annotations

import operator

from ...exc import Unsupported
from .base import ConstantValue, Value, check_iterable, const, raise_python, type_name
from .containers import DictViewValue, TupleValue, _equal
from .keys import set_items
from .sets import SetValue, make as make_set

_IN_PLACE = {"or_": "update", "sub": "difference_update", "xor": "symmetric_difference_update"}
_SYMBOLS = {"or_": "|", "and_": "&", "sub": "-", "xor": "^"}


def _set_view(v: Value) -> bool:
    return isinstance(v, DictViewValue) and v.kind in ("keys", "items")


def _to_set(tx, v: Value) -> SetValue:
    """``PySet_New(v)``: a view's items inserted in order, a set merged, any iterable added."""
    if isinstance(v, DictViewValue):
        return SetValue(set_items(tx, v.unpack(tx)))
    check_iterable(v)
    return make_set(tx, v, frozen=False)


def view_binary(tx, fn, a: Value, b: Value):
    """``a op b`` where a side is a dict view; None when neither is."""
    if not (isinstance(a, DictViewValue) or isinstance(b, DictViewValue)):
        return None
    name = fn.__name__
    if not (_set_view(a) or _set_view(b)):
        raise_python(TypeError, f"unsupported operand type(s) for {_SYMBOLS[name]}: "
                                f"'{type_name(a.python_type())}' and '{type_name(b.python_type())}'")
    if not _set_view(a) and isinstance(b, DictViewValue) and _user_class(a):
        return None     # the left operand's own method goes first
    if name == "and_":
        return _intersect(tx, a, b)
    if name == "xor" and _set_view(a) and _set_view(b) and a.kind == b.kind == "items":
        return _items_xor(tx, a, b)
    check_iterable(b)
    result = _to_set(tx, a)
    result.call_method(tx, _IN_PLACE[name], [b], {})
    return result


def _user_class(v: Value) -> bool:
    try:
        return v.python_type().__module__ != "builtins"
    except Unsupported:
        return True


def _intersect(tx, a: Value, b: Value) -> SetValue:
    view, other = (a, b) if _set_view(a) else (b, a)
    if type(other) is SetValue and not other.frozen and len(view.d.items) <= other.length(tx):
        return other.call_method(tx, "intersection", [view], {})
    if _set_view(other) and len(other.d.items) > len(view.d.items):
        view, other = other, view
    check_iterable(other)
    result = SetValue({})
    for item in other.unpack(tx):
        if view.call_method(tx, "__contains__", [item], {}).as_constant():
            result.insert(tx, item)
    return result


def _items_xor(tx, a: DictViewValue, b: DictViewValue) -> SetValue:
    left = dict(a.d.items)
    result = SetValue({})
    for k, v2 in b.d.items.items():
        drop = k in left and _equal(tx, left[k], v2)
        if drop:
            del left[k]
        else:
            result.insert(tx, TupleValue([b.d._key_value(k), v2]))
    for k, v1 in left.items():
        result.insert(tx, TupleValue([a.d._key_value(k), v1]))
    return result


def view_compare(tx, fn, a: Value, b: Value):
    """``a == b`` / ``<`` / ... where a side is a keys or items view; None when neither
    is (or the other side is no set: Python's NotImplemented, for the caller)."""
    if isinstance(a, DictViewValue) and isinstance(b, DictViewValue) and not (_set_view(a) and _set_view(b)) \
            and fn in (operator.eq, operator.ne):
        return const((a is b) == (fn is operator.eq))    # a values view compares by identity
    if not (_set_view(a) or _set_view(b)):
        return None
    other = b if _set_view(a) else a
    if not (isinstance(other, SetValue) or _set_view(other)
            or (isinstance(other, ConstantValue) and isinstance(other.peek(), (set, frozenset)))):
        return None
    if not _set_view(a):      # the set declined: the view's reflected comparison
        fn = _REFLECTED[fn]
        a, b = b, a
    la, lb = a.length(tx), b.length(tx)
    name = fn.__name__
    if name in ("eq", "ne"):
        ok = la == lb and _all_in(tx, a, b)
        return const(ok if name == "eq" else not ok)
    if name in ("lt", "le"):
        return const((la < lb if name == "lt" else la <= lb) and _all_in(tx, a, b))
    return const((la > lb if name == "gt" else la >= lb) and _all_in(tx, b, a))


_REFLECTED = {operator.eq: operator.eq, operator.ne: operator.ne, operator.lt: operator.gt,
              operator.gt: operator.lt, operator.le: operator.ge, operator.ge: operator.le}


def _all_in(tx, a: Value, b: Value) -> bool:
    for item in a.unpack(tx):
        if not tx.apply_operator(operator.contains, b, item).truth(tx):
            return False
    return True
