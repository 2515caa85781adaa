"""Loads and stores: locals, globals, cells, attributes, subscripts, imports."""
from __future__ import annotations

import importlib

from ....exc import Unsupported
from ...basics import GlobalSource, LAYOUT
from ...values import AttributeMissing, const, ConstantValue, NULL, NullValue, raise_python, SliceValue, wrap
from ...values import CellValue, make_super


def load_const(tx, ins):
    tx.push(const(ins.argval))


def _local(tx, name):
    cell = tx.cells.get(name)
    if cell is not None:
        # a cell variable's fast slot holds its cell (3.13 loads it with LOAD_FAST where
        # earlier versions had LOAD_CLOSURE, e.g. to build a closure tuple)
        return cell
    try:
        return tx.locals[name]
    except KeyError:
        raise Unsupported(f"local variable {name!r} referenced before assignment (UnboundLocalError)")


def _store(tx, name, value):
    if isinstance(value, NullValue):   # 3.12+: an inlined comprehension restores an unbound name
        tx.locals.pop(name, None)
    else:
        tx.locals[name] = value


def load_fast(tx, ins):
    tx.push(_local(tx, ins.argval))


def store_fast(tx, ins):
    _store(tx, ins.argval, tx.pop())


def load_fast_and_clear(tx, ins):
    """3.12+ (PEP 709): an inlined comprehension saves a name it binds (NULL if unbound)."""
    tx.push(tx.locals.pop(ins.argval, NULL))


def load_fast_load_fast(tx, ins):
    first, second = ins.argval
    tx.push(_local(tx, first))
    tx.push(_local(tx, second))


def store_fast_load_fast(tx, ins):
    stored, loaded = ins.argval
    _store(tx, stored, tx.pop())
    tx.push(_local(tx, loaded))


def store_fast_store_fast(tx, ins):
    first, second = ins.argval
    _store(tx, first, tx.pop())
    _store(tx, second, tx.pop())


def delete_fast(tx, ins):
    tx.locals.pop(ins.argval, None)


def _push_maybe_callable(tx, value, for_call: bool):
    """A load whose argument's low bit asks for a callable leaves the NULL slot too,
    below or above the value as the version's calling convention has it."""
    for v in LAYOUT.with_null(value, NULL) if for_call else [value]:
        tx.push(v)


def load_global(tx, ins):
    _push_maybe_callable(tx, tx.load_global(ins.argval), bool(ins.arg & 1))


def store_global(tx, ins):
    tx.state.side_effects.store_global(tx.f_globals, ins.argval, tx.pop())


def delete_global(tx, ins):
    raise Unsupported(f"deleting global {ins.argval!r} inside a compiled region")


def make_cell(tx, ins):
    name = ins.argval
    if name in tx.cells:
        return
    tx.cells[name] = CellValue(tx.locals.pop(name, None))


def load_closure(tx, ins):
    tx.push(tx.cells[ins.argval])


def load_deref(tx, ins):
    cell = tx.cells.get(ins.argval)
    if cell is None:
        raise Unsupported(f"free variable {ins.argval!r} has no cell")
    tx.push(cell.get(tx))


def store_deref(tx, ins):
    tx.cells[ins.argval].set(tx, tx.pop())


def delete_deref(tx, ins):
    raise Unsupported("deleting a closure variable")


def _getattr_or_raise(tx, obj, name):
    """``obj.name``; a missing attribute raises AttributeError in the traced code (catchable)."""
    try:
        return obj.getattr(tx, name)
    except AttributeMissing as e:
        raise_python(AttributeError, e.reason)


def load_attr(tx, ins):
    """``obj.name``; in 3.12+ the argument's low bit asks for a method (3.11: LOAD_METHOD),
    pushed as the bound method and a NULL (Kiln binds methods itself)."""
    obj = tx.pop()
    _push_maybe_callable(tx, _getattr_or_raise(tx, obj, ins.argval), LAYOUT.attr_method_bit and bool(ins.arg & 1))


def load_method(tx, ins):
    obj = tx.pop()
    _push_maybe_callable(tx, _getattr_or_raise(tx, obj, ins.argval), True)


