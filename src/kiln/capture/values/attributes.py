"""Python's attribute rules, applied to Values: lookup through the class's MRO without
running descriptors, binding what is found (functions, class/static methods,
properties, C methods of builtin bases), attribute stores through a class's own
``__setattr__`` or data descriptors, and pending writes of the trace itself.

ObjectValue, NewObjectValue, ClassValue and super() all look attributes up here, so
what Kiln reads is what eager would read.
"""
from __future__ import annotations

import sys
import types

import torch

from ..basics import literal
from ...exc import Unsupported
from ..basics import AttrSource, CallSource, ConstSource, ItemSource
from .base import AttributeMissing, Value, const, to_python, type_lookup
from .functions import BoundMethodValue, UserFunctionValue


# Python modules whose attributes are treated as fixed: reading torch.float32 or
# math.pi is not guarded (the same trust TorchDynamo places in them).
TRUSTED_MODULE_PREFIXES = ("torch", "math", "operator", "functools", "itertools", "numpy", "builtins",
                           "collections", "typing", "warnings", "inspect", "enum", "dataclasses", "abc",
                           "copy", "types", "re", "logging", "contextlib")


def is_trusted_module(mod: types.ModuleType) -> bool:
    name = getattr(mod, "__name__", "") or ""
    return any(name == p or name.startswith(p + ".") for p in TRUSTED_MODULE_PREFIXES)


def attr_source(base, name):
    """Where ``base.name`` lives at run time (None when ``base`` has no source)."""
    return AttrSource(base, name) if base is not None else None


def lookup_class_attr(cls: type, name: str):
    """(owner class, raw attribute) from the MRO without running descriptors."""
    return type_lookup(cls, name)


def traced_class_lookup(tx, cls: type, name: str):
    """(owner, raw, changed): Python's MRO walk for ``name`` over the class dicts as the
    trace sees them, each class's real ``__dict__`` overlaid with the trace's own writes
    (``Cls.x = v``, ``type(self).x += 1``, ``setattr(Cls, ...)``; a pending ``del`` hides
    the entry).  ``raw`` is the stored Value when a write of the trace holds the answer;
    ``changed`` says a write of the trace decided the walk, so what the real classes say
    now is not what the frame sees (``guard_class_walk`` then guards class by class)."""
    se = tx.state.side_effects
    changed = False
    for klass in cls.__mro__:
        pending = se.pending_attr(klass, name)
        if pending is DELETED:
            changed = True
            continue
        if pending is not None:
            return klass, pending, True
        if name in klass.__dict__:
            return klass, klass.__dict__[name], changed
    return None, None, changed


def class_is_trusted(cls: type) -> bool:
    """Classes of trusted modules (torch.Tensor, collections.OrderedDict): their
    attributes are fixed, as a trusted module's are, so reads of them are not guarded."""
    mod = sys.modules.get(getattr(cls, "__module__", None) or "")
    return mod is not None and is_trusted_module(mod)


def guard_class_walk(tx, cls: type, owner, name: str):
    """After a walk that the trace's writes decided: the classes before ``owner`` (all
    of the MRO when nothing was found) that the real dicts decided must still lack
    ``name`` at entry, and a real entry found at ``owner`` must still be the one read."""
    se = tx.state.side_effects
    for klass in cls.__mro__:
        if klass is owner:
            break
        if se.pending_attr(klass, name) is None and not class_is_trusted(klass):
            tx.state.guards.add("keys", ConstSource(id(klass), klass), f"{literal(name)} not in {{v}}.__dict__",
                                f"class {klass.__qualname__} has no attribute {name!r} of its own",
                                plan=(("in_dict", name, False),))


def class_attr_source(cls: type, name: str):
    """Where ``cls.name`` is read again at entry when the class has no source of its own
    (``type(self)``, ``self.__class__``, the class of an object made in the frame): the
    class itself, which Kiln holds.  None for trusted classes (not guarded)."""
    return None if class_is_trusted(cls) else AttrSource(ConstSource(id(cls), cls), name)


def owner_entry_source(owner: type, name: str):
    """``owner.__dict__[name]``: one class's own entry, independent of the rest of the MRO."""
    return ItemSource(AttrSource(ConstSource(id(owner), owner), "__dict__"), name)


def _binds(t: type) -> bool:
    return lookup_class_attr(t, "__get__")[1] is not None


