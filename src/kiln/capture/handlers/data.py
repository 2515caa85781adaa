"""Operators, container building, unpacking and string formatting."""
from __future__ import annotations

import operator

from ...exc import Unsupported
from ..instructions import BINARY_OP_SYMBOLS
from ..operators import BINARY_OPS, COMPARE_OPS, INPLACE_OPS, binary, compare, contains, identical, inplace, unary
from ..values.base import ConstantValue, const
from ..values.containers import DictValue, ListValue, SetValue, SliceValue, TupleValue, key_of, set_items


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
    tx.push(compare(tx, COMPARE_OPS[ins.argval], a, b))


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


def list_append(tx, ins):
    v = tx.pop()
    tx.stack[-ins.arg].items.append(v)


def set_add(tx, ins):
    v = tx.pop()
    tx.stack[-ins.arg].items.setdefault(key_of(v, tx), v)


def map_add(tx, ins):
    v = tx.pop()
    k = tx.pop()
    _put(tx, tx.stack[-ins.arg], k, v)


def list_extend(tx, ins):
    seq = tx.pop()
    tx.stack[-ins.arg].items.extend(seq.unpack(tx))


def set_update(tx, ins):
    seq = tx.pop()
    target = tx.stack[-ins.arg]
    for v in seq.unpack(tx):
        target.items.setdefault(key_of(v, tx), v)


def dict_update(tx, ins):
    other = tx.pop()
    target = tx.stack[-ins.arg]
    if isinstance(other, DictValue):
        target.items.update(other.items)
        target.key_values.update(other.key_values)
        return
    keys = other.call_method(tx, "keys", [], {}).unpack(tx)
    for k in keys:
        _put(target, k, other.getitem(tx, k))


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


def format_value(tx, ins):
    spec = tx.pop().as_constant() if ins.arg & 0x04 else ""
    v = tx.pop()
    conv = ins.arg & 0x03
    if not v.is_constant():
        raise Unsupported(f"formatting {v.describe()} into a string")
    value = v.as_constant()
    if conv == 1:
        value = str(value)
    elif conv == 2:
        value = repr(value)
    elif conv == 3:
        value = ascii(value)
    tx.push(const(format(value, spec)))


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
    "GET_LEN": get_len,
}
