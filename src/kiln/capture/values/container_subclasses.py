"""Instances of user subclasses of ``tuple`` / ``list`` / ``dict`` / ``set`` made in the frame.

A subclass that only adds methods, properties, class attributes and its own Python
``__init__`` (list, dict) or ``__new__`` (tuple) stores its items exactly as its base
does, so it is held as the base's container Value with the subclass as its type: item
operations follow the base's rules, the subclass's Python methods, properties,
``__init__`` and ``__new__`` are traced with the container as ``self``
(``super().__init__(...)`` is the base's own ``__init__`` on those items,
``tuple.__new__(cls, items)`` makes the instance), and instance attributes live beside
the items.  Escaping, it is ``Sub(items)`` when nothing of its own ran, otherwise made
with the base's own constructor and given its attributes
(``runtime.objects.container_subclass``).  A subclass that overrides other behaviour
(``__setitem__``, ``__slots__``, ...) is not modelled; constructing it breaks.
"""
from __future__ import annotations

import types

from ...exc import Unsupported
from ...runtime import container_subclass
from .base import Value, const
from .containers import DictValue, ListValue, SetValue, TupleValue
from .iterators import as_iterator

# a container subclass's own constructors, traced when it is made (``construct_with_init``)
_CONSTRUCTORS = frozenset({"__init__", "__new__"})

# names every class body has, which change nothing about how the items are stored
_INERT = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__",
                    "__firstlineno__", "__static_attributes__", "__orig_bases__", "__parameters__"})


def container_base(cls, bases=(list, dict, set)) -> type | None:
    """The base (of ``bases``) when ``cls`` is a plain Python subclass of it, else None.
    Plain: no dunder of its own but Python ``__init__`` (list, dict) / ``__new__`` (tuple)."""
    if not isinstance(cls, type) or type(cls) is not type or cls in bases:
        return None
    base = next((b for b in bases if issubclass(cls, b)), None)
    if base is None:
        return None
    allowed = _INERT | ({"__new__"} if base is tuple else {"__init__"})
    for klass in cls.__mro__:
        if klass is base:
            return base
        if klass.__module__ == "builtins" or any(n.startswith("__") and n.endswith("__") and n not in allowed
                                                 for n in vars(klass)):
            return None
        if any(not isinstance(_unwrapped(vars(klass)[n]), types.FunctionType) for n in _CONSTRUCTORS & vars(klass).keys()):
            return None
    return None


def _unwrapped(raw):
    return raw.__func__ if isinstance(raw, staticmethod) else raw     # a class body's __new__


def own_constructor(cls, name: str) -> bool:
    """Whether a class of the subclass's MRO before its base defines ``name``."""
    return _own_attr(cls, name) is not None


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

    attrs = None        # instance attributes set in the frame (name -> Value)
    ran_own = False     # its own __init__ / __new__ ran: rebuilt without calling the class

    def getattr(self, tx, name):
        raw = _own_attr(self.cls, name)
        if isinstance(raw, property):
            return tx.wrap(raw.fget, None).call(tx, [self], {})
        if self.attrs and name in self.attrs:
            return self.attrs[name]
        if raw is not None and not isinstance(raw, types.FunctionType):
            return tx.wrap(getattr(self.cls, name), None)    # a class attribute (the class is guarded)
        return super().getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        raw = _own_attr(self.cls, name)
        if isinstance(raw, types.FunctionType):
            return tx.wrap(raw, None).call(tx, [self, *args], kwargs)
        return super().call_method(tx, name, args, kwargs)

    def setattr(self, tx, name, value):
        if _own_attr(self.cls, name) is not None and not isinstance(_own_attr(self.cls, name), types.FunctionType):
            raise Unsupported(f"setting {name!r} on a {self.cls.__name__}, whose class defines it")
        if self.attrs is None:
            self.attrs = {}
        self.attrs[name] = value

    def contents(self):
        return [*super().contents(), *(self.attrs or {}).values()]

    def reconstruct(self, cg):
        if not (self.ran_own or self.attrs):
            return cg.new_object(self, f"{cg.ref(self.cls)}({self.rebuild_contents(cg)})")
        attrs = "{" + "".join(f"{k!r}: {cg.expr(v)}, " for k, v in (self.attrs or {}).items()) + "}"
        return cg.new_object(self, f"{cg.ref(container_subclass)}({cg.ref(self.cls)}, "
                                   f"{self.rebuild_contents(cg)}, {attrs})")


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


