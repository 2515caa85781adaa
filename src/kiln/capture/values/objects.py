"""Python objects that existed before tracing: instances, classes and Python modules,
with the container protocols (``x[k]``, ``len``, ``in``, iteration, truth) of classes
written in Python.

Attribute lookup follows Python's rules (``attributes.py``) on the real object, so
what Kiln reads is what eager would read; each read is guarded through its source.
"""
from __future__ import annotations

import abc
import inspect
import operator
import sys
import types

import torch

from ..basics import literal
from ...exc import Unsupported
from .attributes import (DELETED, GENERIC_SETATTRS, CMethodValue, attr_source, attribute_store_modelled,
                         bind_class_attr, callable_name, class_attr_source, class_is_trusted, custom_setattr, guard_class_walk,
                         has_custom_getattribute, is_trusted_module, lookup_class_attr, owner_entry_source,
                         pending_write, stored_on_class, traced_class_lookup)
from .base import (AttributeMissing, BoundContainerMethod, TracedException, Value, checked_bool, checked_len, const,
                   no_attribute, raise_python)
from .containers import ListValue
from .functions import BoundMethodValue, UserFunctionValue
from .weakrefs import DEREF, call_real_ref
from ..basics import AttrSource, ConstSource, GlobalSource, ItemSource


class DunderProtocol:
    """Container protocols (``x[k]``, ``len``, ``in``, iteration) through the class's
    own dunder methods, for objects whose class is Python code."""

    def _dunder(self, tx, name):
        owner, raw, changed = traced_class_lookup(tx, self.python_type(), name)
        if changed:
            guard_class_walk(tx, self.python_type(), owner, name)
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
        return checked_len(method.call(tx, [], {}).as_constant())

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
            result = method.call(tx, [], {}).as_constant()
            return checked_bool(result) if name == "__bool__" else checked_len(result) != 0
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
    out = []
    for i in range(10_000):
        try:
            out.append(v.getitem(tx, const(i)))
        except TracedException as e:
            if issubclass(e.cls, (IndexError, StopIteration)):
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
        return _real_truth(self.obj) if self.source is None else _guarded_truth(tx, self)

    def getattr(self, tx, name):
        pending = tx.state.side_effects.pending_attr(self.obj, name)
        if pending is not None:
            if pending is DELETED:
                raise no_attribute(type(self.obj), name)
            return pending
        se = tx.state.side_effects
        if name == "__dict__" and se.has_pending_attrs(self.obj) or se.dict_mutated_as_container(self.obj):
            raise Unsupported(f"{self.describe()}: attributes and __dict__ both changed in one graph")
        obj, cls = self.obj, type(self.obj)
        if has_custom_getattribute(cls):
            # the class decides what attribute reads mean: ask it (guards read the same way)
            if traced_class_lookup(tx, cls, name)[2]:
                raise Unsupported(f"{self.describe()}.{name}: its class's __getattribute__ would read the class "
                                  f"attribute the frame changed")
            try:
                value = getattr(obj, name)
            except AttributeError as e:   # the class's own code said so, in its own words
                self._guard_missing(tx, name)
                raise AttributeMissing(str(e)) from None
            if isinstance(value, types.MethodType) and value.__self__ is obj:
                return BoundMethodValue(tx.wrap(value.__func__, None), self)
            return tx.wrap(value, attr_source(self.source, name))
        return self.generic_getattr(tx, name)

    def generic_getattr(self, tx, name):
        """``object.__getattribute__``: Python's lookup, ignoring a class's own override.
        The class part walks the MRO as the trace sees it (``traced_class_lookup``): a
        class attribute the frame wrote (on the class or a base) is read back, not the
        real class's value from before the frame."""
        obj, cls = self.obj, type(self.obj)
        owner, raw, changed = traced_class_lookup(tx, cls, name)
        stored = isinstance(raw, Value)
        if stored and _is_data_descriptor_type(raw.python_type()):
            raise Unsupported(f"{name!r} was set on class {cls.__qualname__} in the frame to a data descriptor")
        is_data_descr = raw is not None and not stored and _is_data_descriptor_type(type(raw))
        if is_data_descr:
            if isinstance(raw, property):
                if changed:
                    guard_class_walk(tx, cls, owner, name)
                return bind_class_attr(tx, owner, raw, self, name)
            if changed:
                raise Unsupported(f"{self.describe()}.{name}: a descriptor behind a class attribute the frame changed")
            return tx.wrap(getattr(obj, name), attr_source(self.source, name))
        d = getattr(obj, "__dict__", None)
        if d is not None and name in d:
            return tx.wrap(d[name], attr_source(self.source, name))
        found = self._extra_attr(tx, name)
        if found is not None:
            return found
        if d is not None and self.source is not None and (raw is not None or changed):
            # found on the class: an instance attribute set later (a monkeypatched
            # forward) would shadow it, so the entry checks there is none
            tx.state.guards.add("keys", self.source, f"{literal(name)} not in {{v}}.__dict__",
                                f"{self.source.describe()} has no instance attribute {name!r}",
                                plan=(("in_dict", name, False),))
        if changed:
            guard_class_walk(tx, cls, owner, name)
        if raw is not None:
            bound = bind_class_attr(tx, owner, raw, self, name)
            if bound is not None:
                return bound
            if changed:
                if _binds_type(type(raw)):
                    raise Unsupported(f"{self.describe()}.{name}: a descriptor behind a class attribute the "
                                      f"frame changed")
                return tx.wrap(raw, owner_entry_source(owner, name))
            source = attr_source(self.source, name)
            if source is None and not _binds_type(type(raw)):
                source = class_attr_source(cls, name)   # read again from the class itself
            return tx.wrap(getattr(obj, name), source)
        if lookup_class_attr(cls, "__getattr__")[1] is not None and not isinstance(obj, torch.nn.Module):
            if changed:
                raise Unsupported(f"{self.describe()}.{name}: __getattr__ after the frame deleted the class attribute")
            try:
                value = getattr(obj, name)
            except AttributeError as e:   # the class's own code said so, in its own words
                self._guard_missing(tx, name)
                raise AttributeMissing(str(e)) from None
            return tx.wrap(value, attr_source(self.source, name))
        if not changed:
            self._guard_missing(tx, name)
        raise no_attribute(cls, name)

    def _extra_attr(self, tx, name):
        return None

    def _guard_missing(self, tx, name):
        if self.source is not None:
            tx.state.guards.add("const", self.source, f"not hasattr({{v}}, {literal(name)})",
                                f"{self.source.describe()} has no attribute {name!r}", plan=(("hasattr", name, False),))

    def setattr(self, tx, name, value):
        if isinstance(self.obj, torch.nn.Module) and isinstance(value, ObjectValue) and isinstance(value.obj, torch.nn.Module):
            raise Unsupported("assigning a submodule inside a compiled region")
        if isinstance(self.obj, torch.nn.Module):
            tx.state.side_effects.store_attr(self, name, value)   # Module.__setattr__ runs in the replay
            return
        if not custom_setattr(tx, self, name, value):
            self.generic_setattr(tx, name, value)

    def generic_setattr(self, tx, name, value):
        """``object.__setattr__``: data descriptors first, then the instance dict."""
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
        tx.state.side_effects.store_attr(self, name, DELETED)

    def call(self, tx, args, kwargs):
        cls = type(self.obj)
        owner, raw = lookup_class_attr(cls, "__call__")
        if raw is None:
            raise Unsupported(f"{cls.__name__} object is not callable")
        if raw is DEREF:
            found = call_real_ref(tx, self, args, kwargs)
            if found is not None:
                return found
        bound = bind_class_attr(tx, owner, raw, self, "__call__")
        if bound is None:
            raise Unsupported(f"call to {callable_name(self.obj)}, which Kiln does not model (it runs as Python)")
        return bound.call(tx, args, kwargs)

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.source_expr(self.source)
        return cg.ref(self.obj)


