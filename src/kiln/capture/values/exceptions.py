"""Exception objects in traced code.

Kiln follows the exception table of 3.11 code objects: when traced code raises
(``raise``, a failed ``next()``, an out-of-range index), the raise is a
``TracedException`` (``base.py``); the tracer unwinds to the handler the table names,
in this frame or a caller's, and the handler sees the ExceptionValue made here.  An
exception that escapes the root frame makes the capture unsupported, and eager raises
it for real.
"""
from __future__ import annotations

from ...exc import Unsupported
from ...runtime import rebuild_exception
from .base import TracedException, Value, const
from .containers import TupleValue


class ExceptionValue(Value):
    def __init__(self, cls: type, args: list):
        self.cls = cls
        self.args = list(args)
        self.attrs: dict = {}

    @classmethod
    def caught(cls, exc: TracedException) -> "ExceptionValue":
        """The value a handler sees for ``exc``: one object however often it is caught."""
        if exc.value is None:
            exc.value = cls(exc.cls, exc.arg_values)
        return exc.value

    def raised(self) -> TracedException:
        """This exception, raised by the traced code."""
        return TracedException(self.cls, self.args, self)

    def python_type(self):
        return self.cls

    def describe(self):
        msg = ", ".join(a.short_repr() for a in self.args)
        return f"{self.cls.__name__}({msg})"

    def getattr(self, tx, name):
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
        return cg.new_object(self, f"{cg.ref(rebuild_exception)}({cg.ref(self.cls)}, ({args}), {{{attrs}}})")


