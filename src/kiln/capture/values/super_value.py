"""``super()``: attribute lookup that starts after a class in the instance's MRO."""
from __future__ import annotations

from ...exc import Unsupported
from .attributes import bind_class_attr
from .base import AttributeMissing, Value, const
from .container_subclasses import base_method
from .objects import ClassValue


class SuperValue(Value):
    def __init__(self, cls: type, obj: Value):
        self.cls = cls
        self.obj = obj

    def describe(self):
        return f"super({self.cls.__name__}, {self.obj.describe()})"

    def getattr(self, tx, name):
        if isinstance(self.obj, ClassValue) and issubclass(self.obj.obj, self.cls):
            return self._class_getattr(tx, name)
        obj_type = self.obj.python_type()
        mro = obj_type.__mro__
        try:
            start = mro.index(self.cls) + 1
        except ValueError:
            raise Unsupported(f"super(): {obj_type.__name__} is not a subclass of {self.cls.__name__}")
        for klass in mro[start:]:
            if name in klass.__dict__:
                raw = klass.__dict__[name]
                if klass is object and name == "__init__":
                    return _NoOpInit()
                modelled = base_method(self.obj, klass, name)
                if modelled is not None:
                    return modelled
                bound = bind_class_attr(tx, klass, raw, self.obj, name)
                if bound is not None:
                    return bound
                raise Unsupported(f"super().{name} resolves to a {type(raw).__name__}, which Kiln cannot bind")
        raise AttributeMissing(f"'super' object has no attribute {name!r}")


    def _class_getattr(self, tx, name):
        """``super(C, cls).name`` (``super().__new__(cls)`` in a ``__new__``): found after C
        in cls's MRO and bound as the class would bind it."""
        mro = self.obj.obj.__mro__
        for klass in mro[mro.index(self.cls) + 1:]:
            if name in klass.__dict__:
                raw = klass.__dict__[name]
                if isinstance(raw, classmethod):
                    return _BoundToClass(tx.wrap(raw.__func__, None), self.obj)
                if isinstance(raw, staticmethod):
                    return tx.wrap(raw.__func__, None)
                return tx.wrap(getattr(klass, name), None)
        raise AttributeMissing(f"'super' object has no attribute {name!r}")


class _BoundToClass(Value):
    def __init__(self, fn: Value, cls: Value):
        self.fn, self.cls = fn, cls

    def call(self, tx, args, kwargs):
        return self.fn.call(tx, [self.cls, *args], kwargs)


class _NoOpInit(Value):
    def call(self, tx, args, kwargs):
        return const(None)


def make_super(tx, args: list) -> Value:
    if len(args) == 2:
        cls = args[0]
        if not isinstance(cls, ClassValue):
            raise Unsupported("super() with a non-class first argument")
        return SuperValue(cls.obj, args[1])
    if args:
        raise Unsupported("super() with one argument")
    cell = tx.cells.get("__class__")
    if cell is None or not tx.code.co_varnames:
        raise Unsupported("zero-argument super() outside a method")
    cls = cell.get(tx)
    first = tx.code.co_varnames[0]
    obj = tx.locals.get(first)
    if obj is None and first in tx.cells:
        obj = tx.cells[first].get(tx)
    if not isinstance(cls, ClassValue) or obj is None:
        raise Unsupported("zero-argument super() could not find __class__ and self")
    return SuperValue(cls.obj, obj)
