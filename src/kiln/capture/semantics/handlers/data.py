"""Operators, container building, unpacking and string formatting."""
from __future__ import annotations

import operator

from ....exc import Unsupported
from ...basics import BINARY_OP_SYMBOLS, INTRINSIC_1, INTRINSIC_2, LAYOUT
from ...basics import BINARY_OPS, COMPARE_OPS, INPLACE_OPS
from ..operators import binary, compare, contains, identical, inplace, unary
from ...values import ConstantValue, const
from ...values import DictValue, ListValue, SetValue, SliceValue, TupleValue, key_of, set_items
from ...values import ExceptionValue


def binary_op(tx, ins):
    b = tx.pop()
    a = tx.pop()
    symbol = BINARY_OP_SYMBOLS[ins.arg]
    if symbol in INPLACE_OPS:
        tx.push(inplace(tx, INPLACE_OPS[symbol], a, b))
    else:
        tx.push(binary(tx, BINARY_OPS[symbol], a, b))


def compare_op(tx, ins):
    b = tx.pop()
    a = tx.pop()
    # 3.13's bit 16 (convert the result to bool) needs nothing: branches ask for truth
    tx.push(compare(tx, COMPARE_OPS[LAYOUT.compare_op(ins.arg)], a, b))


def is_op(tx, ins):
    b = tx.pop()
    a = tx.pop()
    tx.push(const(identical(tx, a, b) != bool(ins.arg)))


def contains_op(tx, ins):
    container = tx.pop()
    item = tx.pop()
    tx.push(const(contains(tx, container, item) != bool(ins.arg)))


def _unary(fn):
    def handler(tx, ins):
        tx.push(unary(tx, fn, tx.pop()))
    return handler


def unary_not(tx, ins):
    tx.push(const(not tx.pop().truth(tx)))


def build_tuple(tx, ins):
    tx.push(TupleValue(tx.popn(ins.arg)))


def build_list(tx, ins):
    v = ListValue(tx.popn(ins.arg))
    tx.push(v)


def build_set(tx, ins):
    items = tx.popn(ins.arg)
    tx.push(SetValue(set_items(tx, items)))


def build_map(tx, ins):
    flat = tx.popn(2 * ins.arg)
    d = DictValue({})
    for k, v in zip(flat[::2], flat[1::2]):
        _put(tx, d, k, v)
    tx.push(d)


def _put(tx, d: DictValue, k, v):
    key = key_of(k, tx)
    if key not in d.items and not isinstance(k, ConstantValue):
        d.key_values[key] = k         # of equal keys the first stays, as in Python
    d.items[key] = v


def build_const_key_map(tx, ins):
    keys = tx.pop().as_constant()
    values = tx.popn(ins.arg)
    tx.push(DictValue(dict(zip(keys, values))))


def build_string(tx, ins):
    parts = tx.popn(ins.arg)
    tx.push(const("".join(p.as_constant() for p in parts)))


def build_slice(tx, ins):
    parts = tx.popn(ins.arg)
    if len(parts) == 2:
        parts.append(const(None))
    s = SliceValue(*parts)
    tx.push(const(s.as_constant()) if s.is_constant() else s)


def _building(tx, ins):
    """The container a comprehension builds.  In 3.12+ (PEP 709) a continuation after a
    break inside a comprehension receives it as an input: then its growth is a write."""
    target = tx.stack[-ins.arg]
    if target.source is not None:
        tx.state.side_effects.mutated(target)
    return target


def list_append(tx, ins):
    v = tx.pop()
    _building(tx, ins).items.append(v)


def set_add(tx, ins):
    v = tx.pop()
    _building(tx, ins).insert(tx, v)


def map_add(tx, ins):
    v = tx.pop()
    k = tx.pop()
    _put(tx, _building(tx, ins), k, v)


def list_extend(tx, ins):
    seq = tx.pop()
    tx.stack[-ins.arg].items.extend(seq.unpack(tx))


def set_update(tx, ins):
    seq = tx.pop()
    tx.stack[-ins.arg].update_from(tx, seq)   # a constant frozenset merged as Python merges it


def dict_update(tx, ins):
    other = tx.pop()
    target = tx.stack[-ins.arg]
    if isinstance(other, DictValue):
        target.items.update(other.items)
        target.key_values.update(other.key_values)
        return
    keys = other.call_method(tx, "keys", [], {}).unpack(tx)
    for k in keys:
        _put(tx, target, k, other.getitem(tx, k))


def list_to_tuple(tx, ins):
    tx.push(TupleValue(tx.pop().unpack(tx)))


def unpack_sequence(tx, ins):
    items = tx.pop().unpack(tx)
    if len(items) != ins.arg:
        raise Unsupported(f"cannot unpack {len(items)} values into {ins.arg} names (ValueError)")
    for v in reversed(items):
        tx.push(v)