def bind_stored_attr(tx, stored: Value, self_value: Value, name: str):
    """What ``obj.name`` gives when the trace itself stored ``stored`` on the class: a
    function binds to ``obj``; an object without ``__get__`` is itself; anything else
    that binds (a descriptor made in the frame) is not modelled."""
    t = stored.python_type()
    if t is types.FunctionType:
        return BoundMethodValue(stored, self_value)
    if not _binds(t):
        return stored
    raise Unsupported(f"{name!r} was set on the class in the frame to a {t.__name__}, which binds as a "
                      f"descriptor (not modelled)")


def stored_on_class(tx, stored: Value, name: str):
    """``Cls.name`` when the trace stored ``stored`` on the class: functions and plain
    objects are themselves; other descriptors are not modelled."""
    t = stored.python_type()
    if t is types.FunctionType or not _binds(t):
        return stored
    raise Unsupported(f"{name!r} was set on the class in the frame to a {t.__name__}, which binds as a "
                      f"descriptor (not modelled)")


def bind_class_attr(tx, owner: type, raw, self_value: Value, name: str):
    """What ``obj.name`` gives when ``name`` is found on the class as ``raw`` (a Value:
    stored there by the trace itself)."""
    if isinstance(raw, Value):
        return bind_stored_attr(tx, raw, self_value, name)
    raw_src = ItemSource(AttrSource(ConstSource(id(owner), owner), "__dict__"), name)
    if isinstance(raw, types.FunctionType):
        # inlined as the method it is (even a torch class's), and the entry checks that the
        # class still holds it: a method replaced on the class after compiling must not run
        tx.state.guards.identity(raw_src, raw, "function")
        return BoundMethodValue(UserFunctionValue(raw, raw_src), self_value)
    if isinstance(raw, staticmethod):
        return tx.wrap(raw.__func__, None)
    if isinstance(raw, classmethod):
        return BoundMethodValue(tx.wrap(raw.__func__, None), tx.wrap(self_value.python_type(), None))
    if isinstance(raw, property):
        if raw.fget is None:
            raise AttributeMissing(f"property {name!r} has no getter")
        return tx.wrap(raw.fget, None).call(tx, [self_value], {})
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
        return tx.wrap(result, src)


# C __setattr__ slots that store like object's (classes and Python modules: a plain dict store;
# 3.13's module type inherits object's)
GENERIC_SETATTRS = tuple(cls.__dict__["__setattr__"] for cls in (object, type, types.ModuleType)
                         if "__setattr__" in cls.__dict__)


def custom_setattr(tx, self_value, name, value) -> bool:
    """Run the class's own ``__setattr__`` (traced) if it has one; False if it has none.

    A ``__setattr__`` written in C other than ``object``'s (an extension type) is a store
    Kiln cannot model: refused, so it becomes a graph break instead of being lost."""
    owner, raw = lookup_class_attr(self_value.python_type(), "__setattr__")
    if raw is None or raw in GENERIC_SETATTRS:
        return False
    if isinstance(raw, types.FunctionType):
        bind_class_attr(tx, owner, raw, self_value, "__setattr__").call(tx, [const(name), value], {})
        return True
    raise Unsupported(f"setting attribute {name!r} of a {self_value.python_type().__name__} object "
                      f"(its __setattr__ is not Python code)")


def attribute_store_modelled(tx, self_value, cls, name, value) -> bool:
    """Stores that a data descriptor on the class handles: a property's setter is traced;
    a slot is an ordinary store (False); any other descriptor is refused."""
    raw = lookup_class_attr(cls, name)[1]
    if raw is None or not hasattr(type(raw), "__set__") or isinstance(raw, types.MemberDescriptorType):
        return False
    if isinstance(raw, property):
        if raw.fset is None:
            raise Unsupported(f"property {name!r} of {cls.__name__} has no setter")
        tx.wrap(raw.fset, None).call(tx, [self_value, value], {})
        return True
    raise Unsupported(f"setting {name!r} of a {cls.__name__} object through a {type(raw).__name__}")


def has_custom_getattribute(cls) -> bool:
    return lookup_class_attr(cls, "__getattribute__")[1] not in (None, object.__dict__["__getattribute__"]) \
        and not issubclass(cls, torch.nn.Module)


def pending_write(tx, v, name):
    """What the trace itself stored at ``v.name`` (None if nothing); a pending ``del``
    reads as a missing attribute."""
    pending = tx.state.side_effects.pending_attr(v.obj, name)
    if pending is DELETED:
        raise AttributeMissing(f"{v.describe()} has no attribute {name!r}")
    return pending


class _Deleted(Value):
    """Marks a pending ``del obj.attr``."""

    def describe(self):
        return "<deleted>"


DELETED = _Deleted()
