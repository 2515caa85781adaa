"""Python objects: nn.Modules, user objects, objects created while tracing, classes
and Python modules.

Attribute lookup follows Python's rules (data descriptors, instance dict, class
attributes, ``nn.Module``'s parameter/buffer/submodule dicts) on the real object, so
what Kiln reads is what eager would read; each read is guarded through its source.
"""
from __future__ import annotations

import dataclasses
import inspect
import types

import torch

from ...exc import Unsupported
from .base import ConstantValue, Value, const


class AttributeMissing(Unsupported):
    """Lookup failed the way Python would raise AttributeError (hasattr relies on it)."""


# Python modules whose attributes are treated as fixed: reading torch.float32 or
# math.pi is not guarded (the same trust TorchDynamo places in them).
TRUSTED_MODULE_PREFIXES = ("torch", "math", "operator", "functools", "itertools", "numpy", "builtins",
                           "collections", "typing", "warnings", "inspect", "enum", "dataclasses", "abc",
                           "copy", "types", "re", "logging", "contextlib")


def is_trusted_module(mod: types.ModuleType) -> bool:
    name = getattr(mod, "__name__", "") or ""
    return any(name == p or name.startswith(p + ".") for p in TRUSTED_MODULE_PREFIXES)


def _src(base, name):
    from ..sources import AttrSource
    return AttrSource(base, name) if base is not None else None


