"""Decoded instructions and the flow facts derived from them (stack depths, loops).

What differs between CPython versions is data in ``opcodes`` (the version table);
this module reads it, so the functions here serve every supported version.
"""
from __future__ import annotations

import dis
from dataclasses import dataclass

from .opcodes import HAS_ARG, JUMP_OPCODES, LAYOUT, ROWS


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


# BINARY_OP's argument -> operator symbol (Include/opcode.h NB_* order, as dis lists it)
BINARY_OP_SYMBOLS = [symbol for _, symbol in dis._nb_ops]  # e.g. ("NB_ADD", "+") -> "+"

JUMP_OPS = JUMP_OPCODES


def decode(code) -> list[Instr]:
    """Decode a code object into Instrs (CACHE and EXTENDED_ARG removed, jumps as indices).

    EXTENDED_ARG is folded into the following instruction's argument (as dis already
    does), so indices here match the ``bytecode`` package's instruction order; a jump or
    handler that targets an EXTENDED_ARG lands on the instruction it extends.
    """
    raw = [ins for ins in dis.get_instructions(code)]
    real = [ins for ins in raw if ins.opname != "EXTENDED_ARG"]
    index_of = {ins.offset: i for i, ins in enumerate(real)}
    # an EXTENDED_ARG's offset maps to the next real instruction
    pending = []
    for ins in raw:
        if ins.opname == "EXTENDED_ARG":
            pending.append(ins.offset)
        else:
            for off in pending:
                index_of[off] = index_of[ins.offset]
            pending = []
    out = []
    lineno = code.co_firstlineno
    for i, ins in enumerate(real):
        if ins.positions is not None and ins.positions.lineno is not None:
            lineno = ins.positions.lineno
        target = index_of.get(ins.argval) if ins.opcode in JUMP_OPS else None
        out.append(Instr(i, ins.offset, ins.opname, ins.arg, ins.argval, ins.argrepr, lineno, target))
    return out


def index_at_offset(instructions: list, offset: int) -> int:
    """Index of the instruction at ``offset`` (or the first after it, past EXTENDED_ARGs)."""
    for ins in instructions:
        if ins.offset >= offset:
            return ins.index
    raise KeyError(offset)


def exception_table(code):
    """(start_offset, end_offset, target_offset, depth, lasti) entries of co_exceptiontable."""
    return [(e.start, e.end, e.target, e.depth, e.lasti) for e in dis._parse_exception_table(code)]


# Flags
CO_GENERATOR = 0x20
CO_COROUTINE = 0x80
CO_ASYNC_GENERATOR = 0x200
CO_ITERABLE_COROUTINE = 0x100


def stack_inputs(ins) -> int | None:
    """How many stack items an instruction consumes (None: Kiln does not know).

    Needed to resume after a graph break: the items below these are untouched by the
    breaking instruction and are handed to the continuation unchanged.  The counts are
    the version table's (``opcodes.OPS``)."""
    row = ROWS.get(ins.opname)
    if row is None or row.inputs is None:
        return None
    return row.inputs(ins.arg or 0) if callable(row.inputs) else row.inputs


def stack_outputs(ins, jump: bool) -> int:
    """How many items an instruction leaves on top of the untouched part of the stack."""
    row = ROWS[ins.opname]
    if row.outputs is not None:
        return row.outputs
    return stack_inputs(ins) + dis.stack_effect(dis.opmap[ins.opname], ins.arg, jump=jump)


_UNCONDITIONAL = frozenset({"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "NOP"})


def exit_of(instructions, ins, jump: bool) -> tuple[int, int]:
    """(index the instruction continues at, items it leaves on top of the untouched
    part) for its fall-through or its jump.  An exhausted FOR_ITER has popped its
    iterator and continues at ``loop_exit``.

    Unconditional jumps (and NOPs) on the way are followed: control goes on to where
    they lead with the stack as it is, so a continuation starts there.  (3.12+ ends a
    ``while`` loop's test with POP_JUMP_IF_FALSE out of the loop and a JUMP_BACKWARD to
    the body, where 3.11 had one backward conditional jump: the body's continuation
    must be the same code whichever way the test was reached.)"""
    if jump and ins.opname == "FOR_ITER":
        index, outputs = loop_exit(ins), 0
    else:
        index, outputs = (ins.jump_target if jump else ins.index + 1), stack_outputs(ins, jump)
    seen = set()
    while index < len(instructions) and instructions[index].opname in _UNCONDITIONAL and index not in seen:
        seen.add(index)
        nxt = instructions[index]
        index = nxt.jump_target if nxt.jump_target is not None else index + 1
    return index, outputs


def loop_exit(ins) -> int:
    """Where an exhausted FOR_ITER continues: its target, or past the loop's cleanup
    (``Layout.loop_exit_skip``); the iterator is popped either way."""
    return ins.jump_target + LAYOUT.loop_exit_skip


def stack_depths(code, instructions) -> list:
    """The stack depth on entry to each instruction (None where unreachable).

    Found by following every edge from the entry, as CPython's compiler does when it
    sizes the stack: fall-through and jumps with ``dis.stack_effect``, exception handlers
    with the depth the exception table gives (plus the exception, plus ``lasti``)."""
    depths = [None] * len(instructions)
    if not instructions:
        return depths
    by_offset = {ins.offset: ins.index for ins in instructions}
    handlers = exception_table(code)
    depths[0] = 0
    work = [0]
    while work:
        ins = instructions[work.pop()]
        depth = depths[ins.index]
        opcode = dis.opmap[ins.opname]
        arg = ins.arg if opcode in HAS_ARG else None
        edges = []
        if ins.opname not in LAYOUT.no_fallthrough and ins.index + 1 < len(instructions):
            edges.append((ins.index + 1, depth + dis.stack_effect(opcode, arg, jump=False)))
        if ins.jump_target is not None:
            edges.append((ins.jump_target, depth + dis.stack_effect(opcode, arg, jump=True)))
        for start, end, target, handler_depth, lasti in handlers:
            if start <= ins.offset < end and target in by_offset:
                edges.append((by_offset[target], handler_depth + 1 + int(lasti)))
        for index, d in edges:
            if depths[index] is None:
                depths[index] = d
                work.append(index)
    return depths


def enclosing_loops(instructions, depths, index: int) -> tuple:
    """The stack slots of the iterators of the ``for`` loops whose body holds
    instruction ``index``, innermost first.  A loop is ``FOR_ITER`` (jumping to the
    loop's end when the iterator runs out: past it in 3.11, to its END_FOR in 3.12+),
    its body, and the ``JUMP_BACKWARD`` to it; the iterator stays on the stack below
    everything the body pushes."""
    slots = []
    for ins in instructions[:index]:
        if ins.opname == "FOR_ITER" and ins.jump_target is not None and index < ins.jump_target \
                and depths[ins.index] is not None and depths[index] is not None \
                and depths[ins.index] <= depths[index]:
            slots.append(depths[ins.index] - 1)
    return tuple(sorted(set(slots), reverse=True))
