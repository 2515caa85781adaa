"""Calling a class while tracing (``cls(*args, **kwargs)``): named tuples, classes whose
construction is replayed at trace time on fakes, container subclasses, OrderedDict and
defaultdict, partials, exceptions, pure constructors of constants, plain Python classes
(their ``__new__`` and ``__init__`` traced), module containers and stateless torch
modules.  One job apart from ``builder`` (which wraps objects that already exist); it
reaches the builder only through ``tx.wrap``."""
from __future__ import annotations

import collections
import functools

import torch

from ...exc import Unsupported
from .base import ConstantValue, Value, to_python
from .builtins import BUILTINS
from .container_subclasses import construct_container_subclass
from .containers import DictValue, ListValue, NamedTupleValue, TupleValue
from .exceptions import ExceptionValue
from .functions import PartialValue
from .new_objects import NewObjectValue, ReplayedObjectValue, is_replayable_class
from .nn_modules import (ModuleValue, NewModuleListValue, NewTorchModuleValue, build_stateless_torch_module,
                         is_module_container)
from .objects import ClassValue, ObjectValue, is_plain_class
from .tensor import TensorValue


def is_namedtuple_class(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


def lower_to_real(tx, v: Value):
    """The real/fake Python object for a Value, for running a constructor on fakes."""
    if isinstance(v, TensorValue):
        return v.fake
    if isinstance(v, ConstantValue):
        return v.value
    if isinstance(v, TupleValue):
        items = [lower_to_real(tx, i) for i in v.items]
        return v.python_type()(*items) if isinstance(v, NamedTupleValue) and hasattr(v.cls, "_fields") else tuple(items)
    if isinstance(v, ListValue):
        return [lower_to_real(tx, i) for i in v.items]
    if isinstance(v, DictValue):
        return {k: lower_to_real(tx, i) for k, i in v.items.items()}
    if isinstance(v, ReplayedObjectValue):
        return v.instance
    real = getattr(v, "real_object", None)
    if real is not None and not isinstance(v, (ListValue, DictValue, ObjectValue)):
        return real()
    if isinstance(v, ObjectValue) and not isinstance(v.obj, (list, dict)):
        return v.obj
    # anything else travels through the constructor as an opaque stand-in
    stand_in = _StandIn(v)
    tx.state.replayed[id(stand_in)] = v
    tx.state.keepalive.append(stand_in)
    return stand_in


class _StandIn:
    """Carries a symbolic value through a replayed constructor (which only stores it)."""

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"<kiln stand-in for {self.value.describe()}>"


# Classes whose construction from constants is pure and whose instances are immutable.
_PURE_CONSTRUCTORS = frozenset({torch.finfo, torch.iinfo, torch.device, torch.Size, torch.dtype,
                                range, slice, type(None)})


def _construct_dict(tx, cls, args: list, kwargs: dict) -> Value:
    """``OrderedDict(...)`` / ``defaultdict(factory, ...)``: a dict built the way dict() is."""
    factory = None
    if cls is collections.defaultdict:
        factory = args.pop(0) if args else None
        if isinstance(factory, ConstantValue) and factory.value is None:
            factory = None
    d = BUILTINS[dict](tx, args, dict(kwargs))
    d.cls = cls
    d.default_factory = factory
    return d


def _container_modules(tx, cls, args: list):
    """The modules of ``ModuleList(modules)`` / ``Sequential(*modules)`` /
    ``Sequential(OrderedDict(...))`` when they all exist already, else None."""
    if issubclass(cls, torch.nn.ModuleList):
        items = args[0].unpack(tx) if len(args) == 1 else [] if not args else None
    elif len(args) == 1 and isinstance(args[0], DictValue):
        items = list(args[0].items.values())
    else:
        items = list(args)
    if items is None or not all(isinstance(i, (ModuleValue, NewModuleListValue)) for i in items):
        return None
    return items


def construct(tx, cls_value: ClassValue, args: list, kwargs: dict) -> Value:
    """``cls(*args, **kwargs)`` for a class read while tracing."""
    cls = cls_value.obj
    if is_namedtuple_class(cls):
        fields = cls._fields
        values = dict(zip(fields, args))
        values.update(kwargs)
        for f, d in getattr(cls, "_field_defaults", {}).items():
            values.setdefault(f, tx.wrap(d, None))
        missing = [f for f in fields if f not in values]
        if missing:
            raise Unsupported(f"{cls.__name__}() missing fields {missing}")
        return NamedTupleValue([values[f] for f in fields], cls)
    if is_replayable_class(cls):
        real_args = [lower_to_real(tx, a) for a in args]
        real_kwargs = {k: lower_to_real(tx, v) for k, v in kwargs.items()}
        try:
            with tx.state.builder.fake_mode:
                instance = cls(*real_args, **real_kwargs)
        except Exception as e:
            raise Unsupported(f"building {cls.__name__} at trace time failed: {type(e).__name__}: {e}") from e
        v = ReplayedObjectValue(instance, cls, args, kwargs)
        tx.state.replayed[id(instance)] = v
        tx.state.keepalive.append(instance)
        return v
    made = construct_container_subclass(tx, cls_value, list(args), dict(kwargs), BUILTINS)
    if made is not None:
        return made
    if cls in (collections.OrderedDict, collections.defaultdict):
        return _construct_dict(tx, cls, list(args), kwargs)
    if cls is functools.partial:
        if not args:
            raise Unsupported("functools.partial() needs a callable")
        return PartialValue(args[0], list(args[1:]), dict(kwargs))
    if issubclass(cls, BaseException):
        return ExceptionValue(cls, list(args))
    if cls in _PURE_CONSTRUCTORS:
        try:
            real_args = [to_python(a, tx) for a in args]
            real_kwargs = {k: to_python(v, tx) for k, v in kwargs.items()}
        except Unsupported:
            raise Unsupported(f"{cls.__name__}() with arguments that are not constants")
        try:
            return tx.wrap(cls(*real_args, **real_kwargs), None)
        except Exception as e:
            raise Unsupported(f"{cls.__name__}() raised {type(e).__name__}: {e}") from e
    if is_plain_class(cls, python_new=True):
        if cls.__new__ is not object.__new__:
            # type.__call__: the class's own __new__ (traced), then __init__ if it made a cls
            obj = tx.wrap(cls.__new__, None).call(tx, [cls_value, *args], kwargs)
            if not issubclass(obj.python_type(), cls):
                return obj
        else:
            obj = NewObjectValue(cls)
            tx.state.side_effects.track_new(obj)
        init = cls.__init__
        if init is object.__init__:
            if (args or kwargs) and cls.__new__ is object.__new__:
                raise Unsupported(f"{cls.__name__}() takes no arguments")
        else:
            tx.wrap(init, None).call(tx, [obj, *args], kwargs)
        return obj
    if is_module_container(cls) and not kwargs:
        items = _container_modules(tx, cls, args)
        if items is not None:
            return NewModuleListValue(cls, items)
    if isinstance(cls, type) and issubclass(cls, torch.nn.Module) \
            and all(isinstance(a, ConstantValue) for a in [*args, *kwargs.values()]):
        # a stateless torch.nn module from constant arguments (loss functions, activations)
        real_args = tuple(a.as_constant() for a in args)
        real_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
        mod = build_stateless_torch_module(cls, real_args, real_kwargs)
        if mod is not None:
            tx.state.keepalive.append(mod)
            return NewTorchModuleValue(mod, real_args, real_kwargs)
    raise Unsupported(f"constructing a {cls.__module__}.{cls.__qualname__} inside a compiled region")