def lookup_class_attr(cls: type, name: str):
    """(owner class, raw attribute) from the MRO without running descriptors."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass, klass.__dict__[name]
    return None, None


def bind_class_attr(tx, owner: type, raw, self_value: Value, name: str):
    """What ``obj.name`` gives when ``name`` is found on the class as ``raw``."""
    from .builder import wrap
    from .functions import BoundMethodValue, UserFunctionValue
    from ..sources import ConstSource, ItemSource, AttrSource
    raw_src = ItemSource(AttrSource(ConstSource(id(owner), owner), "__dict__"), name)
    if isinstance(raw, types.FunctionType):
        return BoundMethodValue(UserFunctionValue(raw, raw_src), self_value)
    if isinstance(raw, staticmethod):
        return wrap(tx, raw.__func__, None)
    if isinstance(raw, classmethod):
        return BoundMethodValue(wrap(tx, raw.__func__, None), wrap(tx, self_value.python_type(), None))
    if isinstance(raw, property):
        if raw.fget is None:
            raise AttributeMissing(f"property {name!r} has no getter")
        return wrap(tx, raw.fget, None).call(tx, [self_value], {})
    if isinstance(raw, (types.MethodDescriptorType, types.WrapperDescriptorType)):
        return CMethodValue(self_value, raw, name)
    return None


# C methods of builtin bases that only read: safe to run at trace time on real objects
_PURE_READS = frozenset({"get", "__getitem__", "__contains__", "__len__", "keys", "values", "items", "count",
                         "index", "__repr__", "__str__", "__hash__"})


def callable_name(obj) -> str:
    """``numpy.stack`` rather than ``_ArrayFunctionDispatcher object``."""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if not isinstance(name, str):
        return f"a {type(obj).__name__} object"
    mod = getattr(obj, "__module__", None)
    return f"{mod}.{name}" if isinstance(mod, str) else name


def _builtin_container(obj) -> bool:
    """Objects whose C read methods are side-effect free and cheap to re-run in guards."""
    return isinstance(obj, (dict, list, tuple, str, set, frozenset, bytes, types.MappingProxyType))


class CMethodValue(Value):
    """A C method found on a builtin base class (``dict.get`` of a dict subclass)."""

    def __init__(self, self_value: Value, raw, name: str):
        self.self_value, self.raw, self.name = self_value, raw, name

    def describe(self):
        return f"{getattr(self.raw, '__qualname__', self.name)}"

    def reconstruct(self, cg):
        # the method bound to its receiver, as the break's step function calls it
        return f"{cg.ref(self.raw)}.__get__({cg.expr(self.self_value)})"

    def contents(self):
        return [self.self_value]

    def call(self, tx, args, kwargs):
        from .base import to_python
        from .builder import wrap
        from ..sources import CallSource, ConstSource
        target = self.self_value
        if self.raw is object.__setattr__ and len(args) == 2:
            store = getattr(target, "generic_setattr", target.setattr)   # never the class's own __setattr__
            store(tx, args[0].as_constant(), args[1])
            return const(None)
        if self.raw is object.__init__:
            return const(None)
        if self.raw is object.__getattribute__ and len(args) == 1 and not kwargs:
            lookup = getattr(target, "generic_getattr", target.getattr)
            return lookup(tx, args[0].as_constant())
        real = getattr(target, "obj", None)
        if real is None or self.name not in _PURE_READS or kwargs or not _builtin_container(real):
            if self.name == "__call__" and real is not None:
                raise Unsupported(f"call to {callable_name(real)}, which Kiln does not model (it runs as Python)")
            raise Unsupported(f"calling {self.describe()} on {target.describe()}")
        try:
            real_args = tuple(to_python(a, tx) for a in args)
        except Unsupported:
            raise Unsupported(f"{self.describe()} with arguments that are not constants")
        result = self.raw(real, *real_args)
        as_tuple = self.name in ("keys", "values", "items")
        if as_tuple:
            result = tuple(result)
        src = None
        if target.source is not None:
            src = CallSource(id(self.raw), target.source, real_args, self.raw, as_tuple)
        return wrap(tx, result, src)


class DunderProtocol:
    """Container protocols (``x[k]``, ``len``, ``in``, iteration) through the class's
    own dunder methods, for objects whose class is Python code."""

    def _dunder(self, tx, name):
        owner, raw = lookup_class_attr(self.python_type(), name)
        if raw is None:
            return None
        return bind_class_attr(tx, owner, raw, self, name)

    def getitem(self, tx, key):
        method = self._dunder(tx, "__getitem__")
        if method is None:
            raise Unsupported(f"{self.python_type().__name__} object is not subscriptable")
        return method.call(tx, [key], {})

    def setitem(self, tx, key, value):
        method = self._dunder(tx, "__setitem__")
        if method is None or isinstance(method, CMethodValue):
            raise Unsupported(f"item assignment on a {self.python_type().__name__} object")
        method.call(tx, [key, value], {})

    def length(self, tx):
        method = self._dunder(tx, "__len__")
        if method is None:
            raise Unsupported(f"len() of a {self.python_type().__name__} object")
        return method.call(tx, [], {}).as_constant()

    def _traced_truth(self, tx):
        """bool() as Python computes it: ``__bool__``, else ``__len__``, else True; traced
        when those are Python code, None when one of them is a C method."""
        for name in ("__bool__", "__len__"):
            owner, raw = lookup_class_attr(self.python_type(), name)
            if raw is None:
                continue
            method = bind_class_attr(tx, owner, raw, self, name)
            if method is None or isinstance(method, CMethodValue):
                return None
            return bool(method.call(tx, [], {}).as_constant())
        return True

    def call_method(self, tx, name, args, kwargs):
        if name == "__contains__":
            method = self._dunder(tx, "__contains__")
            if method is not None:
                return method.call(tx, args, kwargs)
            return const(any(_same(tx, v, args[0]) for v in self.unpack(tx)))
        return Value.call_method(self, tx, name, args, kwargs)

    def unpack(self, tx):
        method = self._dunder(tx, "__iter__")
        if method is not None and not isinstance(method, CMethodValue):
            return method.call(tx, [], {}).unpack(tx)
        real = getattr(self, "obj", None)
        if self.source is not None and isinstance(real, (dict, list, tuple)):
            n = self.length(tx)
            if isinstance(real, dict):
                return self.call_method(tx, "keys", [], {}).unpack(tx)
            return [self.getitem(tx, const(i)) for i in range(n)]
        if method is None and self._dunder(tx, "__getitem__") is not None:
            return _iterate_by_index(tx, self)
        raise Unsupported(f"iterating over a {self.python_type().__name__} object")


def _iterate_by_index(tx, v):
    """The old sequence protocol: v[0], v[1], ... until IndexError."""
    from .exceptions import TracedException
    out = []
    for i in range(10_000):
        try:
            out.append(v.getitem(tx, const(i)))
        except TracedException as e:
            if issubclass(e.value.cls, (IndexError, StopIteration)):
                return out
            raise
    raise Unsupported("iteration by index did not stop after 10000 items")


class ObjectValue(DunderProtocol, Value):
    """A real object that existed before tracing (with a source when reachable)."""

    def __init__(self, obj, source=None):
        self.obj = obj
        self.source = source

    def real_object(self):
        return self.obj

    def python_type(self):
        return type(self.obj)

    def describe(self):
        where = f" at {self.source.describe()}" if self.source is not None else ""
        return f"{type(self.obj).__name__} object{where}"

    def truth(self, tx):
        traced = self._traced_truth(tx)
        if traced is not None:
            return traced
        return bool(self.obj) if self.source is None else _guarded_truth(tx, self)

    def getattr(self, tx, name):
        pending = tx.state.side_effects.pending_attr(self.obj, name)
        if pending is not None:
            if pending is _DELETED:
                raise AttributeMissing(f"{type(self.obj).__name__} object has no attribute {name!r}")
            return pending
        se = tx.state.side_effects
        if name == "__dict__" and se.has_pending_attrs(self.obj) or se.dict_mutated_as_container(self.obj):
            raise Unsupported(f"{self.describe()}: attributes and __dict__ both changed in one graph")
        from .builder import wrap
        obj, cls = self.obj, type(self.obj)
        if _custom_getattribute(cls):
            # the class decides what attribute reads mean: ask it (guards read the same way)
            try:
                value = getattr(obj, name)
            except AttributeError:
                self._guard_missing(tx, name)
                raise AttributeMissing(f"{cls.__name__} object has no attribute {name!r}")
            if isinstance(value, types.MethodType) and value.__self__ is obj:
                from .functions import BoundMethodValue
                return BoundMethodValue(wrap(tx, value.__func__, None), self)
            return wrap(tx, value, _src(self.source, name))
        return self.generic_getattr(tx, name)

    def generic_getattr(self, tx, name):
        """``object.__getattribute__``: Python's lookup, ignoring a class's own override."""
        from .builder import wrap
        obj, cls = self.obj, type(self.obj)
        owner, raw = lookup_class_attr(cls, name)
        is_data_descr = raw is not None and (hasattr(type(raw), "__set__") or hasattr(type(raw), "__delete__"))
        if is_data_descr:
            if isinstance(raw, property):
                return bind_class_attr(tx, owner, raw, self, name)
            return wrap(tx, getattr(obj, name), _src(self.source, name))
        d = getattr(obj, "__dict__", None)
        if d is not None and name in d:
            return wrap(tx, d[name], _src(self.source, name))
        found = self._extra_attr(tx, name)
        if found is not None:
            return found
        if raw is not None:
            bound = bind_class_attr(tx, owner, raw, self, name)
            if bound is not None:
                return bound
            return wrap(tx, getattr(obj, name), _src(self.source, name))
        if lookup_class_attr(cls, "__getattr__")[1] is not None and not isinstance(obj, torch.nn.Module):
            try:
                value = getattr(obj, name)
            except AttributeError:
                self._guard_missing(tx, name)
                raise AttributeMissing(f"{cls.__name__} object has no attribute {name!r}")
            return wrap(tx, value, _src(self.source, name))
        self._guard_missing(tx, name)
        raise AttributeMissing(f"{cls.__name__} object has no attribute {name!r}")

    def _extra_attr(self, tx, name):
        return None

    def _guard_missing(self, tx, name):
        if self.source is not None:
            tx.state.guards.add("const", self.source, f"not hasattr({{v}}, {name!r})",
                                f"{self.source.describe()} has no attribute {name!r}")

    def setattr(self, tx, name, value):
        if isinstance(self.obj, torch.nn.Module) and isinstance(value, ObjectValue) and isinstance(value.obj, torch.nn.Module):
            raise Unsupported("assigning a submodule inside a compiled region")
        if isinstance(self.obj, torch.nn.Module):
            tx.state.side_effects.store_attr(self, name, value)   # Module.__setattr__ runs in the replay
            return
        from .attr_store import custom_setattr
        if not custom_setattr(tx, self, name, value):
            self.generic_setattr(tx, name, value)

    def generic_setattr(self, tx, name, value):
        """``object.__setattr__``: data descriptors first, then the instance dict."""
        from .attr_store import attribute_store_modelled
        if not attribute_store_modelled(tx, self, type(self.obj), name, value):
            tx.state.side_effects.store_attr(self, name, value)

    def delattr(self, tx, name):
        cls = type(self.obj)
        raw = lookup_class_attr(cls, name)[1]
        if lookup_class_attr(cls, "__delattr__")[1] is not object.__dict__["__delattr__"] \
                and not isinstance(self.obj, torch.nn.Module):
            raise Unsupported(f"del on a {cls.__name__} object, whose class defines __delattr__")
        if raw is not None and hasattr(type(raw), "__delete__") and not isinstance(raw, types.MemberDescriptorType):
            raise Unsupported(f"del of descriptor attribute {name!r} of a {cls.__name__} object")
        tx.state.side_effects.store_attr(self, name, _DELETED)

    def call(self, tx, args, kwargs):
        cls = type(self.obj)
        owner, raw = lookup_class_attr(cls, "__call__")
        if raw is None:
            raise Unsupported(f"{cls.__name__} object is not callable")
        bound = bind_class_attr(tx, owner, raw, self, "__call__")
        if bound is None:
            raise Unsupported(f"call to {callable_name(self.obj)}, which Kiln does not model (it runs as Python)")
        return bound.call(tx, args, kwargs)

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.source_expr(self.source)
        return cg.ref(self.obj)


def _custom_getattribute(cls) -> bool:
    return lookup_class_attr(cls, "__getattribute__")[1] not in (None, object.__dict__["__getattribute__"]) \
        and not issubclass(cls, torch.nn.Module)


def _same(tx, a, b) -> bool:
    from ..operators import compare
    import operator
    return bool(compare(tx, operator.eq, a, b).as_constant())


def _pending_write(tx, v, name):
    """What the trace itself stored at ``v.name`` (None if nothing); a pending ``del``
    reads as a missing attribute."""
    pending = tx.state.side_effects.pending_attr(v.obj, name)
    if pending is _DELETED:
        raise AttributeMissing(f"{v.describe()} has no attribute {name!r}")
    return pending


class _Deleted(Value):
    """Marks a pending ``del obj.attr``."""

    def describe(self):
        return "<deleted>"


_DELETED = _Deleted()


def _guarded_truth(tx, v: ObjectValue):
    value = bool(v.obj)
    tx.state.guards.add("const", v.source, f"bool({{v}}) is {value}", f"bool({v.source.describe()}) is {value}")
    return value


class ModuleValue(ObjectValue):
    """An ``nn.Module`` instance; its calls inline ``forward`` (hooks are refused)."""

    def describe(self):
        where = self.source.describe() if self.source is not None else "?"
        return f"{type(self.obj).__name__}({where})"

    def getattr(self, tx, name):
        if name in ("_buffers", "_parameters", "_modules"):
            # buffer writes are recorded as attribute writes (Module.__setattr__ runs in the
            # replay); reading the dict itself (named_buffers, state_dict) would miss them
            d = self.obj.__dict__.get(name) or {}
            if any(tx.state.side_effects.pending_attr(self.obj, k) is not None for k in d):
                raise Unsupported(f"reading {name} of {self.describe()} after setting one of them")
        return super().getattr(tx, name)

    def _extra_attr(self, tx, name):
        from .builder import wrap
        from ..sources import param_source
        obj = self.obj
        for kind in ("_parameters", "_buffers", "_modules"):
            d = obj.__dict__.get(kind)
            if d is not None and name in d:
                src = param_source(self.source, kind, name) if self.source is not None else None
                return wrap(tx, d[name], src)
        return None

    def call(self, tx, args, kwargs):
        mod = self.obj
        if (mod._forward_hooks or mod._forward_pre_hooks or mod._backward_hooks
                or getattr(mod, "_forward_hooks_with_kwargs", None) or getattr(mod, "_backward_pre_hooks", None)):
            raise Unsupported(f"{type(mod).__name__} has forward/backward hooks; Kiln does not inline module hooks yet")
        g = torch.nn.modules.module
        if (g._global_forward_hooks or g._global_forward_pre_hooks or g._global_backward_hooks
                or g._global_backward_pre_hooks):
            raise Unsupported("global nn.Module hooks are registered; Kiln does not inline module hooks yet")
        guards = tx.state.guards
        # one check per module (and one for the global registries), not one per hook dict:
        # these run on every call
        if self.source is not None:
            guards.add("len", self.source, "not ({v}._forward_hooks or {v}._forward_pre_hooks or "
                       "{v}._backward_hooks or {v}._backward_pre_hooks)", f"{self.source.describe()} has no hooks")
        registry = guards.ns.ref(g)
        guards.add("global_state", None, f"not ({registry}._global_forward_hooks or "
                   f"{registry}._global_forward_pre_hooks or {registry}._global_backward_hooks or "
                   f"{registry}._global_backward_pre_hooks)", "no global nn.Module hooks are registered")
        forward = self.getattr(tx, "forward")
        return forward.call(tx, args, kwargs)

    def setattr(self, tx, name, value):
        from .tensor import TensorValue
        mod = self.obj
        if name in mod.__dict__.get("_parameters", {}):
            raise Unsupported(f"assigning to parameter {name!r} inside a compiled region")
        if name in mod.__dict__.get("_buffers", {}) and isinstance(value, TensorValue):
            tx.state.side_effects.store_attr(self, name, value)
            return
        super().setattr(tx, name, value)


class NewObjectValue(DunderProtocol, Value):
    """An instance of a plain user class created while tracing (attributes symbolic)."""

    def __init__(self, cls: type):
        self.cls = cls
        self.attrs: dict[str, Value] = {}

    def python_type(self):
        return self.cls

    def describe(self):
        return f"new {self.cls.__name__} object"

    def getattr(self, tx, name):
        if name in self.attrs:
            return self.attrs[name]
        if name == "__class__":
            from .builder import wrap
            return wrap(tx, self.cls, None)
        if name == "__dict__":
            from .containers import DictValue
            return DictValue(self.attrs)
        owner, raw = lookup_class_attr(self.cls, name)
        if raw is not None:
            bound = bind_class_attr(tx, owner, raw, self, name)
            if bound is not None:
                return bound
            from .builder import wrap
            return wrap(tx, getattr(self.cls, name), None)
        raise AttributeMissing(f"{self.cls.__name__} object has no attribute {name!r}")

    def setattr(self, tx, name, value):
        from .attr_store import custom_setattr
        if not custom_setattr(tx, self, name, value):
            self.generic_setattr(tx, name, value)

    def generic_setattr(self, tx, name, value):
        from .attr_store import attribute_store_modelled
        if not attribute_store_modelled(tx, self, self.cls, name, value):
            self.attrs[name] = value

    def delattr(self, tx, name):
        if name not in self.attrs:
            raise AttributeMissing(f"{self.cls.__name__} object has no attribute {name!r}")
        del self.attrs[name]

    def call(self, tx, args, kwargs):
        owner, raw = lookup_class_attr(self.cls, "__call__")
        if raw is None:
            raise Unsupported(f"{self.cls.__name__} object is not callable")
        return bind_class_attr(tx, owner, raw, self, "__call__").call(tx, args, kwargs)

    def truth(self, tx):
        traced = self._traced_truth(tx)
        if traced is None:
            raise Unsupported(f"truth value of a {self.cls.__name__} object (a C __bool__/__len__)")
        return traced

    def contents(self):
        return list(self.attrs.values())

    def reconstruct(self, cg):
        return cg.new_user_object(self)


class ReplayedObjectValue(Value):
    """A dataclass / ModelOutput built while tracing.

    Its constructor ran for real on fake tensors (dataclass constructors only store
    what they are given); the glue calls the same constructor again on the real
    values.  Reads go through the fake-holding instance and map fakes back to graph
    values.
    """

    def __init__(self, instance, cls, args: list, kwargs: dict):
        self.instance = instance
        self.cls = cls
        self.args, self.kwargs = list(args), dict(kwargs)

    def python_type(self):
        return self.cls

    def describe(self):
        return f"new {self.cls.__name__}"

    def contents(self):
        return [*self.args, *self.kwargs.values()]

    def _map(self, tx, real):
        from .builder import wrap_traced_object
        return wrap_traced_object(tx, real)

    def getattr(self, tx, name):
        owner, raw = lookup_class_attr(self.cls, name)
        if isinstance(raw, types.FunctionType):
            from .functions import BoundMethodValue
            from .builder import wrap
            return BoundMethodValue(wrap(tx, raw, None), self)
        if isinstance(raw, (types.MethodDescriptorType, types.WrapperDescriptorType)):
            from .containers import BoundContainerMethod
            return BoundContainerMethod(self, name)
        try:
            return self._map(tx, getattr(self.instance, name))
        except AttributeError:
            raise AttributeMissing(f"{self.cls.__name__} object has no attribute {name!r}")

    def call_method(self, tx, name, args, kwargs):
        owner, raw = lookup_class_attr(self.cls, name)
        if raw is not None and not isinstance(raw, types.FunctionType):
            # a C method of the base class (e.g. OrderedDict.keys): run it on the instance
            try:
                real_args = [a.as_constant() for a in args]
                real_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
            except Unsupported:
                raise Unsupported(f"{self.cls.__name__}.{name} with non-constant arguments")
            return self._map(tx, getattr(self.instance, name)(*real_args, **real_kwargs))
        return super().call_method(tx, name, args, kwargs)

    def getitem(self, tx, key):
        return self.call_method(tx, "__getitem__", [key], {})

    def unpack(self, tx):
        return self._map(tx, tuple(self.instance)).unpack(tx) if not isinstance(self.instance, dict) \
            else self.call_method(tx, "keys", [], {}).unpack(tx)

    def length(self, tx):
        return len(self.instance)

    def truth(self, tx):
        return bool(self.instance)

    def setattr(self, tx, name, value):
        raise Unsupported(f"mutating a {self.cls.__name__} built inside the compiled region")

    def setitem(self, tx, key, value):
        raise Unsupported(f"mutating a {self.cls.__name__} built inside the compiled region")

    def reconstruct(self, cg):
        return cg.replayed_object(self)


def is_replayable_class(cls) -> bool:
    """Classes whose constructor only stores its arguments (dataclasses, namedtuples)."""
    return dataclasses.is_dataclass(cls) and not issubclass(cls, torch.nn.Module)


class ClassValue(ObjectValue):
    """A class object; calling it constructs an instance."""

    def describe(self):
        return f"class {self.obj.__qualname__}"

    def getattr(self, tx, name):
        from .builder import wrap
        pending = _pending_write(tx, self, name)
        if pending is not None:
            return pending
        cls = self.obj
        owner, raw = lookup_class_attr(cls, name)
        if isinstance(raw, classmethod):
            from .functions import BoundMethodValue
            return BoundMethodValue(wrap(tx, raw.__func__, None), self)
        if isinstance(raw, staticmethod):
            return wrap(tx, raw.__func__, None)
        if isinstance(raw, types.FunctionType):
            from .functions import UserFunctionValue
            from ..sources import AttrSource, ConstSource, ItemSource
            return UserFunctionValue(raw, ItemSource(AttrSource(ConstSource(id(owner), owner), "__dict__"), name))
        try:
            value = getattr(cls, name)
        except AttributeError:
            self._guard_missing(tx, name)
            raise AttributeMissing(f"type object {cls.__name__!r} has no attribute {name!r}")
        return wrap(tx, value, _src(self.source, name))

    def call(self, tx, args, kwargs):
        from .builder import construct
        return construct(tx, self, args, kwargs)


class PythonModuleValue(ObjectValue):
    def describe(self):
        return f"module {self.obj.__name__}"

    def getattr(self, tx, name):
        from .builder import wrap
        pending = _pending_write(tx, self, name)
        if pending is not None:
            return pending
        try:
            value = getattr(self.obj, name)
        except AttributeError:
            raise AttributeMissing(f"module {self.obj.__name__!r} has no attribute {name!r}")
        src = None if is_trusted_module(self.obj) else _src(self.source, name)
        return wrap(tx, value, src)


def is_plain_class(cls) -> bool:
    """A user class Kiln can instantiate symbolically (no custom __new__, slots or metaclass)."""
    import abc
    return (isinstance(cls, type) and type(cls) in (type, abc.ABCMeta) and cls.__new__ is object.__new__
            and "__slots__" not in cls.__dict__ and not issubclass(cls, (torch.nn.Module, BaseException, torch.Tensor))
            and all(inspect.getattr_static(k, "__dict__", None) is not None for k in cls.__mro__[:-1]))


def constant_value(v: Value):
    return v.value if isinstance(v, ConstantValue) else None


_ = const