def _is_data_descriptor_type(t: type) -> bool:
    return lookup_class_attr(t, "__set__")[1] is not None or lookup_class_attr(t, "__delete__")[1] is not None


def _binds_type(t: type) -> bool:
    return lookup_class_attr(t, "__get__")[1] is not None


def _same(tx, a, b) -> bool:
    return bool(tx.apply_operator(operator.eq, a, b).as_constant())


def _real_truth(obj) -> bool:
    """``bool(obj)`` through a C ``__bool__`` / ``__len__`` Kiln does not model: one that
    raises (a numpy array of several items) may be an extension's own code, so the
    frame breaks there rather than Kiln guessing the program's exception."""
    try:
        return bool(obj)
    except Exception as e:   # noqa: BLE001 - any refusal becomes a break with its reason
        raise Unsupported(f"bool() of a {type(obj).__name__} object raised {type(e).__name__}: {e}") from None


def _guarded_truth(tx, v: ObjectValue):
    value = _real_truth(v.obj)
    tx.state.guards.add("const", v.source, f"bool({{v}}) is {value}", f"bool({v.source.describe()}) is {value}",
                        plan=(("truth", value),))
    return value


class ClassValue(ObjectValue):
    """A class object; calling it constructs an instance."""

    def describe(self):
        return f"class {self.obj.__qualname__}"

    def getattr(self, tx, name):
        """``type.__getattribute__``: the metaclass's data descriptors (``__name__``,
        ``__dict__``) first, then the class's MRO as the trace sees it (its own writes
        to this class or a base read back, a ``del`` uncovering the base's entry), then
        the real lookup.  A read from the real class is guarded through the class
        (``Cls.name`` again at entry) even when the class itself came without a source
        (``type(self)``, ``self.__class__``)."""
        cls = self.obj
        se = tx.state.side_effects
        if name == "__subclasses__" and type(cls) in (type, abc.ABCMeta):
            return SubclassesValue(self)
        if name == "__dict__" and se.has_pending_attrs(cls):
            raise Unsupported(f"{self.describe()}.__dict__ after the frame changed the class's attributes")
        meta_raw = lookup_class_attr(type(cls), name)[1]
        if meta_raw is not None and _is_data_descriptor_type(type(meta_raw)):
            pending = pending_write(tx, self, name)
            if pending is not None:
                return pending
            return tx.wrap(getattr(cls, name), attr_source(self.source, name) or class_attr_source(cls, name))
        owner, raw, changed = traced_class_lookup(tx, cls, name)
        if changed:
            guard_class_walk(tx, cls, owner, name)
        if isinstance(raw, Value):
            return stored_on_class(tx, raw, name)
        if isinstance(raw, classmethod):
            return BoundMethodValue(tx.wrap(raw.__func__, None), self)
        if isinstance(raw, staticmethod):
            return tx.wrap(raw.__func__, None)
        if isinstance(raw, types.FunctionType):
            source = ItemSource(AttrSource(ConstSource(id(owner), owner), "__dict__"), name)
            tx.state.guards.identity(source, raw, "function")   # replaced on the class: recompile
            return UserFunctionValue(raw, source)
        if changed:
            if raw is None:
                if meta_raw is not None:
                    raise Unsupported(f"{self.describe()}.{name}: the metaclass's after the frame deleted it")
                raise AttributeMissing(f"type object {cls.__name__!r} has no attribute {name!r}")
            if _binds_type(type(raw)):
                raise Unsupported(f"{self.describe()}.{name}: a descriptor behind a class attribute the frame changed")
            return tx.wrap(raw, owner_entry_source(owner, name))
        try:
            value = getattr(cls, name)
        except AttributeError:
            self._guard_missing(tx, name)
            raise AttributeMissing(f"type object {cls.__name__!r} has no attribute {name!r}")
        source = attr_source(self.source, name)
        if source is None and (raw is None or not _binds_type(type(raw))):
            source = class_attr_source(cls, name)
        return tx.wrap(value, source)

    def _guard_missing(self, tx, name):
        source = self.source
        if source is None and not class_is_trusted(self.obj):
            source = ConstSource(id(self.obj), self.obj)
        if source is not None:
            tx.state.guards.add("const", source, f"not hasattr({{v}}, {literal(name)})",
                                f"{source.describe()} has no attribute {name!r}", plan=(("hasattr", name, False),))

    def delattr(self, tx, name):
        """``del Cls.name`` (``type.__delattr__``): the class's own entry, as the trace sees
        it, must exist; later reads then find the base's (``traced_class_lookup``)."""
        cls = self.obj
        meta = type(cls)
        meta_raw = lookup_class_attr(meta, name)[1]
        if lookup_class_attr(meta, "__delattr__")[1] is not type.__dict__["__delattr__"] or \
                (meta_raw is not None and _is_data_descriptor_type(type(meta_raw))):
            return ObjectValue.delattr(self, tx, name)
        pending = tx.state.side_effects.pending_attr(cls, name)
        if pending is DELETED or (pending is None and name not in vars(cls)):
            raise_python(AttributeError, f"type object {cls.__name__!r} has no attribute {name!r}")
        real_entry = name in vars(cls)
        tx.state.guards.add("keys", ConstSource(id(cls), cls), f"{literal(name)} {'in' if real_entry else 'not in'} {{v}}.__dict__",
                            f"class {cls.__qualname__} {'has' if real_entry else 'has no'} attribute {name!r} of its own",
                            plan=(("in_dict", name, real_entry),))
        if real_entry:
            tx.state.side_effects.store_attr(self, name, DELETED)
        else:
            tx.state.side_effects.drop_attr(cls, name)   # stored by the frame only: net, nothing happened

    def call(self, tx, args, kwargs):
        return tx.construct(self, args, kwargs)