def load_super_attr(tx, ins):
    """3.12+: ``super().name`` and ``super(cls, obj).name`` in one instruction, over
    [global super, cls, self]; bit 0 asks for a method, bit 1 marks the two-argument form."""
    obj = tx.pop()
    cls = tx.pop()
    global_super = tx.pop()
    if getattr(global_super, "fn", None) is super:
        sup = make_super(tx, [cls, obj])
    else:   # ``super`` rebound: CPython calls whatever it is, as the source wrote the call
        sup = global_super.call(tx, [cls, obj] if ins.arg & 2 else [], {})
    _push_maybe_callable(tx, _getattr_or_raise(tx, sup, ins.argval), bool(ins.arg & 1))


def store_attr(tx, ins):
    obj = tx.pop()
    value = tx.pop()
    obj.setattr(tx, ins.argval, value)


def delete_attr(tx, ins):
    tx.pop().delattr(tx, ins.argval)


def binary_subscr(tx, ins):
    key = tx.pop()
    container = tx.pop()
    tx.push(container.getitem(tx, key))


def store_subscr(tx, ins):
    key = tx.pop()
    container = tx.pop()
    value = tx.pop()
    container.setitem(tx, key, value)


def delete_subscr(tx, ins):
    key = tx.pop()
    tx.pop().delitem(tx, key)


def _slice(tx, start, stop):
    s = SliceValue(start, stop, const(None))
    return const(s.as_constant()) if s.is_constant() else s


def binary_slice(tx, ins):
    """3.12+: ``container[start:stop]`` without building the slice on the stack."""
    stop = tx.pop()
    start = tx.pop()
    container = tx.pop()
    tx.push(container.getitem(tx, _slice(tx, start, stop)))


def store_slice(tx, ins):
    stop = tx.pop()
    start = tx.pop()
    container = tx.pop()
    value = tx.pop()
    container.setitem(tx, _slice(tx, start, stop), value)


def import_name(tx, ins):
    fromlist = tx.pop()
    level = tx.pop()
    if level.as_constant() != 0:
        # resolved against the importing module's package, as Python does; like an
        # absolute import it runs at trace time (a module is imported once per process)
        module = __import__(ins.argval, tx.f_globals, None, fromlist.as_constant(), level.as_constant())
        tx.push(wrap(tx, module, None))
        return
    name = ins.argval
    module = importlib.import_module(name)
    if not fromlist.as_constant():
        module = importlib.import_module(name.partition(".")[0])
    tx.push(wrap(tx, module, None))


def import_from(tx, ins):
    tx.push(tx.stack[-1].getattr(tx, ins.argval))


def load_assertion_error(tx, ins):
    tx.push(wrap(tx, AssertionError, None))


TABLE = {
    "LOAD_CONST": load_const,
    "LOAD_FAST": load_fast,
    "LOAD_FAST_CHECK": load_fast,
    "LOAD_FAST_AND_CLEAR": load_fast_and_clear,
    "LOAD_FAST_LOAD_FAST": load_fast_load_fast,
    "STORE_FAST": store_fast,
    "STORE_FAST_LOAD_FAST": store_fast_load_fast,
    "STORE_FAST_STORE_FAST": store_fast_store_fast,
    "DELETE_FAST": delete_fast,
    "LOAD_GLOBAL": load_global,
    "STORE_GLOBAL": store_global,
    "DELETE_GLOBAL": delete_global,
    "MAKE_CELL": make_cell,
    "LOAD_CLOSURE": load_closure,
    "LOAD_DEREF": load_deref,
    "LOAD_CLASSDEREF": load_deref,
    "STORE_DEREF": store_deref,
    "DELETE_DEREF": delete_deref,
    "LOAD_ATTR": load_attr,
    "LOAD_METHOD": load_method,
    "LOAD_SUPER_ATTR": load_super_attr,
    "STORE_ATTR": store_attr,
    "DELETE_ATTR": delete_attr,
    "BINARY_SUBSCR": binary_subscr,
    "STORE_SUBSCR": store_subscr,
    "DELETE_SUBSCR": delete_subscr,
    "BINARY_SLICE": binary_slice,
    "STORE_SLICE": store_slice,
    "IMPORT_NAME": import_name,
    "IMPORT_FROM": import_from,
    "LOAD_ASSERTION_ERROR": load_assertion_error,
}
_ = (GlobalSource, ConstantValue)
