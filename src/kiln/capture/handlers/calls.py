"""Calls (3.11's PRECALL/CALL convention with its NULL slot), function creation,
returns and yields."""
from __future__ import annotations

from ...exc import Unsupported
from ..values.base import ConstantValue, NullValue, const
from ..values.containers import DictValue, TupleValue
from ..values.iterators import IteratorValue
from ..values.functions import NestedFunctionValue


def kw_names(tx, ins):
    tx.kw_names = tx.code.co_consts[ins.arg]


def call(tx, ins):
    n = ins.arg
    names = tx.kw_names
    tx.kw_names = ()
    args = tx.popn(n)
    top = tx.pop()
    below = tx.pop()
    if isinstance(below, NullValue):
        fn = top
    else:
        fn, args = below, [top, *args]
    npos = len(args) - len(names)
    kwargs = dict(zip(names, args[npos:]))
    tx.push(fn.call(tx, args[:npos], kwargs))


def call_function_ex(tx, ins):
    kwargs = tx.pop() if ins.arg & 1 else DictValue({})
    args = tx.pop()
    fn = tx.pop()
    null = tx.pop()
    if not isinstance(null, NullValue):
        raise Unsupported("unexpected stack layout for CALL_FUNCTION_EX")
    if not isinstance(kwargs, DictValue):
        keys = kwargs.call_method(tx, "keys", [], {}).unpack(tx)
        kwargs = DictValue({k.as_constant(): kwargs.getitem(tx, k) for k in keys})
    if any(not isinstance(k, str) for k in kwargs.items):
        raise Unsupported("keywords must be strings")
    tx.push(fn.call(tx, args.unpack(tx), dict(kwargs.items)))


def make_function(tx, ins):
    code = tx.pop().as_constant()
    flags = ins.arg
    closure = tx.pop().items if flags & 0x08 else []
    if flags & 0x04:
        tx.pop()  # annotations: not needed for tracing
    kwdefaults = tx.pop().items if flags & 0x02 else {}
    defaults = tx.pop().unpack(tx) if flags & 0x01 else []   # a constant tuple when all are constants
    tx.push(NestedFunctionValue(code, tx.f_globals, code.co_qualname, defaults, kwdefaults, closure))


def return_value(tx, ins):
    tx.return_value = tx.pop()
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
    "CALL_FUNCTION_EX": call_function_ex,
    "MAKE_FUNCTION": make_function,
    "RETURN_VALUE": return_value,
    "RETURN_GENERATOR": return_generator,
    "YIELD_VALUE": yield_value,
    "GET_YIELD_FROM_ITER": get_yield_from_iter,
    "SEND": send,
    "LOAD_BUILD_CLASS": load_build_class,
}
_ = TupleValue
