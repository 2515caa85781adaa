"""The version table: every bytecode fact that differs between the CPythons Kiln runs on.

Two kinds of data, both keyed by version:

* ``OPS``, one row per opcode: the versions that have it, how many stack items it
  consumes (needed to resume after a graph break: the items below are untouched and
  go to the continuation as they are), and, for an opcode Kiln does not trace, why not
  (the graph break's reason).  An opcode's *semantics* live in ``handlers/`` and are
  shared by every version that has the opcode; where a version changed an opcode's
  stack layout the handler asks the ``Layout``.
* ``Layout``, one per version: argument encodings, the calling convention (where the
  NULL slot sits, how keywords are named), the shape of ``for`` loops, and how
  generated code (continuations, step functions) must be laid out.

Nothing outside this module tests ``sys.version_info``: adding a version is rows here
plus tests (docs/architecture.md, "The version table", lists 3.14's rows).
"""
from __future__ import annotations

import dis
import sys
from dataclasses import dataclass, field
from typing import Callable

V311, V312, V313 = (3, 11), (3, 12), (3, 13)
SUPPORTED_VERSIONS = (V311, V312, V313)
ALL = SUPPORTED_VERSIONS
FROM_312 = (V312, V313)
RUNNING = tuple(sys.version_info[:2])


@dataclass(frozen=True)
class Op:
    """One opcode in some versions.

    ``inputs``: stack items consumed, an int or a function of the argument (None: Kiln
    cannot resume a frame after a break at it).  ``outputs``: items left on top of the
    untouched part, when ``inputs + dis.stack_effect`` does not say it (3.11 books most
    of CALL's effect on PRECALL).  ``unsupported``: why Kiln does not trace it."""
    name: str
    inputs: int | Callable | None = None
    versions: tuple = ALL
    unsupported: str | None = None
    outputs: int | None = None


def _call(arg):
    return arg + 2           # callable and NULL/self slots, then the arguments


def _below_pops(popped: int):
    """Inputs of an instruction that pops ``popped`` items and then changes the container
    ``arg`` slots down (``LIST_APPEND``, ``LIST_EXTEND``, ``MAP_ADD``...)."""
    return lambda arg: arg + popped


def _popcount_flags(arg):
    return 1 + bin(arg & 0x0F).count("1")   # the code object and one item per flag


_PSEUDO = "a pseudo-instruction: the compiler replaces it, code objects never hold it"
_INSTRUMENTED = "an instrumented form (sys.monitoring): co_code shows the base instruction"
_ASYNC = "coroutines and async generators are not traced"
_CLASS_BODY = "only in module and class bodies, which Kiln does not compile"

