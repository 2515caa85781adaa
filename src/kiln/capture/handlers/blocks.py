"""with-blocks, exceptions and raise.

Kiln traces the normal path only: handlers reached through the exception table
never run while tracing, because nothing raises in a successful trace.  A traced
``raise`` is unsupported (eager then raises it for real).
"""
from __future__ import annotations

from ...exc import Unsupported
from ..values.base import Value, const


class WithExit(Value):
    """The ``__exit__`` that BEFORE_WITH leaves on the stack for a modelled context."""

    def __init__(self, ctx):
        self.ctx = ctx

    def describe(self):
        return f"exit of {self.ctx.describe()}"

    def call(self, tx, args, kwargs):
        if tx.context_stack and tx.context_stack[-1] is self.ctx:
            tx.context_stack.pop()
        return self.ctx.exit(tx)


def before_with(tx, ins):
    ctx = tx.pop()
    if hasattr(ctx, "enter") and hasattr(ctx, "exit"):
        tx.push(WithExit(ctx))
        tx.context_stack.append(ctx)
        tx.push(ctx.enter(tx))
        return
    # a user-defined context manager: run its __enter__/__exit__ as Python code
    exit_fn = ctx.getattr(tx, "__exit__")
    enter_fn = ctx.getattr(tx, "__enter__")
    tx.push(exit_fn)
    tx.push(enter_fn.call(tx, [], {}))


def raise_varargs(tx, ins):
    what = tx.stack[-ins.arg].describe() if ins.arg else "the active exception"
    raise Unsupported(f"raise of {what} (Kiln traces only the path without exceptions)")


def exception_path(tx, ins):
    raise Unsupported(f"exception handling ({ins.opname}) was reached while tracing")


def unsupported_op(tx, ins):
    raise Unsupported(f"bytecode {ins.opname} is not supported")


TABLE = {
    "BEFORE_WITH": before_with,
    "RAISE_VARARGS": raise_varargs,
    "RERAISE": exception_path,
    "PUSH_EXC_INFO": exception_path,
    "POP_EXCEPT": exception_path,
    "WITH_EXCEPT_START": exception_path,
    "CHECK_EXC_MATCH": exception_path,
    "CHECK_EG_MATCH": exception_path,
    "PREP_RERAISE_STAR": exception_path,
    "SETUP_ANNOTATIONS": unsupported_op,
    "GET_AWAITABLE": unsupported_op,
    "BEFORE_ASYNC_WITH": unsupported_op,
    "MATCH_CLASS": unsupported_op,
    "MATCH_MAPPING": unsupported_op,
    "MATCH_SEQUENCE": unsupported_op,
    "MATCH_KEYS": unsupported_op,
    "PRINT_EXPR": unsupported_op,
}
_ = const
