"""Loads and stores: locals, globals, cells, attributes, subscripts, imports."""
from __future__ import annotations

import importlib

from ...exc import Unsupported
from ..sources import GlobalSource
from ..values.base import NULL, AttributeMissing, ConstantValue, const, raise_python
from ..values.builder import wrap
from ..values.functions import CellValue


def load_const(tx, ins):
    tx.push(const(ins.argval))


def load_fast(tx, ins):
    try:
        tx.push(tx.locals[ins.argval])
    except KeyError:
        raise Unsupported(f"local variable {ins.argval!r} referenced before assignment (UnboundLocalError)")


def store_fast(tx, ins):
    tx.locals[ins.argval] = tx.pop()


def delete_fast(tx, ins):
    tx.locals.pop(ins.argval, None)


def load_global(tx, ins):
    if ins.opname == "LOAD_GLOBAL" and ins.arg & 1:
        tx.push(NULL)
    tx.push(tx.load_global(ins.argval))


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
    obj = tx.pop()
    tx.push(_getattr_or_raise(tx, obj, ins.argval))


def load_method(tx, ins):
    obj = tx.pop()
    tx.push(NULL)
    tx.push(_getattr_or_raise(tx, obj, ins.argval))


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
    "STORE_FAST": store_fast,
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
    "STORE_ATTR": store_attr,
    "DELETE_ATTR": delete_attr,
    "BINARY_SUBSCR": binary_subscr,
    "STORE_SUBSCR": store_subscr,
    "DELETE_SUBSCR": delete_subscr,
    "IMPORT_NAME": import_name,
    "IMPORT_FROM": import_from,
    "LOAD_ASSERTION_ERROR": load_assertion_error,
}
_ = (GlobalSource, ConstantValue)
