"""Instances of user subclasses of ``list`` / ``dict`` / ``set`` made in the frame.

A subclass that only adds methods, properties and class attributes (no dunder method
of its own, no ``__slots__``) stores its items exactly as its base does, so it is held
as the base's container Value with the subclass as its type: item operations follow
the base's rules, the subclass's Python methods and properties are traced with the
container as ``self``, and it escapes as ``Sub(items)``.  A subclass that overrides
behaviour (``__init__``, ``__setitem__``, ...) is not modelled; constructing it breaks.
"""
from __future__ import annotations

import types

from .containers import DictValue, ListValue, SetValue

# names every class body has, which change nothing about how the items are stored
_INERT = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__",
                    "__firstlineno__", "__static_attributes__", "__orig_bases__", "__parameters__"})


def container_base(cls) -> type | None:
    """``list``/``dict``/``set`` when ``cls`` is a plain Python subclass of it, else None."""
    if not isinstance(cls, type) or type(cls) is not type or cls in (list, dict, set):
        return None
    base = next((b for b in (list, dict, set) if issubclass(cls, b)), None)
    if base is None:
        return None
    for klass in cls.__mro__:
        if klass is base:
            return base
        if klass.__module__ == "builtins" or any(n.startswith("__") and n.endswith("__") and n not in _INERT
                                                 for n in vars(klass)):
            return None
    return None


def _own_attr(cls, name):
    for klass in cls.__mro__:
        if klass.__module__ == "builtins":
            return None
        if name in vars(klass):
            return vars(klass)[name]
    return None


class _UserSubclass:
    """The subclass's type, methods and properties over a base container's rules."""

    def python_type(self):
        return self.cls

    def describe(self):
        return f"{self.cls.__name__}({super().describe()})"

    def getattr(self, tx, name):
        raw = _own_attr(self.cls, name)
        if isinstance(raw, property):
            return tx.wrap(raw.fget, None).call(tx, [self], {})
        if raw is not None and not isinstance(raw, types.FunctionType):
            return tx.wrap(getattr(self.cls, name), None)    # a class attribute (the class is guarded)
        return super().getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        raw = _own_attr(self.cls, name)
        if isinstance(raw, types.FunctionType):
            return tx.wrap(raw, None).call(tx, [self, *args], kwargs)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg):
        return cg.new_object(self, f"{cg.ref(self.cls)}({self.rebuild_contents(cg)})")


class ListSubclassValue(_UserSubclass, ListValue):
    def __init__(self, items, cls):
        super().__init__(items)
        self.cls = cls


class SetSubclassValue(_UserSubclass, SetValue):
    def __init__(self, items: dict, cls):
        super().__init__(items)
        self.cls = cls


class DictSubclassValue(_UserSubclass, DictValue):
    def __init__(self, d: DictValue, cls):
        super().__init__(d.items, cls=cls, key_values=d.key_values)


def subclass_instance(base_value, cls):
    """The Value for ``cls(...)``, given what ``base(...)`` made from the same arguments."""
    if isinstance(base_value, DictValue):
        return DictSubclassValue(base_value, cls)
    if isinstance(base_value, SetValue):
        return SetSubclassValue(base_value.items, cls)
    return ListSubclassValue(base_value.items, cls)