OPS: tuple = (
    # -- no-ops and stack shuffling
    Op("NOP", 0), Op("RESUME", 0), Op("CACHE", 0), Op("EXTENDED_ARG", 0),
    Op("PRECALL", None, (V311,)), Op("COPY_FREE_VARS", 0), Op("POP_TOP", 1), Op("PUSH_NULL", 0),
    Op("COPY", lambda a: a), Op("SWAP", lambda a: a),
    Op("END_FOR", 2, (V312,)), Op("END_FOR", 1, (V313,)), Op("END_SEND", 2, FROM_312),
    # -- names
    Op("LOAD_CONST", 0), Op("LOAD_FAST", 0), Op("STORE_FAST", 1), Op("DELETE_FAST", 0),
    Op("LOAD_FAST_CHECK", 0, FROM_312), Op("LOAD_FAST_AND_CLEAR", 0, FROM_312),
    Op("LOAD_FAST_LOAD_FAST", 0, (V313,)), Op("STORE_FAST_LOAD_FAST", 1, (V313,)),
    Op("STORE_FAST_STORE_FAST", 2, (V313,)),
    Op("LOAD_GLOBAL", 0), Op("STORE_GLOBAL", 1), Op("DELETE_GLOBAL", 0),
    Op("MAKE_CELL", 0), Op("LOAD_CLOSURE", 0, (V311, V312)), Op("LOAD_DEREF", 0),
    Op("LOAD_CLASSDEREF", 0, (V311,)), Op("STORE_DEREF", 1), Op("DELETE_DEREF", 0),
    Op("LOAD_ATTR", 1), Op("LOAD_METHOD", None, (V311,)), Op("STORE_ATTR", 2), Op("DELETE_ATTR", 1),
    Op("LOAD_SUPER_ATTR", 3, FROM_312),
    Op("BINARY_SUBSCR", 2), Op("STORE_SUBSCR", 3), Op("DELETE_SUBSCR", 2),
    Op("BINARY_SLICE", 3, FROM_312), Op("STORE_SLICE", 4, FROM_312),
    Op("IMPORT_NAME", 2), Op("IMPORT_FROM", 0), Op("LOAD_ASSERTION_ERROR", 0),
    Op("LOAD_NAME", None, unsupported=_CLASS_BODY), Op("STORE_NAME", None, unsupported=_CLASS_BODY),
    Op("DELETE_NAME", None, unsupported=_CLASS_BODY), Op("IMPORT_STAR", None, (V311,), unsupported=_CLASS_BODY),
    Op("LOAD_LOCALS", None, FROM_312, unsupported=_CLASS_BODY),
    Op("LOAD_FROM_DICT_OR_GLOBALS", None, FROM_312, unsupported=_CLASS_BODY),
    Op("LOAD_FROM_DICT_OR_DEREF", None, FROM_312, unsupported=_CLASS_BODY),
    # -- operators, containers, formatting
    Op("BINARY_OP", 2), Op("COMPARE_OP", 2), Op("IS_OP", 2), Op("CONTAINS_OP", 2),
    Op("UNARY_NEGATIVE", 1), Op("UNARY_POSITIVE", 1, (V311,)), Op("UNARY_INVERT", 1), Op("UNARY_NOT", 1),
    Op("TO_BOOL", 1, (V313,)),
    Op("BUILD_TUPLE", lambda a: a), Op("BUILD_LIST", lambda a: a), Op("BUILD_SET", lambda a: a),
    Op("BUILD_MAP", lambda a: 2 * a), Op("BUILD_CONST_KEY_MAP", lambda a: a + 1),
    Op("BUILD_STRING", lambda a: a), Op("BUILD_SLICE", lambda a: a),
    # these change the container ``arg`` slots below what they pop: it is an input too
    # (a step function that runs one as Python must push it), and stays as an output
    Op("LIST_APPEND", _below_pops(1)), Op("SET_ADD", _below_pops(1)), Op("MAP_ADD", _below_pops(2)),
    Op("LIST_EXTEND", _below_pops(1)), Op("SET_UPDATE", _below_pops(1)), Op("DICT_UPDATE", _below_pops(1)),
    # DICT_MERGE's error message also names the callable below the arguments it builds
    Op("DICT_MERGE", lambda a: a + 3), Op("LIST_TO_TUPLE", 1, (V311,)),
    Op("UNPACK_SEQUENCE", 1), Op("UNPACK_EX", 1), Op("GET_LEN", 0),
    Op("FORMAT_VALUE", lambda a: 2 if a & 0x04 else 1, (V311, V312)),
    Op("FORMAT_SIMPLE", 1, (V313,)), Op("FORMAT_WITH_SPEC", 2, (V313,)), Op("CONVERT_VALUE", 1, (V313,)),
    Op("CALL_INTRINSIC_1", 1, FROM_312), Op("CALL_INTRINSIC_2", 2, FROM_312),
    # -- calls, functions, returns, generators
    Op("KW_NAMES", None, (V311, V312)), Op("CALL", _call, outputs=1),
    Op("CALL_KW", lambda a: a + 3, (V313,), outputs=1),
    Op("CALL_FUNCTION_EX", lambda a: 3 + (a & 1)),
    Op("MAKE_FUNCTION", _popcount_flags, (V311, V312)), Op("MAKE_FUNCTION", 1, (V313,)),
    Op("SET_FUNCTION_ATTRIBUTE", 2, (V313,)),
    Op("RETURN_VALUE", None), Op("RETURN_CONST", None, FROM_312), Op("RETURN_GENERATOR", None),
    Op("YIELD_VALUE", None), Op("GET_YIELD_FROM_ITER", None), Op("SEND", None),
    Op("LOAD_BUILD_CLASS", None),
    Op("CLEANUP_THROW", None, FROM_312, unsupported="generator.throw() into a delegating generator"),
    Op("EXIT_INIT_CHECK", None, (V313,), unsupported="only in specialised __init__ calls, never in co_code"),
    Op("ENTER_EXECUTOR", None, (V313,), unsupported="a JIT trace entry, never in co_code"),
    # -- control
    Op("JUMP_FORWARD", 0), Op("JUMP_BACKWARD", 0), Op("JUMP_BACKWARD_NO_INTERRUPT", 0),
    *(Op(f"POP_JUMP_{d}_IF_{c}", 1, (V311,)) for d in ("FORWARD", "BACKWARD")
      for c in ("TRUE", "FALSE", "NONE", "NOT_NONE")),
    *(Op(f"POP_JUMP_IF_{c}", 1, FROM_312) for c in ("TRUE", "FALSE", "NONE", "NOT_NONE")),
    Op("JUMP_IF_TRUE_OR_POP", 1, (V311,)), Op("JUMP_IF_FALSE_OR_POP", 1, (V311,)),
    Op("GET_ITER", 1), Op("FOR_ITER", 1),
    # -- with-blocks and exceptions
    Op("BEFORE_WITH", 1), Op("RAISE_VARARGS", None), Op("PUSH_EXC_INFO", None), Op("CHECK_EXC_MATCH", None),
    Op("POP_EXCEPT", None), Op("RERAISE", None), Op("WITH_EXCEPT_START", None),
    Op("CHECK_EG_MATCH", None, unsupported="except* (exception groups) is not traced"),
    Op("PREP_RERAISE_STAR", None, (V311,), unsupported="except* (exception groups) is not traced"),
    Op("SETUP_ANNOTATIONS", None, unsupported=_CLASS_BODY),
    Op("PRINT_EXPR", None, (V311,), unsupported="only in the interactive interpreter"),
    # -- match statements (a break there resumes after it: the step runs the test as Python)
    Op("MATCH_CLASS", 3), Op("MATCH_MAPPING", 1), Op("MATCH_SEQUENCE", 1), Op("MATCH_KEYS", 2),
    *(Op(n, None, unsupported=_ASYNC) for n in ("GET_AWAITABLE", "BEFORE_ASYNC_WITH", "GET_AITER", "GET_ANEXT",
                                                 "END_ASYNC_FOR")),
    Op("ASYNC_GEN_WRAP", None, (V311,), unsupported=_ASYNC),
    Op("INTERPRETER_EXIT", None, FROM_312, unsupported="only in the interpreter's own entry frame"),
    Op("RESERVED", None, FROM_312, unsupported="reserved opcode number, never emitted"),
)

