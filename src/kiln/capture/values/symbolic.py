"""Symbolic Python numbers: sizes that vary between calls (``x.shape[0]``, ``n * 3``,
a Python int input made dynamic) and the ``torch.Size`` that holds them.

A SymNodeValue is to a Python int what a TensorValue is to a tensor: the fx node that
computes it in the graph, plus the ``SymInt``/``SymBool``/``SymFloat`` it is on fake
tensors.  Arithmetic on it is recorded in the graph (``operators.py``); deciding
anything about it in Python (``bool(n > 4)``, ``int(n)``, using it as a constant) asks
the ShapeEnv, which records the guard that keeps the decision valid.  So code that only
computes with sizes stays general, and code that branches on them specialises exactly
as far as it must.
"""
from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from ...exc import Unsupported
from .base import ConstantValue, Value, const
from .containers import TupleValue

_PYTHON_TYPE = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}
_SPECIALISE = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


class SymNodeValue(Value):
    def __init__(self, node, sym):
        self.node = node
        self.fake = sym   # the symbolic value (named like TensorValue's, for the glue)

    def python_type(self):
        return _PYTHON_TYPE[type(self.fake)]

    def describe(self):
        return f"{self.python_type().__name__}({self.fake})"

    def as_constant(self):
        """Using the number as a Python constant specialises it (the ShapeEnv guards it).
        A number read from tensor data (an unbacked symbol) has no value to guard: Python
        that needs it runs at a graph break, which the graph hands the real number."""
        try:
            return _SPECIALISE[type(self.fake)](self.fake)
        except GuardOnDataDependentSymNode as e:
            raise Unsupported(needs_data_reason(self, e)) from e

    def truth(self, tx):
        try:
            return bool(self.fake)
        except GuardOnDataDependentSymNode as e:
            if not tx.state.builder.settle(e):   # read from constant data: its value is known
                raise Unsupported(needs_data_reason(self, e, "branching on")) from e
        return bool(self.fake)

    def length(self, tx):
        raise Unsupported(f"len() of {self.describe()}")

    def getattr(self, tx, name):
        return const(self.as_constant()).getattr(tx, name)

    def reconstruct(self, cg):
        return cg.tensor_expr(self)


def needs_data_reason(v: Value, error, what: str = "using as a Python constant") -> str:
    """The message of a graph break where Python needs a number read from tensor data."""
    cond = getattr(error, "cond", None)
    about = f" (`{cond}`)" if cond is not None and str(cond) != str(v.fake) else ""
    return f"{what} {v.describe()}{about}, a number computed from tensor data: its value is known only at run time"


class SizeValue(TupleValue):
    """A ``torch.Size`` some of whose dimensions are symbolic (items: constants and
    SymNodeValues)."""

    def python_type(self):
        return torch.Size

    def as_constant(self):
        return torch.Size(i.as_constant() for i in self.items)

    def python_value(self, tx=None):
        return self.as_constant()

    slice_keeps_type = True

    def like(self, items) -> Value:
        """``torch.Size`` keeps its type through ``+`` and slicing (a tuple of numbers)."""
        if all(isinstance(i, SymNodeValue) or (isinstance(i, ConstantValue) and type(i.peek()) is int)
               for i in items):
            return size_value(items)
        return TupleValue(items)

    def reconstruct(self, cg):
        return f"{cg.ref(torch.Size)}({super().reconstruct(cg)})"


def size_value(items: list) -> Value:
    """A torch.Size as a Value: a plain constant when every dimension is static."""
    if all(isinstance(i, ConstantValue) for i in items):
        return const(torch.Size(i.value for i in items))
    return SizeValue(items)