class TupleSubclassValue(_UserSubclass, TupleValue):
    def __init__(self, items, cls):
        super().__init__(items)
        self.cls = cls
        self.ran_own = own_constructor(cls, "__new__")

    def rebuild_contents(self, cg):
        return "(" + "".join(cg.expr(i) + ", " for i in self.items) + ")"


def tuple_new(tx, cls, args: list):
    """``tuple.__new__(cls[, iterable])`` (a subclass's ``super().__new__(cls, items)``)."""
    items = as_iterator(tx, args[0]).unpack(tx) if args else []
    if cls is tuple:
        return TupleValue(items)
    if container_base(cls, (tuple,)) is None:
        raise Unsupported(f"tuple.__new__ of {cls.__qualname__}, a tuple subclass Kiln does not model")
    return TupleSubclassValue(items, cls)


class _BaseInit(Value):
    """``super().__init__(...)`` of a list or dict subclass: the base's own ``__init__``."""

    def __init__(self, obj):
        self.obj = obj

    def call(self, tx, args, kwargs):
        if isinstance(self.obj, ListValue):
            if kwargs or len(args) > 1:
                raise Unsupported("list.__init__ with these arguments")
            self.obj.items[:] = as_iterator(tx, args[0]).unpack(tx) if args else []
        else:
            self.obj.call_method(tx, "update", args, kwargs)
        return const(None)


def base_method(obj, klass, name):
    """What ``super().name`` finds on the builtin base ``klass`` for a container subclass
    instance, when Kiln models it (None: look it up as usual)."""
    if name == "__init__" and isinstance(obj, (ListSubclassValue, DictSubclassValue)) and klass in (list, dict):
        return _BaseInit(obj)
    return None


def construct_with_init(tx, cls, init_value, args, kwargs):
    """``cls(*args)`` for a list/dict subclass with its own ``__init__``: the base's
    ``__new__`` ignores the arguments (an empty container), then ``__init__`` is traced."""
    base = container_base(cls)
    obj = DictSubclassValue(DictValue({}), cls) if base is dict else \
        SetSubclassValue({}, cls) if base is set else ListSubclassValue([], cls)
    obj.ran_own = True
    init_value.call(tx, [obj, *args], kwargs)
    return obj


def construct_container_subclass(tx, cls_value, args: list, kwargs: dict, base_constructors: dict):
    """``cls(*args, **kwargs)`` for a subclass of tuple/list/dict/set modelled here (None:
    not one): its own ``__new__`` / ``__init__`` traced, else the base's constructor."""
    cls = cls_value.obj
    if container_base(cls, (tuple,)) is not None:
        if own_constructor(cls, "__new__"):     # type.__call__: its own __new__; tuple has no __init__
            return tx.wrap(cls.__new__, None).call(tx, [cls_value, *args], kwargs)
        if kwargs or len(args) > 1:
            raise Unsupported(f"{cls.__name__}() with these arguments")
        return tuple_new(tx, cls, args)
    base = container_base(cls)
    if base is None:
        return None
    if own_constructor(cls, "__init__"):
        return construct_with_init(tx, cls, tx.wrap(cls.__init__, None), args, kwargs)
    return subclass_instance(base_constructors[base](tx, args, kwargs), cls)


def subclass_instance(base_value, cls):
    """The Value for ``cls(...)``, given what ``base(...)`` made from the same arguments."""
    if isinstance(base_value, DictValue):
        return DictSubclassValue(base_value, cls)
    if isinstance(base_value, SetValue):
        return SetSubclassValue(base_value.items, cls)
    return ListSubclassValue(base_value.items, cls)