def unpack_ex(tx, ins):
    before, after = ins.arg & 0xFF, ins.arg >> 8
    items = tx.pop().unpack(tx)
    if len(items) < before + after:
        raise Unsupported("not enough values to unpack (ValueError)")
    middle = ListValue(items[before:len(items) - after])
    out = items[:before] + [middle] + items[len(items) - after:]
    for v in reversed(out):
        tx.push(v)


_CONVERSIONS = {0: None, 1: str, 2: repr, 3: ascii}   # f"{x!s}", f"{x!r}", f"{x!a}"


def _constant(v, what: str):
    if not v.is_constant():
        raise Unsupported(f"{what} {v.describe()} into a string")
    return v.as_constant()


def _formatted(v, conversion: int, spec: str):
    value = _constant(v, "formatting")
    fn = _CONVERSIONS[conversion]
    return const(format(value if fn is None else fn(value), spec))


def format_value(tx, ins):
    """3.11/3.12: conversion and spec in one instruction."""
    spec = tx.pop().as_constant() if ins.arg & 0x04 else ""
    v = tx.pop()
    tx.push(_formatted(v, ins.arg & 0x03, spec))


def convert_value(tx, ins):
    """3.13: ``!s``/``!r``/``!a`` on their own (a later FORMAT_* formats the string)."""
    tx.push(const(_CONVERSIONS[ins.arg](_constant(tx.pop(), "converting"))))


def format_simple(tx, ins):
    tx.push(_formatted(tx.pop(), 0, ""))


def format_with_spec(tx, ins):
    spec = tx.pop().as_constant()
    tx.push(_formatted(tx.pop(), 0, spec))


def _stopiteration_error(tx, v):
    """A generator's StopIteration leaving its frame becomes RuntimeError (PEP 479)."""
    if isinstance(v, ExceptionValue) and issubclass(v.cls, StopIteration):
        return ExceptionValue(RuntimeError, [const("generator raised StopIteration")])
    return v


_INTRINSIC_1_HANDLERS = {
    "stopiteration_error": _stopiteration_error,
    "unary_positive": lambda tx, v: unary(tx, operator.pos, v),
    "list_to_tuple": lambda tx, v: TupleValue(v.unpack(tx)),
}


def call_intrinsic_1(tx, ins):
    """3.12+: what 3.11 had as UNARY_POSITIVE, LIST_TO_TUPLE and more; the version
    table names each intrinsic (``opcodes.INTRINSIC_1``)."""
    what = INTRINSIC_1.get(ins.arg, f"intrinsic {ins.arg}")
    handler = _INTRINSIC_1_HANDLERS.get(what)
    if handler is None:
        raise Unsupported(f"CALL_INTRINSIC_1 {ins.arg}: {what}")
    tx.push(handler(tx, tx.pop()))


def call_intrinsic_2(tx, ins):
    raise Unsupported(f"CALL_INTRINSIC_2 {ins.arg}: {INTRINSIC_2.get(ins.arg, 'unknown intrinsic')}")


def get_len(tx, ins):
    tx.push(const(tx.stack[-1].length(tx)))


TABLE = {
    "BINARY_OP": binary_op,
    "COMPARE_OP": compare_op,
    "IS_OP": is_op,
    "CONTAINS_OP": contains_op,
    "UNARY_NEGATIVE": _unary(operator.neg),
    "UNARY_POSITIVE": _unary(operator.pos),
    "UNARY_INVERT": _unary(operator.invert),
    "UNARY_NOT": unary_not,
    "BUILD_TUPLE": build_tuple,
    "BUILD_LIST": build_list,
    "BUILD_SET": build_set,
    "BUILD_MAP": build_map,
    "BUILD_CONST_KEY_MAP": build_const_key_map,
    "BUILD_STRING": build_string,
    "BUILD_SLICE": build_slice,
    "LIST_APPEND": list_append,
    "SET_ADD": set_add,
    "MAP_ADD": map_add,
    "LIST_EXTEND": list_extend,
    "SET_UPDATE": set_update,
    "DICT_UPDATE": dict_update,
    "DICT_MERGE": dict_update,
    "LIST_TO_TUPLE": list_to_tuple,
    "UNPACK_SEQUENCE": unpack_sequence,
    "UNPACK_EX": unpack_ex,
    "FORMAT_VALUE": format_value,
    "CONVERT_VALUE": convert_value,
    "FORMAT_SIMPLE": format_simple,
    "FORMAT_WITH_SPEC": format_with_spec,
    "CALL_INTRINSIC_1": call_intrinsic_1,
    "CALL_INTRINSIC_2": call_intrinsic_2,
    "GET_LEN": get_len,
}
