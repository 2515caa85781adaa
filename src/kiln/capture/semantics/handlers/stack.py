"""Pure stack shuffling and no-ops."""
from __future__ import annotations

from ...basics import stack_inputs
from ...values import NULL


def nop(tx, ins):
    pass


def pop_top(tx, ins):
    tx.pop()


def push_null(tx, ins):
    tx.push(NULL)


def copy(tx, ins):
    tx.push(tx.stack[-ins.arg])


def swap(tx, ins):
    i = ins.arg
    tx.stack[-1], tx.stack[-i] = tx.stack[-i], tx.stack[-1]


def pop_inputs(tx, ins):
    """END_FOR (3.12 pops the loop's iterator and value, 3.13 the value): reached only
    when CPython's FOR_ITER would also reach it; how many it pops is its table row."""
    tx.popn(stack_inputs(ins))


def end_send(tx, ins):
    """3.12+: drop the sub-iterator from below ``yield from``'s result."""
    del tx.stack[-2]


TABLE = {
    "NOP": nop,
    "RESUME": nop,
    "CACHE": nop,
    "EXTENDED_ARG": nop,
    "PRECALL": nop,
    "COPY_FREE_VARS": nop,
    "POP_TOP": pop_top,
    "PUSH_NULL": push_null,
    "COPY": copy,
    "SWAP": swap,
    "END_FOR": pop_inputs,
    "END_SEND": end_send,
    # 3.13 converts a value for POP_JUMP_IF_TRUE/FALSE and ``not``; Kiln's branch handlers
    # ask the value's truth themselves, so the value stays (a tensor's truth then breaks the
    # graph at the jump, as in 3.11; the step function converts it, see resume.step_code)
    "TO_BOOL": nop,
}