# CALL_INTRINSIC_1/2's arguments (Include/internal/pycore_intrinsics.h): index -> what Kiln
# does with it (a handler name in handlers/data.py) or, as a sentence, why it does not
INTRINSIC_1 = {
    1: "the interactive interpreter's print", 2: "from module import * (module bodies only)",
    3: "stopiteration_error", 4: _ASYNC, 5: "unary_positive", 6: "list_to_tuple",
    7: "typing constructs (PEP 695 type parameters) are not traced",
    8: "typing constructs (PEP 695 type parameters) are not traced",
    9: "typing constructs (PEP 695 type parameters) are not traced",
    10: "typing constructs (PEP 695 generic subscripts) are not traced",
    11: "typing constructs (PEP 695 type aliases) are not traced",
}
INTRINSIC_2 = {
    1: "except* (exception groups) is not traced",
    2: "typing constructs (PEP 695 type parameters) are not traced",
    3: "typing constructs (PEP 695 type parameters) are not traced",
    4: "typing constructs (PEP 695 type parameters) are not traced",
    5: "typing constructs (PEP 696 type parameter defaults) are not traced",
}


@dataclass(frozen=True)
class Layout:
    """The facts of one version that are not one opcode's row."""
    version: tuple
    # calls: 3.11/3.12 put the NULL (or the method) below the callable (or self);
    # 3.13 pushes ``callable, self_or_null, args``
    null_above_callable: bool
    precall: bool                  # CALL is preceded by PRECALL (3.11)
    call_prefix: tuple             # instructions that belong to the CALL after them
    kw_names_on_stack: bool        # CALL_KW takes the keyword names from the stack (3.13)
    # argument encodings
    attr_method_bit: bool          # LOAD_ATTR's low bit asks for a method (3.12+; 3.11 has LOAD_METHOD)
    compare_shift: int             # COMPARE_OP's argument >> this indexes dis.cmp_op
    make_function_flags: bool      # MAKE_FUNCTION's flags say what is on the stack (3.13: SET_FUNCTION_ATTRIBUTE)
    # loops: an exhausted FOR_ITER pops its iterator and continues ``loop_exit_skip``
    # instructions past its jump target (3.12 skips END_FOR, 3.13 END_FOR and POP_TOP)
    loop_exit_skip: int
    loop_exit_fill: tuple          # what a generated jump target must start with for that skip
    send_keeps_receiver: bool      # SEND leaves the sub-iterator for END_SEND (3.12+)
    # instructions that read an exact bool (3.13: the compiler puts TO_BOOL before them)
    bool_consumers: frozenset
    no_fallthrough: frozenset = field(default_factory=frozenset)
    # instructions that may push NULL: a break there cannot hand its results on
    null_pushers: frozenset = field(default_factory=frozenset)
    null_bit_ops: frozenset = field(default_factory=frozenset)   # ... when their argument's low bit is set
    # MATCH_CLASS's TypeError for a pattern ``C(...)`` whose C is no class (3.12 reworded it)
    match_class_not_a_type: str = "called match pattern must be a class"

    # -- generated code ------------------------------------------------------------------
    def call_sequence(self, callee: list, args: list) -> list:
        """Instructions (name, arg) calling the function ``callee`` pushes with the
        values ``args`` push: the NULL slot, PRECALL where the version has it."""
        null = [("PUSH_NULL", None)]
        out = callee + null if self.null_above_callable else null + callee
        out += args
        if self.precall:
            out.append(("PRECALL", len(args)))
        out.append(("CALL", len(args)))
        return out

    # -- reading the stack of a call ---------------------------------------------------------
    def split_call(self, lower, upper, is_null):
        """(callable, [self] or []) from the two slots below a call's arguments."""
        if self.null_above_callable:
            return lower, ([] if is_null(upper) else [upper])
        return (upper, []) if is_null(lower) else (lower, [upper])

    def callable_slots(self, opname: str, arg: int, depth: int):
        """(callable slot, NULL slot) of a call instruction on a stack of ``depth``; None
        for other instructions."""
        if opname == "CALL":
            top = depth - arg
        elif opname == "CALL_KW":
            top = depth - arg - 1
        elif opname == "CALL_FUNCTION_EX":
            top = depth - 1 - (arg & 1)
        else:
            return None
        lower, upper = top - 2, top - 1
        return (lower, upper) if self.null_above_callable else (upper, lower)

    def with_null(self, value, null) -> list:
        """The two slots a load that asks for a callable leaves: [NULL, value] or [value, NULL]."""
        return [value, null] if self.null_above_callable else [null, value]

    def pushes_null(self, opname: str, arg) -> bool:
        return opname in self.null_pushers or (opname in self.null_bit_ops and bool((arg or 0) & 1))

    def compare_op(self, arg: int) -> str:
        return dis.cmp_op[arg >> self.compare_shift]


