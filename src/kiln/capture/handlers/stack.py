"""Pure stack shuffling and no-ops."""
from __future__ import annotations

from ..values.base import NULL


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
}
