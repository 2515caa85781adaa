"""Attribute stores as Python performs them: a class's own ``__setattr__`` (traced),
data descriptors (property setters traced, slots stored, others refused), else the
instance dict.  Used by ObjectValue and NewObjectValue (objects.py)."""
from __future__ import annotations

import types

from ...exc import Unsupported
from .base import const
from .objects import bind_class_attr, lookup_class_attr


# C __setattr__ slots that store like object's (classes and Python modules: a plain dict store)
_GENERIC_SETATTRS = (object.__dict__["__setattr__"], type.__dict__["__setattr__"],
                     types.ModuleType.__dict__["__setattr__"])


def custom_setattr(tx, self_value, name, value) -> bool:
    """Run the class's own ``__setattr__`` (traced) if it has one; False if it has none.

    A ``__setattr__`` written in C other than ``object``'s (an extension type) is a store
    Kiln cannot model: refused, so it becomes a graph break instead of being lost."""
    owner, raw = lookup_class_attr(self_value.python_type(), "__setattr__")
    if raw is None or raw in _GENERIC_SETATTRS:
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
        from .builder import wrap
        wrap(tx, raw.fset, None).call(tx, [self_value, value], {})
        return True
    raise Unsupported(f"setting {name!r} of a {cls.__name__} object through a {type(raw).__name__}")
