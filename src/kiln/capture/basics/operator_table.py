"""Python's operators as one table: symbol -> ``operator`` function, and their dunders.

Everything that names an operator asks here: the bytecode handlers (``BINARY_OP``'s
symbol, ``COMPARE_OP``'s), ``operators.py`` (Python's dispatch rules over values) and the
builtins table (``operator.add`` called as a function).  One table, so that an operator
added for one of them cannot be missing from another (the copy the builtins table once
kept lacked ``ilshift``/``irshift``).
"""
from __future__ import annotations

import operator

BINARY_OPS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow, "@": operator.matmul, "<<": operator.lshift, ">>": operator.rshift,
    "&": operator.and_, "|": operator.or_, "^": operator.xor,
}
INPLACE_OPS = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "<<=": operator.ilshift, ">>=": operator.irshift, "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor,
}
INPLACE_TO_BINARY = {v: BINARY_OPS[k[:-1]] for k, v in INPLACE_OPS.items()}
COMPARE_OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
               ">=": operator.ge}
UNARY_OPS = (operator.neg, operator.pos, operator.invert, operator.inv, operator.abs)

# every operator function above, in one list (what the builtins table registers)
ALL_OPERATOR_FUNCTIONS = (*BINARY_OPS.values(), *COMPARE_OPS.values(), *INPLACE_OPS.values(), *UNARY_OPS)

REFLECTED = {operator.add: "__radd__", operator.mul: "__rmul__", operator.sub: "__rsub__",
             operator.truediv: "__rtruediv__", operator.matmul: "__rmatmul__", operator.floordiv: "__rfloordiv__",
             operator.mod: "__rmod__", operator.pow: "__rpow__", operator.and_: "__rand__", operator.or_: "__ror__",
             # an ordering's reflection is its mirror (a < b tries b.__gt__(a))
             operator.lt: "__gt__", operator.gt: "__lt__", operator.le: "__ge__", operator.ge: "__le__"}
DUNDER = {operator.add: "__add__", operator.sub: "__sub__", operator.mul: "__mul__", operator.truediv: "__truediv__",
          operator.matmul: "__matmul__", operator.eq: "__eq__", operator.ne: "__ne__", operator.lt: "__lt__",
          operator.le: "__le__", operator.gt: "__gt__", operator.ge: "__ge__", operator.getitem: "__getitem__",
          operator.floordiv: "__floordiv__", operator.mod: "__mod__", operator.pow: "__pow__",
          operator.and_: "__and__", operator.or_: "__or__", operator.neg: "__neg__"}
