"""with-blocks, exceptions and raise.

A traced ``raise`` becomes a TracedException that the tracer routes through the
code object's exception table (see interpreter.Tracer.step), so try/except/finally
and with-blocks behave as in CPython.
"""
from __future__ import annotations

from ....exc import Unsupported
from ...values import ClassValue, const, ExceptionValue, real_classes, WithExit, wrap


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
    if ins.arg == 0:
        if not tx.exc_stack:
            raise Unsupported("bare raise with no active exception")
        raise tx.exc_stack[-1].raised()
    if ins.arg == 2:
        tx.pop()  # the cause: not modelled
    exc = tx.pop()
    raise to_exception(tx, exc).raised()


def to_exception(tx, v):
    if isinstance(v, ExceptionValue):
        return v
    if isinstance(v, ClassValue) and issubclass(v.obj, BaseException):
        return ExceptionValue(v.obj, [])
    raise Unsupported(f"raising {v.describe()}")


def push_exc_info(tx, ins):
    exc = tx.pop()
    tx.push(tx.exc_stack[-1] if tx.exc_stack else const(None))
    tx.exc_stack.append(exc)
    tx.push(exc)


def pop_except(tx, ins):
    tx.pop()
    if tx.exc_stack:
        tx.exc_stack.pop()


def check_exc_match(tx, ins):
    match = tx.pop()
    exc = tx.stack[-1]
    classes = real_classes(tx, match)
    tx.push(const(isinstance(exc, ExceptionValue) and issubclass(exc.cls, classes)))


def reraise(tx, ins):
    exc = tx.pop()
    if ins.arg:
        tx.pop()  # lasti
    raise to_exception(tx, exc).raised()


def with_except_start(tx, ins):
    exc = tx.stack[-1]
    exit_fn = tx.stack[-4]
    result = exit_fn.call(tx, [wrap(tx, exc.cls, None), exc, const(None)], {})   # the class, as Python passes it
    tx.push(result)


TABLE = {
    "BEFORE_WITH": before_with,
    "RAISE_VARARGS": raise_varargs,
    "PUSH_EXC_INFO": push_exc_info,
    "CHECK_EXC_MATCH": check_exc_match,
    "POP_EXCEPT": pop_except,
    "RERAISE": reraise,
    "WITH_EXCEPT_START": with_except_start,
}
