"""Objects created while tracing: instances of plain user classes (attributes held
symbolically, rebuilt by the glue) and dataclasses / ModelOutputs (their constructor is
re-run by the glue on the real values)."""
from __future__ import annotations

import dataclasses
import types

import torch

from ...exc import Unsupported
from .attributes import (attribute_store_modelled, bind_class_attr, class_attr_source, custom_setattr,
                         guard_class_walk, has_custom_getattribute, lookup_class_attr, owner_entry_source,
                         traced_class_lookup)
from .base import (BoundContainerMethod, Value, checked_bool, checked_len, const, no_attribute, raise_python,
                   type_name)
from .containers import DictValue
from .functions import BoundMethodValue
from .objects import DunderProtocol, instance_has_dict, slot_names


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
        if has_custom_getattribute(self.cls):
            raise Unsupported(f"attribute {name!r} of a {self.cls.__name__} made in the frame "
                              f"(its class defines __getattribute__)")
        if name in self.attrs:
            return self.attrs[name]
        if name == "__class__":
            return tx.wrap(self.cls, None)
        if name == "__dict__" and self.cls.__dictoffset__ != 0:
            return DictValue(self.attrs)
        # the class's MRO as the trace sees it: a class attribute the frame wrote is read back
        owner, raw, changed = traced_class_lookup(tx, self.cls, name)
        if changed:
            guard_class_walk(tx, self.cls, owner, name)
        if isinstance(raw, types.MemberDescriptorType):
            raise no_attribute(self.cls, name)   # an unset slot
        if raw is not None:
            bound = bind_class_attr(tx, owner, raw, self, name)
            if bound is not None:
                return bound
            get = getattr(type(raw), "__get__", None)
            if isinstance(get, types.FunctionType):
                # a descriptor written in Python (torch.distributions' lazy_property):
                # its __get__ runs for this instance, traced like any method
                return tx.wrap(get, None).call(tx, [tx.wrap(raw, None), self, tx.wrap(self.cls, None)], {})
            if changed:
                if get is not None:
                    raise Unsupported(f"{self.describe()}.{name}: a descriptor behind a class attribute the frame "
                                      f"changed")
                return tx.wrap(raw, owner_entry_source(owner, name))
            # guarded through the class: the class attribute changed between calls recompiles
            return tx.wrap(getattr(self.cls, name), class_attr_source(self.cls, name) if get is None else None)
        owner, fallback = lookup_class_attr(self.cls, "__getattr__")
        if fallback is not None:
            # what Python calls when the lookup fails: traced (it may raise AttributeError)
            return bind_class_attr(tx, owner, fallback, self, "__getattr__").call(tx, [const(name)], {})
        raise no_attribute(self.cls, name)

    def setattr(self, tx, name, value):
        if not custom_setattr(tx, self, name, value):
            self.generic_setattr(tx, name, value)

    def generic_setattr(self, tx, name, value):
        tx.state.side_effects.check_local_write(self, f"attribute {name!r} of {self.describe()}")
        if not attribute_store_modelled(tx, self, self.cls, name, value):
            if not instance_has_dict(self.cls) and name not in slot_names(self.cls):
                raise_python(AttributeError, f"'{self.cls.__name__}' object has no attribute '{name}'")
            self.attrs[name] = value

    def delattr(self, tx, name):
        if name not in self.attrs:
            raise no_attribute(self.cls, name)
        tx.state.side_effects.check_local_write(self, f"attribute {name!r} of {self.describe()}")
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
        self.writes: list = []      # (kind "attr"/"item", key, Value) stores after construction

    def python_type(self):
        return self.cls

    def describe(self):
        return f"new {self.cls.__name__}"

    def contents(self):
        return [*self.args, *self.kwargs.values(), *[v for _, _, v in self.writes]]

    def _map(self, tx, real):
        return tx.wrap_traced_object(real)

    def getattr(self, tx, name):
        owner, raw = lookup_class_attr(self.cls, name)
        if isinstance(raw, types.FunctionType):
            return BoundMethodValue(tx.wrap(raw, None), self)
        if isinstance(raw, (types.MethodDescriptorType, types.WrapperDescriptorType)):
            return BoundContainerMethod(self, name)
        try:
            return self._map(tx, getattr(self.instance, name))
        except AttributeError:
            raise no_attribute(self.cls, name)

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

    # Iteration, len() and bool() are asked of the class first, as CPython asks them: a
    # protocol the class writes in Python is traced like any method; one it lacks is the
    # caller's to report (``check_iterable``, ``len``'s own check) or a break, never a
    # real exception escaping from the fake-holding instance.  Only a C protocol of a
    # builtin base (a dict's keys, a list's items) runs on the instance itself.
    def _protocol(self, tx, name: str):
        """(traced bound method or None, whether the class has ``name`` at all)."""
        owner, raw = lookup_class_attr(self.cls, name)
        if isinstance(raw, types.FunctionType):
            return BoundMethodValue(tx.wrap(raw, None), self), True
        return None, raw is not None

    def _on_instance(self, what: str, fn):
        try:
            return fn(self.instance)
        except Exception as e:   # noqa: BLE001 - a C protocol Kiln did not model refused
            raise Unsupported(f"{what} of a {self.cls.__name__} made in the frame raised "
                              f"{type(e).__name__}: {e}") from None

    def unpack(self, tx):
        if isinstance(self.instance, dict):
            return self.call_method(tx, "keys", [], {}).unpack(tx)
        method, present = self._protocol(tx, "__iter__")
        if method is not None:
            return method.call(tx, [], {}).unpack(tx)
        if not present:
            raise Unsupported(f"iterating over a {self.cls.__name__} object made in the frame (its class "
                              f"defines no __iter__; unpacking words the TypeError its own way)")
        return self._map(tx, self._on_instance("iterating", tuple)).unpack(tx)

    def length(self, tx):
        method, present = self._protocol(tx, "__len__")
        if method is not None:
            return checked_len(method.call(tx, [], {}).as_constant())
        if not present:
            raise_python(TypeError, f"object of type '{type_name(self.cls)}' has no len()")
        return self._on_instance("len()", len)

    def truth(self, tx):
        for name in ("__bool__", "__len__"):
            method, present = self._protocol(tx, name)
            if method is not None:
                result = method.call(tx, [], {}).as_constant()
                if name == "__len__":
                    return checked_len(result) != 0
                return checked_bool(result)
            if present:
                return self._on_instance("bool()", bool)
        return True

    def setattr(self, tx, name, value):
        self._write(tx, "attr", const(name), value)

    def setitem(self, tx, key, value):
        self._write(tx, "item", key, value)

    def _write(self, tx, kind: str, key: Value, value: Value):
        """A field / item store: run on the fake-holding instance (its class's own
        ``__setattr__`` / ``__setitem__`` keep a ModelOutput's keys and attributes in step,
        a frozen dataclass raises), and replayed in order by the glue after it rebuilds
        the object."""
        tx.state.side_effects.check_local_write(self, f"{kind} {key.describe()} of {self.describe()}")
        k = key.as_constant()
        real = tx.lower_to_real(value)
        try:
            if kind == "attr":
                setattr(self.instance, k, real)
            else:
                self.instance[k] = real
        except Exception as e:
            raise_python(type(e), *e.args)
        self.writes.append((kind, k, value))

    def reconstruct(self, cg):
        return cg.replayed_object(self)


def is_replayable_class(cls) -> bool:
    """Classes whose constructor only stores its arguments (dataclasses, namedtuples)."""
    return dataclasses.is_dataclass(cls) and not issubclass(cls, torch.nn.Module)
