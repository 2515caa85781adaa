"""Exceptions raised by traced code.

Kiln follows the exception table of 3.11 code objects: when traced code raises
(``raise``, a failed ``next()``, an out-of-range index), the raise is a
``TracedException`` carrying an ExceptionValue; the tracer unwinds to the handler
the table names, in this frame or a caller's.  An exception that escapes the root
frame makes the capture unsupported, and eager raises it for real.
"""
from __future__ import annotations

from ...exc import Unsupported
from .base import ConstantValue, Value, const


class ExceptionValue(Value):
    def __init__(self, cls: type, args: list):
        self.cls = cls
        self.args = list(args)
        self.attrs: dict = {}

    def python_type(self):
        return self.cls

    def describe(self):
        msg = ", ".join(repr(a.value) if isinstance(a, ConstantValue) else a.describe() for a in self.args)
        return f"{self.cls.__name__}({msg})"

    def getattr(self, tx, name):
        from .containers import TupleValue
        if name == "args":
            return TupleValue(self.args)
        if name in self.attrs:
            return self.attrs[name]
        if name in ("__traceback__", "__cause__", "__context__"):
            return const(None)
        raise Unsupported(f"attribute {name!r} of a traced exception")

    def setattr(self, tx, name, value):
        self.attrs[name] = value

    def contents(self):
        return [*self.args, *self.attrs.values()]

    def reconstruct(self, cg):
        # a break inside an except block: the handler's exception, made again (one object
        # for every place that holds it)
        args = "".join(f"{cg.expr(a)}, " for a in self.args)
        attrs = ", ".join(f"{k!r}: {cg.expr(v)}" for k, v in self.attrs.items())
        return cg.new_object(self, f"{cg.ref(_rebuild)}({cg.ref(self.cls)}, ({args}), {{{attrs}}})")

    def to_real(self):
        try:
            return self.cls(*[a.as_constant() for a in self.args])
        except Exception:
            return self.cls()


def _rebuild(cls, args, attrs):
    exc = cls(*args)
    for k, v in attrs.items():
        setattr(exc, k, v)
    return exc


class TracedException(Exception):
    """Python-level control transfer for an exception raised inside traced code."""

    def __init__(self, value: ExceptionValue):
        super().__init__(value.describe())
        self.value = value


def raise_python(cls: type, *messages) -> None:
    """Raise ``cls(*messages)`` as if the traced code had raised it."""
    raise TracedException(ExceptionValue(cls, [const(m) for m in messages]))
