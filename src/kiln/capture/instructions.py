"""CPython bytecode facts, in one place.

Kiln targets CPython 3.11.  Everything that depends on the bytecode version (how
instructions are decoded, which opcodes jump, the calling convention's NULL slot,
the binary-operator table) lives here so another version is one more table, not an
edit across the interpreter.
"""
from __future__ import annotations

import dis
import sys
from dataclasses import dataclass

SUPPORTED_VERSIONS = ((3, 11),)


def check_version() -> None:
    if sys.version_info[:2] not in SUPPORTED_VERSIONS:
        raise RuntimeError(f"Kiln's bytecode interpreter supports CPython "
                           f"{', '.join('.'.join(map(str, v)) for v in SUPPORTED_VERSIONS)}; "
                           f"this is {sys.version_info.major}.{sys.version_info.minor}")


@dataclass(frozen=True)
class Instr:
    index: int        # position in the decoded list
    offset: int       # byte offset in co_code
    opname: str
    arg: int | None
    argval: object
    argrepr: str
    lineno: int | None
    jump_target: int | None  # index of the target instruction for jumps


# BINARY_OP's argument -> operator symbol (3.11: Include/opcode.h NB_* order)
BINARY_OP_SYMBOLS = [symbol for _, symbol in dis._nb_ops]  # e.g. ("NB_ADD", "+") -> "+"

JUMP_OPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


def decode(code) -> list[Instr]:
    """Decode a code object into Instrs (CACHE entries removed, jumps as indices)."""
    raw = list(dis.get_instructions(code))
    index_of = {ins.offset: i for i, ins in enumerate(raw)}
    out = []
    lineno = code.co_firstlineno
    for i, ins in enumerate(raw):
        if ins.positions is not None and ins.positions.lineno is not None:
            lineno = ins.positions.lineno
        target = index_of.get(ins.argval) if ins.opcode in JUMP_OPS else None
        out.append(Instr(i, ins.offset, ins.opname, ins.arg, ins.argval, ins.argrepr, lineno, target))
    return out


def exception_table(code):
    """(start_offset, end_offset, target_offset, depth, lasti) entries of co_exceptiontable."""
    return [(e.start, e.end, e.target, e.depth, e.lasti) for e in dis._parse_exception_table(code)]


# Flags
CO_GENERATOR = 0x20
CO_COROUTINE = 0x80
CO_ASYNC_GENERATOR = 0x200
CO_ITERABLE_COROUTINE = 0x100
