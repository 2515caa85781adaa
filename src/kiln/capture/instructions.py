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
    breaking instruction and are handed to the continuation unchanged.
    """
    name, arg = ins.opname, ins.arg or 0
    fixed = {
        "POP_TOP": 1, "BINARY_OP": 2, "COMPARE_OP": 2, "IS_OP": 2, "CONTAINS_OP": 2, "BINARY_SUBSCR": 2,
        "STORE_SUBSCR": 3, "DELETE_SUBSCR": 2, "STORE_ATTR": 2, "DELETE_ATTR": 1, "LOAD_ATTR": 1,
        "UNARY_NEGATIVE": 1, "UNARY_POSITIVE": 1, "UNARY_NOT": 1, "UNARY_INVERT": 1, "GET_ITER": 1,
        "UNPACK_SEQUENCE": 1, "UNPACK_EX": 1, "STORE_FAST": 1, "STORE_GLOBAL": 1, "STORE_DEREF": 1,
        "LOAD_CONST": 0, "LOAD_FAST": 0, "LOAD_DEREF": 0, "LOAD_CLOSURE": 0, "DELETE_FAST": 0,
        "BEFORE_WITH": 1, "IMPORT_NAME": 2, "IMPORT_FROM": 0, "LIST_TO_TUPLE": 1, "GET_LEN": 0,
        "LIST_APPEND": 1, "SET_ADD": 1, "MAP_ADD": 2, "LIST_EXTEND": 1, "SET_UPDATE": 1, "DICT_UPDATE": 1,
        "DICT_MERGE": 1, "POP_JUMP_FORWARD_IF_TRUE": 1, "POP_JUMP_FORWARD_IF_FALSE": 1,
        "POP_JUMP_BACKWARD_IF_TRUE": 1, "POP_JUMP_BACKWARD_IF_FALSE": 1, "POP_JUMP_FORWARD_IF_NONE": 1,
        "POP_JUMP_FORWARD_IF_NOT_NONE": 1, "POP_JUMP_BACKWARD_IF_NONE": 1, "POP_JUMP_BACKWARD_IF_NOT_NONE": 1,
        "JUMP_IF_TRUE_OR_POP": 1, "JUMP_IF_FALSE_OR_POP": 1, "FOR_ITER": 1, "NOP": 0,
    }
    if name in fixed:
        return fixed[name]
    if name == "CALL":
        return arg + 2
    if name == "CALL_FUNCTION_EX":
        return 3 + (arg & 1)
    if name in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "BUILD_STRING"):
        return arg
    if name == "BUILD_MAP":
        return 2 * arg
    if name == "BUILD_CONST_KEY_MAP":
        return arg + 1
    if name == "BUILD_SLICE":
        return arg
    if name == "FORMAT_VALUE":
        return 2 if arg & 0x04 else 1
    if name == "MAKE_FUNCTION":
        return 1 + bin(arg & 0x0F).count("1")
    return None


def stack_outputs(ins, jump: bool) -> int:
    """How many items an instruction leaves on top of the untouched part of the stack."""
    if ins.opname == "CALL":   # 3.11 books most of CALL's effect on PRECALL
        return 1
    return stack_inputs(ins) + dis.stack_effect(dis.opmap[ins.opname], ins.arg, jump=jump)


_ENDS_BLOCK = frozenset({"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
                         "JUMP_BACKWARD_NO_INTERRUPT"})


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
        arg = ins.arg if opcode >= dis.HAVE_ARGUMENT else None
        edges = []
        if ins.opname not in _ENDS_BLOCK and ins.index + 1 < len(instructions):
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
    instruction ``index``, innermost first.  In 3.11 a loop is ``FOR_ITER`` (jumping
    past the loop when the iterator runs out), its body, and the ``JUMP_BACKWARD`` to
    it; the iterator stays on the stack below everything the body pushes."""
    slots = []
    for ins in instructions[:index]:
        if ins.opname == "FOR_ITER" and ins.jump_target is not None and index < ins.jump_target \
                and depths[ins.index] is not None and depths[index] is not None \
                and depths[ins.index] <= depths[index]:
            slots.append(depths[ins.index] - 1)
    return tuple(sorted(set(slots), reverse=True))