class SubclassesValue(Value):
    """``cls.__subclasses__`` (einops finds its backends so): the answer is a fact of the
    process, read at trace time and guarded (a class defined later recompiles); each
    call returns a new list, as Python's does."""

    def __init__(self, cls_value):
        self.cls_value = cls_value

    def describe(self):
        return f"{self.cls_value.obj.__qualname__}.__subclasses__"

    def call(self, tx, args, kwargs):
        if args or kwargs:
            raise Unsupported(f"{self.describe()}() takes no arguments")
        cls = self.cls_value.obj
        subclasses = cls.__subclasses__()
        ns = tx.state.ns
        tx.state.guards.add("global_state", None, f"{ns.ref(cls)}.__subclasses__() == {ns.ref(subclasses)}",
                            f"{cls.__qualname__} has the same subclasses")
        return ListValue([tx.wrap(c, None) for c in subclasses])


class PythonModuleValue(ObjectValue):
    """A Python module.  Its attributes are its globals, one dict (the ``__globals__`` of
    its functions): reads and writes through the module object use the store that
    LOAD_GLOBAL and STORE_GLOBAL in its functions use (``SideEffects.store_global``,
    keyed by that dict), so each sees the other's writes, and the guards are the same
    ones (``GlobalSource``).  What the module's class decides itself (a data descriptor,
    the ``__setattr__`` of a ModuleType subclass) stays an ordinary attribute access."""

    def describe(self):
        return f"module {self.obj.__name__}"

    def _in_dict(self, name) -> bool:
        """Whether ``mod.name`` means the dict entry: no data descriptor of the class wins."""
        raw = lookup_class_attr(type(self.obj), name)[1]
        return raw is None or not (hasattr(type(raw), "__set__") or hasattr(type(raw), "__delete__"))

    def _global_source(self, tx, name):
        # attributes of trusted modules (torch.float32, math.pi) are not guarded
        return None if is_trusted_module(self.obj) else GlobalSource.of(self.obj.__dict__, name,
                                                                         tx.state.fn.__globals__)

    def read_global(self, tx, name, guard_missing: bool = True):
        """The module's global ``name`` as its dict holds it now (the trace's own writes
        first), or None when it has none (guarded when ``guard_missing``)."""
        g = self.obj.__dict__
        pending = tx.state.side_effects.pending_global(g, name)
        if pending is not None:
            return pending
        if name in g:
            return tx.wrap(g[name], self._global_source(tx, name))
        if guard_missing:
            self._guard_missing(tx, name)
        return None

    def _guard_missing(self, tx, name):
        source = self._global_source(tx, name)
        if source is not None:
            tx.state.guards.add("keys", None, f"{literal(name)} not in {tx.state.ns.ref(self.obj.__dict__, '___g')}",
                                f"{source.describe()} does not exist", plan=(("on", self.obj.__dict__), ("in", name, False)))

    def getattr(self, tx, name):
        mod = self.obj
        if self._in_dict(name):
            # not guarded missing yet: a module's __getattr__ may add it (a lazy module)
            found = self.read_global(tx, name, guard_missing=False)
            if found is not None:
                return found
        pending = pending_write(tx, self, name)   # stored through the class's own __setattr__
        if pending is not None:
            return pending
        if name == "__dict__":
            return ModuleGlobalsValue(self)
        try:
            value = getattr(mod, name)
        except AttributeError:
            self._guard_missing(tx, name)
            raise AttributeMissing(f"module {mod.__name__!r} has no attribute {name!r}")
        src = None if is_trusted_module(mod) else attr_source(self.source, name)
        return tx.wrap(value, src)

    def _stores_in_dict(self, name) -> bool:
        return lookup_class_attr(type(self.obj), "__setattr__")[1] in GENERIC_SETATTRS and self._in_dict(name)

    def setattr(self, tx, name, value):
        if self._stores_in_dict(name):
            tx.state.side_effects.store_global(self.obj.__dict__, name, value)
        else:
            ObjectValue.setattr(self, tx, name, value)

    def generic_setattr(self, tx, name, value):
        if self._in_dict(name):
            tx.state.side_effects.store_global(self.obj.__dict__, name, value)
        else:
            ObjectValue.generic_setattr(self, tx, name, value)

    def delattr(self, tx, name):
        raise Unsupported(f"deleting attribute {name!r} of {self.describe()} inside a compiled region "
                          f"(deleting a module's globals is not modelled)")


