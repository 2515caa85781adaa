"""Jumps, branches and loops.  Branches need a condition known at trace time;
loops are unrolled over iterators whose items are known."""
from __future__ import annotations

from ....exc import Unsupported
from ...basics import loop_exit
from ...values import as_iterator, ConstantValue, IteratorValue
from ..runtime_checks import check_instead


def jump(tx, ins):
    tx.jump(ins)


def _pop_jump_if(truth: bool):
    def handler(tx, ins):
        v = tx.pop()
        try:
            taken = v.truth(tx) is truth
        except Unsupported:
            # a condition computed from tensor data: a run-time check when one side only raises
            taken = check_instead(tx, ins, v, truth)
            if taken is None:
                raise
        if taken:
            tx.jump(ins)
    return handler


def _is_none(v) -> bool:
    return isinstance(v, ConstantValue) and v.value is None


def _pop_jump_if_none(want_none: bool):
    def handler(tx, ins):
        v = tx.pop()
        if _is_none(v) is want_none:
            tx.jump(ins)
    return handler


def _jump_if_or_pop(truth: bool):
    def handler(tx, ins):
        if tx.stack[-1].truth(tx) is truth:
            tx.jump(ins)
        else:
            tx.pop()
    return handler


def get_iter(tx, ins):
    tx.push(as_iterator(tx, tx.pop()))


def for_iter(tx, ins):
    it = tx.stack[-1]
    if not isinstance(it, IteratorValue):
        raise Unsupported(f"for-loop over {it.describe()}")
    item = it.next(tx)
    if item is None:
        tx.pop()
        tx.ip = loop_exit(ins)
    else:
        tx.push(item)


TABLE = {
    "JUMP_FORWARD": jump,
    "JUMP_BACKWARD": jump,
    "JUMP_BACKWARD_NO_INTERRUPT": jump,
    "POP_JUMP_FORWARD_IF_TRUE": _pop_jump_if(True),
    "POP_JUMP_BACKWARD_IF_TRUE": _pop_jump_if(True),
    "POP_JUMP_FORWARD_IF_FALSE": _pop_jump_if(False),
    "POP_JUMP_BACKWARD_IF_FALSE": _pop_jump_if(False),
    "POP_JUMP_FORWARD_IF_NONE": _pop_jump_if_none(True),
    "POP_JUMP_BACKWARD_IF_NONE": _pop_jump_if_none(True),
    "POP_JUMP_FORWARD_IF_NOT_NONE": _pop_jump_if_none(False),
    "POP_JUMP_BACKWARD_IF_NOT_NONE": _pop_jump_if_none(False),
    "POP_JUMP_IF_TRUE": _pop_jump_if(True),
    "POP_JUMP_IF_FALSE": _pop_jump_if(False),
    "POP_JUMP_IF_NONE": _pop_jump_if_none(True),
    "POP_JUMP_IF_NOT_NONE": _pop_jump_if_none(False),
    "JUMP_IF_TRUE_OR_POP": _jump_if_or_pop(True),
    "JUMP_IF_FALSE_OR_POP": _jump_if_or_pop(False),
    "GET_ITER": get_iter,
    "FOR_ITER": for_iter,
}
