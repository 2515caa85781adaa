"""Calls, function creation, returns and yields.

Where the NULL slot of a call sits and how keywords are named differ by version
(``opcodes.Layout``: 3.11 PRECALL + KW_NAMES + CALL, 3.12 KW_NAMES + CALL, 3.13 CALL
or CALL_KW over ``callable, self_or_null, args``); the handlers ask the layout.
"""
from __future__ import annotations

from ....exc import Unsupported
from ...basics import LAYOUT
from ...values import const, ConstantValue, DictValue, IteratorValue, NullValue, TupleValue
from ...values import NestedFunctionValue


def kw_names(tx, ins):
    tx.kw_names = tx.code.co_consts[ins.arg]


def _is_null(v) -> bool:
    return isinstance(v, NullValue)


def _call_with(tx, n: int, names: tuple):
    args = tx.popn(n)
    upper = tx.pop()
    lower = tx.pop()
    fn, bound_self = LAYOUT.split_call(lower, upper, _is_null)
    args = bound_self + args
    npos = len(args) - len(names)
    kwargs = dict(zip(names, args[npos:]))
    tx.push(fn.call(tx, args[:npos], kwargs))


def call(tx, ins):
    names = tx.kw_names
    tx.kw_names = ()
    _call_with(tx, ins.arg, names)


def call_kw(tx, ins):
    """3.13: the keyword names are a constant tuple on top of the arguments."""
    names = tx.pop().as_constant()
    _call_with(tx, ins.arg, tuple(names))


def call_function_ex(tx, ins):
    kwargs = tx.pop() if ins.arg & 1 else DictValue({})
    args = tx.pop()
    upper = tx.pop()
    lower = tx.pop()
    fn, bound_self = LAYOUT.split_call(lower, upper, _is_null)
    if bound_self:
        raise Unsupported("unexpected stack layout for CALL_FUNCTION_EX")
    if not isinstance(kwargs, DictValue):
        keys = kwargs.call_method(tx, "keys", [], {}).unpack(tx)
        kwargs = DictValue({k.as_constant(): kwargs.getitem(tx, k) for k in keys})
    if any(not isinstance(k, str) for k in kwargs.items):
        raise Unsupported("keywords must be strings")
    tx.push(fn.call(tx, args.unpack(tx), dict(kwargs.items)))


def make_function(tx, ins):
    """A function object; in 3.13 its defaults, closure... follow as SET_FUNCTION_ATTRIBUTE."""
    code = tx.pop().as_constant()
    if not LAYOUT.make_function_flags:
        tx.push(NestedFunctionValue(code, tx.f_globals, code.co_qualname, [], {}, []))
        return
    flags = ins.arg
    closure = tx.pop().items if flags & 0x08 else []
    annotations = tx.pop() if flags & 0x04 else None   # read only by ``fn.__annotations__``
    kwdefaults = tx.pop().items if flags & 0x02 else {}
    defaults = tx.pop().unpack(tx) if flags & 0x01 else []   # a constant tuple when all are constants
    fn = NestedFunctionValue(code, tx.f_globals, code.co_qualname, defaults, kwdefaults, closure)
    fn.annotations = annotations
    tx.push(fn)


def set_function_attribute(tx, ins):
    """3.13: one of MAKE_FUNCTION's former flags (0x01 defaults, 0x02 keyword defaults,
    0x04 annotations, 0x08 closure) set on the function below it."""
    fn = tx.pop()
    value = tx.pop()
    if ins.arg == 0x08:
        fn.closure = value.items
    elif ins.arg == 0x02:
        fn.kwdefaults = value.items
    elif ins.arg == 0x01:
        fn.defaults = value.unpack(tx)
    elif ins.arg == 0x04:
        fn.annotations = value
    else:
        raise Unsupported(f"SET_FUNCTION_ATTRIBUTE {ins.arg}")
    tx.push(fn)


def return_value(tx, ins):
    tx.return_value = tx.pop()
    tx.done = True


def return_const(tx, ins):
    tx.return_value = const(ins.argval)
    tx.done = True


def return_generator(tx, ins):
    tx.push(const(None))


def yield_value(tx, ins):
    if tx.yields is None:
        raise Unsupported("yield outside a generator")
    tx.yields.append(tx.pop())
    tx.push(const(None))


def get_yield_from_iter(tx, ins):
    v = tx.pop()
    tx.push(v if isinstance(v, IteratorValue) else IteratorValue(v.unpack(tx)))


def send(tx, ins):
    """``yield from``: pass on the sub-iterator's next item, or jump with its return value.

    Generators are traced to completion when called, so the value sent in is always
    the None of a plain ``next()``.
    """
    sent = tx.pop()
    if not (isinstance(sent, ConstantValue) and sent.value is None):
        raise Unsupported("generator.send() with a value")
    it = tx.stack[-1]
    if not isinstance(it, IteratorValue):
        raise Unsupported(f"yield from {it.describe()}")
    item = it.next(tx)
    if item is None:
        if not LAYOUT.send_keeps_receiver:   # 3.12+ leaves it for END_SEND
            tx.pop()
        tx.push(getattr(it, "return_value", None) or const(None))
        tx.jump(ins)
    else:
        tx.push(item)


def load_build_class(tx, ins):
    raise Unsupported("defining a class inside a compiled region")


TABLE = {
    "KW_NAMES": kw_names,
    "CALL": call,
    "CALL_KW": call_kw,
    "CALL_FUNCTION_EX": call_function_ex,
    "MAKE_FUNCTION": make_function,
    "SET_FUNCTION_ATTRIBUTE": set_function_attribute,
    "RETURN_VALUE": return_value,
    "RETURN_CONST": return_const,
    "RETURN_GENERATOR": return_generator,
    "YIELD_VALUE": yield_value,
    "GET_YIELD_FROM_ITER": get_yield_from_iter,
    "SEND": send,
    "LOAD_BUILD_CLASS": load_build_class,
}
_ = TupleValue