class ModuleGlobalsValue(Value):
    """``mod.__dict__``: the module's one store seen as a dict.  ``d[k]``, ``d.get(k)``,
    ``k in d`` and ``d[k] = v`` read and write what ``mod.k`` and the module's
    LOAD_GLOBAL / STORE_GLOBAL do; anything else on it (iterating, deleting) is a
    graph break rather than a second copy of the module that would go stale."""

    def __init__(self, module_value: PythonModuleValue):
        self.module_value = module_value
        self.source = None

    @staticmethod
    def for_dict(tx, d: dict, source):
        """``d`` as its module's store when it is a module's ``__dict__`` reached as a dict
        (``G = vars(mod)`` kept in a global); None for any other dict.  A copy of it as
        an ordinary dict would miss the trace's writes to the module."""
        name = d.get("__name__") if "__name__" in d else None
        mod = sys.modules.get(name) if isinstance(name, str) else None
        if mod is None or getattr(mod, "__dict__", None) is not d:
            return None
        if source is not None:
            tx.state.guards.identity(source, d, "module's globals")
        return ModuleGlobalsValue(PythonModuleValue(mod, None))

    def python_type(self):
        return dict

    def describe(self):
        return f"{self.module_value.describe()}.__dict__"

    def real_object(self):
        return self.module_value.obj.__dict__

    def contents(self):
        return [self.module_value]

    def _name(self, key):
        name = key.as_constant() if key.is_constant() else None
        if not isinstance(name, str):
            raise Unsupported(f"{self.describe()} indexed by something other than a constant str")
        return name

    def getitem(self, tx, key):
        found = self.module_value.read_global(tx, self._name(key))
        if found is None:
            raise_python(KeyError, key.as_constant())
        return found

    def setitem(self, tx, key, value):
        tx.state.side_effects.store_global(self.real_object(), self._name(key), value)

    _METHODS = ("get", "__contains__", "__getitem__", "__setitem__")

    def getattr(self, tx, name):
        if name in self._METHODS:
            return BoundContainerMethod(self, name)
        raise Unsupported(f"{self.describe()}.{name}: only d[k], d.get(k), k in d and d[k] = v are modelled "
                          f"on a module's globals")

    def call_method(self, tx, name, args, kwargs):
        if name == "__contains__" and len(args) == 1 and not kwargs:
            return const(self.module_value.read_global(tx, self._name(args[0])) is not None)
        if name == "get" and 1 <= len(args) <= 2 and not kwargs:
            found = self.module_value.read_global(tx, self._name(args[0]))
            return found if found is not None else (args[1] if len(args) == 2 else const(None))
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(tx, args[0])
        if name == "__setitem__" and len(args) == 2 and not kwargs:
            self.setitem(tx, args[0], args[1])
            return const(None)
        raise Unsupported(f"{self.describe()}.{name}(): only d[k], d.get(k), k in d and d[k] = v are modelled "
                          f"on a module's globals")


