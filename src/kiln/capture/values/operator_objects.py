"""``operator.itemgetter`` / ``attrgetter`` / ``methodcaller`` objects made in the frame,
and small pure helpers of ``operator`` and ``sys``.

A getter made in the frame is a recipe (the names or keys it was given); calling it
applies the recipe to its argument with Python's own item, attribute and method rules
on Values, so it costs nothing in the graph beyond what the reads themselves cost.  A
getter that escapes is rebuilt from the same constant arguments.
"""
from __future__ import annotations

import operator
import sys

from ...exc import Unsupported
from .base import ConstantValue, Value, const, raise_python, type_lookup
from .containers import TupleValue
from .iterators import IteratorValue


class GetterValue(Value):
    """``itemgetter(*keys)``, ``attrgetter(*names)`` or ``methodcaller(name, *args, **kwargs)``."""

    def __init__(self, cls: type, args: list, kwargs: dict):
        self.cls, self.args, self.kwargs = cls, list(args), dict(kwargs)

    def python_type(self):
        return self.cls

    def describe(self):
        return f"operator.{self.cls.__name__} object"

    def contents(self):
        return [*self.args, *self.kwargs.values()]

    def call(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            raise_python(TypeError, f"{self.cls.__name__} expected 1 argument, got {len(args)}")
        obj = args[0]
        if self.cls is operator.methodcaller:
            return obj.getattr(tx, self.args[0].as_constant()).call(tx, self.args[1:], self.kwargs)
        if self.cls is operator.itemgetter:
            found = [obj.getitem(tx, k) for k in self.args]
        else:
            found = [_dotted(tx, obj, n.as_constant()) for n in self.args]
        return found[0] if len(found) == 1 else TupleValue(found)

    def reconstruct(self, cg):
        parts = [cg.expr(a) for a in self.args] + [f"{k}={cg.expr(v)}" for k, v in self.kwargs.items()]
        return f"{cg.ref(self.cls)}({', '.join(parts)})"


def _dotted(tx, obj: Value, name: str) -> Value:
    for part in name.split("."):
        obj = obj.getattr(tx, part)
    return obj


def _make_getter(cls):
    def handler(tx, args, kwargs):
        if cls is operator.methodcaller:
            if not args or not isinstance(args[0], ConstantValue) or not isinstance(args[0].value, str):
                raise_python(TypeError, "method name must be a string")
        elif not args or kwargs:
            raise_python(TypeError, f"{cls.__name__} expected 1 argument, got 0")
        elif cls is operator.attrgetter and not all(isinstance(a, ConstantValue) and isinstance(a.value, str)
                                                    for a in args):
            raise_python(TypeError, "attribute name must be a string")
        return GetterValue(cls, args, kwargs)
    return handler


def _length_hint(tx, args, kwargs):
    """``operator.length_hint``: ``len`` when the type has ``__len__``, else its
    ``__length_hint__``, else the default; which applies is asked of the type."""
    obj = args[0]
    default = args[1] if len(args) > 1 else const(0)
    cls = obj.python_type()
    has_len = type_lookup(cls, "__len__")[1] is not None
    has_hint = type_lookup(cls, "__length_hint__")[1] is not None
    if not has_len and not has_hint:
        return default
    if isinstance(obj, IteratorValue):
        if type(obj) is IteratorValue and not has_len:
            return const(len(obj.items) - obj.index)   # what the real iterator's __length_hint__ says
        raise Unsupported(f"length_hint() of {obj.describe()}")
    return const(obj.length(tx))


def _intern(tx, args, kwargs):
    s = args[0]
    if not isinstance(s, ConstantValue) or type(s.value) is not str:
        raise_python(TypeError, "intern() argument must be str")
    return const(sys.intern(s.value))


OPERATOR_OBJECTS = {
    operator.itemgetter: _make_getter(operator.itemgetter), operator.attrgetter: _make_getter(operator.attrgetter),
    operator.methodcaller: _make_getter(operator.methodcaller), operator.length_hint: _length_hint,
    sys.intern: _intern,
}