_ENDS = frozenset({"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
                   "JUMP_BACKWARD_NO_INTERRUPT"})

LAYOUTS = {
    V311: Layout(V311, null_above_callable=False, precall=True, call_prefix=("PRECALL", "KW_NAMES"),
                 kw_names_on_stack=False, attr_method_bit=False, compare_shift=0, make_function_flags=True,
                 loop_exit_skip=0, loop_exit_fill=(), send_keeps_receiver=False, bool_consumers=frozenset(),
                 no_fallthrough=_ENDS, null_pushers=frozenset({"LOAD_METHOD", "PUSH_NULL"}),
                 null_bit_ops=frozenset({"LOAD_GLOBAL"}), match_class_not_a_type="called match pattern must be a type"),
    V312: Layout(V312, null_above_callable=False, precall=False, call_prefix=("KW_NAMES",),
                 kw_names_on_stack=False, attr_method_bit=True, compare_shift=4, make_function_flags=True,
                 loop_exit_skip=1, loop_exit_fill=("END_FOR",), send_keeps_receiver=True, bool_consumers=frozenset(),
                 no_fallthrough=_ENDS | {"RETURN_CONST"},
                 null_pushers=frozenset({"PUSH_NULL", "LOAD_FAST_AND_CLEAR"}),
                 null_bit_ops=frozenset({"LOAD_GLOBAL", "LOAD_ATTR", "LOAD_SUPER_ATTR"})),
    V313: Layout(V313, null_above_callable=True, precall=False, call_prefix=(),
                 kw_names_on_stack=True, attr_method_bit=True, compare_shift=5, make_function_flags=False,
                 loop_exit_skip=2, loop_exit_fill=("END_FOR", "POP_TOP"), send_keeps_receiver=True,
                 bool_consumers=frozenset({"POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "UNARY_NOT"}),
                 no_fallthrough=_ENDS | {"RETURN_CONST"},
                 null_pushers=frozenset({"PUSH_NULL", "LOAD_FAST_AND_CLEAR"}),
                 null_bit_ops=frozenset({"LOAD_GLOBAL", "LOAD_ATTR", "LOAD_SUPER_ATTR"})),
}


def rows_for(version: tuple) -> dict:
    """opname -> Op for ``version``: its rows, plus the names dis lists that never occur
    in a code object (pseudo-instructions, instrumented forms) as unsupported."""
    out = {op.name: op for op in OPS if version in op.versions}
    if version == RUNNING:
        for name, code in dis.opmap.items():
            if name in out:
                continue
            if name.startswith("INSTRUMENTED_"):
                out[name] = Op(name, None, (version,), unsupported=_INSTRUMENTED)
            elif code >= 256:   # dis numbers pseudo-instructions from 256
                out[name] = Op(name, None, (version,), unsupported=_PSEUDO)
    return out


def supported() -> bool:
    return RUNNING in LAYOUTS


LAYOUT: Layout = LAYOUTS.get(RUNNING, LAYOUTS[V311])
ROWS: dict = rows_for(RUNNING)

# which opcodes jump and which take an argument, as the running dis lists them
# (3.13 adds dis.hasjump and leaves hasjabs empty; 3.12 adds dis.hasarg)
JUMP_OPCODES = frozenset(getattr(dis, "hasjump", ())) | frozenset(dis.hasjrel) | frozenset(dis.hasjabs)
HAS_ARG = frozenset(getattr(dis, "hasarg", range(dis.HAVE_ARGUMENT, 256)))

# fast-local accesses in execution order ("r" read, "w" write or delete); the paired
# 3.13 superinstructions name two locals (dis gives them as a tuple)
_LOCAL_ACCESS = {"LOAD_FAST": "r", "LOAD_FAST_CHECK": "r", "LOAD_FAST_AND_CLEAR": "r", "STORE_FAST": "w",
                 "DELETE_FAST": "w", "LOAD_FAST_LOAD_FAST": "rr", "STORE_FAST_LOAD_FAST": "wr",
                 "STORE_FAST_STORE_FAST": "ww"}


def local_accesses(opname: str, argval) -> list:
    """[(kind, name)] of the fast locals an instruction reads and writes, in order."""
    kinds = _LOCAL_ACCESS.get(opname)
    if kinds is None:
        return []
    names = argval if len(kinds) == 2 else (argval,)
    return list(zip(kinds, names))