def is_plain_class(cls, python_new: bool = False) -> bool:
    """A user class Kiln can instantiate symbolically (no metaclass; its instances keep
    attributes in a ``__dict__`` or in ``__slots__``; no ``__new__`` of its own, or with
    ``python_new`` one written in Python, which is traced)."""
    new = inspect.getattr_static(cls, "__new__", None) if isinstance(cls, type) else None
    own_new = python_new and isinstance(new, staticmethod) and isinstance(new.__func__, types.FunctionType)
    return (isinstance(cls, type) and type(cls) in (type, abc.ABCMeta) and (cls.__new__ is object.__new__ or own_new)
            and not issubclass(cls, (torch.nn.Module, BaseException, torch.Tensor))
            and all(inspect.getattr_static(k, "__dict__", None) is not None or "__slots__" in vars(k)
                    for k in cls.__mro__[:-1]))


def instance_has_dict(cls) -> bool:
    """Whether instances of ``cls`` have a ``__dict__`` (a class without ``__slots__``
    somewhere in the MRO gives them one)."""
    return any("__slots__" not in vars(k) or "__dict__" in vars(k).get("__slots__", ()) for k in cls.__mro__[:-1])


def slot_names(cls) -> set:
    names = set()
    for k in cls.__mro__[:-1]:
        slots = vars(k).get("__slots__", ())
        names.update([slots] if isinstance(slots, str) else slots)
    return names
