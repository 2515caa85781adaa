"""What Python answers about an object (``isinstance``, ``issubclass``, ``hasattr``,
``getattr``, ``setattr``, ``delattr``, ``type``, ``callable``, ``id``), evaluated on Values.

The rule these follow ("Ask Python, don't re-implement it" in docs/architecture.md):
where Kiln has the real object or its type, Python answers, on that object or type;
a value read from outside is guarded by type, so what the type says holds while the
entry does.  The handlers join the BUILTINS table of ``builtins.py``.
"""
from __future__ import annotations

import abc
import builtins as _b

import torch

from ...exc import Unsupported
from .base import (AttributeMissing, ConstantValue, TracedException, Value, const, instances_callable, raise_python,
                   type_lookup)
from .containers import TupleValue
from .tensor import TensorValue


def _isinstance(tx, args, kwargs):
    """Asked of Python: of the real object when Kiln has it, else of the value's type
    (guarded), as long as each class answers from the type alone."""
    obj, cls = args
    classes = cls.as_constant() if cls.is_constant() else real_classes(tx, cls)
    real = getattr(obj, "real_object", None)
    if not isinstance(obj, ConstantValue):
        # a real object is guarded by its type (or identity), not by what such a check reads
        for c in (classes if isinstance(classes, tuple) else (classes,)):
            check = type_lookup(type(c), "__instancecheck__")[1] if isinstance(c, type) else None
            if check is not None and check not in _TYPE_ONLY_CHECKS:
                raise Unsupported(f"isinstance() with {c!r}, whose metaclass decides by the object")
    if isinstance(obj, ConstantValue) or real is not None:
        try:
            return const(isinstance(obj.value if isinstance(obj, ConstantValue) else real(), classes))
        except Exception as e:   # noqa: BLE001 - a bad second argument raises as in Python
            raise_python(type(e), *e.args)
    t = obj.python_type()
    if isinstance(obj, TensorValue):
        t = getattr(obj, "cls", torch.Tensor)
    if not isinstance(classes, tuple):
        classes = (classes,)
    try:
        return const(any(_subclass(t, c) for c in classes))
    except TypeError as e:
        raise_python(TypeError, *e.args)


# ``__instancecheck__`` methods that decide from the object's type alone
# (a Parameter's and a Buffer's also accept tensors flagged ``_is_param`` / ``_is_buffer``,
# which only their construction sets: those are Parameters and Buffers by type)
_TYPE_ONLY_CHECKS = tuple(
    meta.__dict__["__instancecheck__"] for meta in
    (type, abc.ABCMeta, getattr(torch.nn.parameter, "_ParameterMeta", type), getattr(torch.nn.parameter, "_BufferMeta", type)))


def _subclass(t, c) -> bool:
    if c is torch.Tensor and issubclass(t, torch.Tensor):
        return True
    return issubclass(t, c)


def real_classes(tx, cls: Value):
    if isinstance(cls, TupleValue):
        return tuple(real_classes(tx, c) for c in cls.items)
    real = getattr(cls, "real_object", None)
    if real is None:
        raise Unsupported("isinstance() with a class Kiln cannot identify")
    return real()


def _issubclass(tx, args, kwargs):
    a = real_classes(tx, args[0])
    b = args[1].as_constant() if args[1].is_constant() else real_classes(tx, args[1])
    return const(issubclass(a, b))


def _hasattr(tx, args, kwargs):
    """``getattr`` without the result: False exactly when the lookup raises AttributeError
    (Kiln's own AttributeMissing, or an AttributeError the traced code raised)."""
    try:
        args[0].getattr(tx, args[1].as_constant())
        return const(True)
    except AttributeMissing:
        return const(False)
    except TracedException as e:
        if issubclass(e.cls, AttributeError):
            return const(False)
        raise


def _getattr(tx, args, kwargs):
    name = args[1].as_constant()
    if len(args) == 3:
        try:
            return args[0].getattr(tx, name)
        except AttributeMissing:
            return args[2]
        except TracedException as e:
            if issubclass(e.cls, AttributeError):
                return args[2]
            raise
    return args[0].getattr(tx, name)


def _setattr(tx, args, kwargs):
    args[0].setattr(tx, args[1].as_constant(), args[2])
    return const(None)


def _delattr(tx, args, kwargs):
    args[0].delattr(tx, args[1].as_constant())
    return const(None)


def _type(tx, args, kwargs):
    if len(args) != 1:
        raise Unsupported("type() with three arguments")
    v = args[0]
    t = getattr(v, "cls", None) if isinstance(v, TensorValue) else v.python_type()
    return tx.wrap(t or torch.Tensor, None)


def _callable(tx, args, kwargs):
    """Asked of Python: of the real object when Kiln has it, else of the value's type
    (``callable`` reads only the type's call slot, and the type is guarded)."""
    v = args[0]
    if isinstance(v, ConstantValue):
        return const(callable(v.value))
    real = getattr(v, "real_object", None)
    if real is not None:
        return const(callable(real()))
    return const(instances_callable(v.python_type()))


def _id(tx, args, kwargs):
    real = getattr(args[0], "real_object", None)
    if real is not None:
        return const(id(real()))
    raise Unsupported("id() of a value made while tracing")


INTROSPECTION = {
    _b.isinstance: _isinstance, _b.issubclass: _issubclass, _b.hasattr: _hasattr, _b.getattr: _getattr,
    _b.setattr: _setattr, _b.delattr: _delattr, _b.type: _type, _b.callable: _callable, _b.id: _id,
}
