"""Continuation and step functions for graph breaks.

At a break before instruction ``k`` of a frame, the glue calls a *step function*:
a copy of the frame's code whose prologue pushes the saved stack and jumps to
``k``.  Instruction ``k`` then runs as ordinary Python, with the frame's exception
table intact.  Where ``k`` would continue (its fall-through and/or its jump target)
the step function instead calls a *continuation*: another copy of the code whose
prologue restores the stack and jumps to that offset.  Continuations are wrapped
with ``kiln.compile`` and so are captured on their first call and cached like any
frame.  Stack slots holding a NULL (the calling convention's, or a comprehension's
saved unbound name) are recreated with PUSH_NULL.

How generated code must be laid out for the running version (the call sequence and
its NULL slot, what a loop's exit target holds, what a conditional jump reads) is the
version table's (``opcodes.Layout``); the code objects here are built with the
``bytecode`` package.
"""
from __future__ import annotations

import types
from dataclasses import dataclass

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label

from ...exc import Unsupported
from ...runtime import caches
from ..basics import exception_table, LAYOUT, local_accesses, stack_inputs


# -- liveness -------------------------------------------------------------------------------


def live_locals(code, instructions) -> list[frozenset]:
    """Names of fast locals live on entry to each instruction (backward dataflow)."""
    n = len(instructions)
    offsets = sorted(ins.offset for ins in instructions)
    by_offset = {ins.offset: ins.index for ins in instructions}
    handlers = exception_table(code)
    succs: list[list[int]] = []
    for ins in instructions:
        s = []
        if ins.opname not in LAYOUT.no_fallthrough and ins.index + 1 < n:
            s.append(ins.index + 1)
        if ins.jump_target is not None:
            s.append(ins.jump_target)
        for start, end, target, _depth, _lasti in handlers:
            if start <= ins.offset < end:
                later = [o for o in offsets if o >= target]
                if later:
                    s.append(by_offset[later[0]])
        succs.append(s)
    live_in = [frozenset()] * n
    changed = True
    while changed:
        changed = False
        for ins in reversed(instructions):
            out = frozenset().union(*(live_in[j] for j in succs[ins.index])) if succs[ins.index] else frozenset()
            new = out
            for kind, name in reversed(local_accesses(ins.opname, ins.argval)):
                new = new | {name} if kind == "r" else new - {name}
            if new != live_in[ins.index]:
                live_in[ins.index] = new
                changed = True
    return live_in


# -- code construction --------------------------------------------------------------------------


@dataclass(frozen=True)
class Resumption:
    """Where a continuation resumes: instruction index, NULL layout of the stack, locals.

    ``loops``: the stack slots of the iterators of the ``for`` loops around the resume
    point, innermost first.  ``exhausted``: how many of them (innermost first) have run
    out when this copy is entered; the last iteration of a loop resumes in a copy of its
    own (a separate code object, so a separate cache), see ``runtime.steps.LoopExitPicker``.
    """
    index: int
    stack: tuple      # True for a value slot, False for NULL
    names: tuple      # live locals passed as parameters
    self_first: bool = False  # names[0] (a method's self) comes first: zero-argument super() reads slot 0
    loops: tuple = ()
    exhausted: int = 0

    def param(self, slot: int) -> str:
        return f"___stack{slot}"

    def at_exit(self, exhausted: int) -> "Resumption":
        return Resumption(self.index, self.stack, self.names, self.self_first, self.loops, exhausted)

    def params(self) -> list[str]:
        return self.order([self.param(i) for i, is_value in enumerate(self.stack) if is_value], list(self.names))

    def order(self, stack: list, names: list) -> list:
        """The parameters (or arguments) for the stack slots and the locals, in order."""
        return names[:1] + stack + names[1:] if self.self_first else stack + names


def _prepared(code):
    """(bytecode list, positions of real instructions, index of the first instruction after RESUME)."""
    bc = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)  # see _build
    positions = [i for i, x in enumerate(bc) if isinstance(x, Instr)]
    resume_pos = next(p for p in positions if bc[p].name == "RESUME")
    return bc, positions, resume_pos


def _build(template, items: list, jump_to_start: tuple, prologue: list, resume_pos: int, params: list[str],
           code, name: str, stub_stack: int = 0, origin: dict | None = None, unique: str = "",
           root_name: str | None = None) -> types.CodeType:
    """Assemble ``items`` (with a label inserted before ``jump_to_start[0]``) into a code object.

    The frame's cell variables become free variables of the new code: the glue passes
    the frame's cells in the closure, so inner functions made before and after the
    break share them.
    """
    target_item, label = jump_to_start
    resume_item = items[resume_pos]
    # which instruction of ``code`` each instruction of the new code comes from
    origin = dict(origin) if origin is not None else {
        id(x): i for i, x in enumerate(x for x in items if isinstance(x, Instr))}
    out = []
    for item in items:
        if item is target_item:
            out.append(label)
        out.append(item)
        if item is resume_item:
            out.extend(prologue)
    freevars = list(template.freevars)
    if template.cellvars:
        freevars += list(template.cellvars)
        converted = [Instr("COPY_FREE_VARS", len(freevars))]
        for item in out:
            if isinstance(item, Instr):
                if item.name in ("MAKE_CELL", "COPY_FREE_VARS"):
                    continue
                if isinstance(item.arg, CellVar):
                    old = item
                    item = Instr(item.name, FreeVar(item.arg.name), location=item.location)
                    if id(old) in origin:
                        origin[id(item)] = origin[id(old)]
            converted.append(item)
        out = converted
    new = Bytecode(out)
    for attr in ("filename", "first_lineno"):
        setattr(new, attr, getattr(template, attr))
    new.freevars = freevars
    new.cellvars = []
    # named after the user's function, so a traceback through it reads as eager's (``in f``,
    # at the user's file:line); the qualname says where in it (``f, from line 40``), for
    # explain, the report and the trace
    root = root_code(code)
    new.name = root.co_name
    new.qualname = f"{root_name or getattr(root, 'co_qualname', root.co_name)}, {name}"
    # code objects compare equal by their code and names (not the qualname): ``unique``
    # (which resume point) in the first constant keeps two continuations of one frame
    # apart as keys of Kiln's caches
    new.docstring = f"kiln: {new.qualname} [{unique}]"
    new.argnames = list(params)
    new.argcount = len(params)
    new.posonlyargcount = 0
    new.kwonlyargcount = 0
    new.flags = code.co_flags & ~(0x04 | 0x08)  # no *args / **kwargs: everything is passed positionally
    # The prologue jumps past the try-blocks' starts, so a flow analysis from the entry
    # misses them (depth 32768, handlers left out of the stack size) or fails (negative
    # sizes): keep the frame's own exception-table depths and stack size (the prologue
    # pushes a stack the frame had at that point), plus what the step's stubs push.
    result = consistent_linetable(new.to_code(stacksize=max(code.co_stacksize, stub_stack),
                                              compute_exception_stack_depths=False))
    _ORIGINS[result] = (code, [origin.get(id(x)) for x in out if isinstance(x, Instr)])
    if root_name:
        _ROOT_LABELS[result] = root_name
    return result


WRAPPER_MARK = " (wrapper)"


def entry_base(fn) -> str:
    """What an entry of ``fn``'s frame is named after (graph, glue and guard names): the
    wrapped function's qualname for a wrapper and its continuations (``BertModel.forward``),
    else the code's name."""
    code = fn.__code__
    label = _ROOT_LABELS.get(code) or wrapped_name(fn)
    return label.removesuffix(WRAPPER_MARK) if label else code.co_name


def wrapped_name(fn) -> str | None:
    """The user's name for a decorator's wrapper: ``functools.wraps`` gives the wrapper the
    decorated function's ``__qualname__`` (and ``__wrapped__``), while its code keeps the
    decorator's (``merge_with_config_defaults.<locals>.wrapper``).  None for other functions."""
    code = getattr(fn, "__code__", None)
    qualname = getattr(fn, "__qualname__", None)
    if code is None or not isinstance(qualname, str) or getattr(fn, "__wrapped__", None) is None:
        return None
    return f"{qualname}{WRAPPER_MARK}" if qualname != getattr(code, "co_qualname", code.co_name) else None


def root_label(fn) -> str:
    """What the frames made from ``fn``'s frame are named after: the user's function that
    frame belongs to (``BertModel.forward (wrapper)`` for a wrapper, the code's qualname
    otherwise), the same for every continuation made from it."""
    code = fn.__code__
    return _ROOT_LABELS.get(code) or wrapped_name(fn) or getattr(root_code(code), "co_qualname", code.co_name)


def frame_label(fn) -> str:
    """The user's name for the frame ``fn`` runs (explain, the report, the trace, Kiln's
    messages): a continuation's qualname (``f, from line 40``), a wrapper's decorated
    function, or the code's qualname."""
    code = fn.__code__
    if code in _ORIGINS:
        return getattr(code, "co_qualname", code.co_name)
    return wrapped_name(fn) or getattr(code, "co_qualname", code.co_name)


# generated code object -> (the original code, original instruction index per new instruction);
# not a cache (a continuation in use must still map back to its frame), so kept across kiln.reset()
_ORIGINS: dict = {}
# generated code object -> the name of the user's function its frame belongs to, where that is
# not its root code's qualname (a decorator's wrapper: ``wrapped_name``); kept like _ORIGINS
_ROOT_LABELS: dict = {}


def root_code(code):
    """The user's code object a generated one (a continuation, a step, either made from
    another) was made from; ``code`` itself if it is not generated."""
    while code in _ORIGINS:
        code = _ORIGINS[code][0]
    return code


def _line_of(instr) -> str:
    line = getattr(getattr(instr, "location", None), "lineno", None)
    return f"line {line}" if line is not None else "a break"


def origin_of(code):
    """(original code, index map) for a generated continuation; (code, None) otherwise."""
    return _ORIGINS.get(code, (code, None))


def consistent_linetable(code: types.CodeType) -> types.CodeType:
    """Re-encode the line table so it covers exactly the code's units.

    The ``bytecode`` package can emit a 3.11 location table covering a few more code
    units than the code has (even on a plain round trip of some functions); CPython
    then writes past the end of its line array when a profiler or tracer is active
    (heap corruption).  This writes a table of line numbers only ("no columns" entries).
    """
    units = len(code.co_code) // 2
    lines = [pos[0] for pos in code.co_positions()][:units]
    lines += [lines[-1] if lines else None] * (units - len(lines))
    out = bytearray()
    prev = code.co_firstlineno
    i = 0
    while i < units:
        line = lines[i]
        n = 1
        while i + n < units and n < 8 and lines[i + n] == line:
            n += 1
        if line is None:
            out.append(0x80 | (15 << 3) | (n - 1))
        else:
            out.append(0x80 | (13 << 3) | (n - 1))
            delta = line - prev
            v = ((-delta) << 1) | 1 if delta < 0 else delta << 1
            while v >= 64:
                out.append(0x40 | (v & 63))
                v >>= 6
            out.append(v)
            prev = line
        i += n
    return code.replace(co_linetable=bytes(out))


def _prologue(resumption: Resumption, jump_to: Label, skip: int = 0) -> list:
    """Push the saved stack (from slot ``skip`` up) and jump to the resume point."""
    out = []
    for i, is_value in enumerate(resumption.stack):
        if i < skip:
            continue
        out.append(Instr("LOAD_FAST", f"___stack{i}") if is_value else Instr("PUSH_NULL"))
    out.append(Instr("JUMP_FORWARD", jump_to))
    return out


# (code, resumption) -> continuation code: one code object per resume point, so that every
# break there shares its cache; kept across kiln.reset(), as _ORIGINS is
_CONTINUATIONS: dict = {}


def continuation_code(code, resumption: Resumption, label: str | None = None) -> types.CodeType:
    """The code of a function that resumes ``code`` at ``resumption``; its qualname starts
    with ``label`` (``root_label``: the user's function) when given."""
    key = (code, resumption, label)
    hit = _CONTINUATIONS.get(key)
    if hit is None:
        bc, positions, resume_pos = _prepared(code)
        start = Label()
        name = f"from {_line_of(bc[positions[resumption.index]])}" + \
            (f" (loop exit {resumption.exhausted})" if resumption.exhausted else "")
        unique = f"resume_at_{resumption.index}" + (f"_exit{resumption.exhausted}" if resumption.exhausted else "")
        hit = _build(bc, list(bc), (bc[positions[resumption.index]], start), _prologue(resumption, start),
                     resume_pos, resumption.params(), code, name, unique=unique, root_name=label)
        _CONTINUATIONS[key] = hit
    return hit


# continuation code -> names of its parameters holding iterators whose remaining items
# some captured entry read (absent: never captured)
_PROBED: dict = {}


def note_probed(code, names) -> None:
    """Record, after a capture of a generated ``code``, which iterator parameters it read."""
    if code in _ORIGINS:
        _PROBED.setdefault(code, set()).update(names)


def probed(code) -> set | None:
    """Iterator parameters whose items ``code``'s entries read; None before any capture."""
    return _PROBED.get(code)


def forget_probes() -> None:
    """``kiln.reset``: entries are gone, so is what they read."""
    _PROBED.clear()


caches.register("capture.frames.resume.probed_iterators", forget_probes, _PROBED.__len__)


def step_code(code, at: Resumption, untouched: int, exits: list, in_try: bool = True) -> types.CodeType:
    """A function that runs instruction ``at.index`` as Python, then calls a continuation.

    ``untouched`` is how many bottom stack slots the instruction leaves alone;
    ``exits`` lists (kind, Resumption) with kind "fall" or "jump".  The step function
    takes the continuation to call for each exit as its leading parameters
    (``___cont0``...), so one code object serves every closure.
    """
    bc, positions, resume_pos = _prepared(code)
    pos = positions[at.index]
    instr = bc[pos]
    labels, stubs, stub_stack = {}, [], 0
    for n, (kind, res) in enumerate(exits):
        label = Label()
        labels[kind] = label
        produced = len(res.stack) - untouched
        temps = [f"___res{n}_{j}" for j in range(produced)]
        stubs.append(label)
        if kind == "jump" and instr.name == "FOR_ITER":
            # an exhausted FOR_ITER skips what the compiler puts at a loop's end (3.12+)
            stubs += [Instr(fill) for fill in LAYOUT.loop_exit_fill]
        stubs += [Instr("STORE_FAST", t) for t in reversed(temps)]
        kept = len(res.stack) - produced
        args = [f"___stack{i}" for i, v in enumerate(res.stack[:kept]) if v]
        args = res.order(args + temps, list(res.names))
        cont = [("LOAD_FAST", f"___cont{n}")]
        if res.loops:
            # ``___cont{n}`` is a picker: given the loops' iterators, it returns the continuation
            iterators = [f"___stack{s}" if s < kept else temps[s - kept] for s in res.loops]
            cont = LAYOUT.call_sequence(cont, [("LOAD_FAST", it) for it in iterators])
        seq = LAYOUT.call_sequence(cont, [("LOAD_FAST", a) for a in args]) + [("RETURN_VALUE", None)]
        stubs += [Instr(op) if arg is None else Instr(op, arg) for op, arg in seq]
        stub_stack = max(stub_stack, len(at.stack) + produced + 3 + max(len(args), len(res.loops)))
    name = instr.name
    arg = instr.arg
    if "jump" in labels:
        arg = labels["jump"]
        name = name.replace("BACKWARD", "FORWARD")  # the stubs come last
    new_instr = Instr(name, arg, location=instr.location)
    items = list(bc)
    items[pos] = new_instr
    first = new_instr
    if name in LAYOUT.bool_consumers:
        # 3.13's conditional jumps and ``not`` read an exact bool: the frame's TO_BOOL was traced
        # (Kiln keeps the value itself, see handlers/stack.py), so the step converts it
        first = Instr("TO_BOOL", location=instr.location)
        items[pos:pos] = [first]
        pos += 1
    tail = [Instr("JUMP_FORWARD", labels["fall"])] if "fall" in labels else []
    items[pos + 1:pos + 1] = tail
    items.extend(stubs)
    # 3.11/3.12 pass keyword names to CALL through a preceding KW_NAMES (3.11's PRECALL
    # sits between them): start there so the call sees its keywords
    back = pos - 1
    while new_instr.name == "CALL" and back >= 0 and isinstance(items[back], Instr) \
            and items[back].name in LAYOUT.call_prefix:
        first, back = items[back], back - 1
    start = Label()
    params = [f"___cont{n}" for n in range(len(exits))] + at.params()
    # the step pushes only what the instruction consumes (the rest goes straight to the
    # continuation), so it returns with an empty stack; inside a try block the handler
    # may need the lower slots, so there everything is pushed
    skip = 0 if in_try else untouched
    origin = {id(bc[p]): i for i, p in enumerate(positions)}
    origin[id(new_instr)] = origin[id(first)] = at.index
    return _build(bc, items, (first, start), _prologue(at, start, skip), resume_pos, params, code,
                  f"at {_line_of(instr)}", stub_stack, origin, unique=f"step_at_{at.index}")


def check_resumable(code, ins) -> None:
    if code.co_flags & 0x20:
        raise Unsupported(f"{code.co_name} is a generator; Kiln cannot resume it after a graph break")
    # a result that may be NULL cannot be handed on; an instruction whose inputs the table
    # does not count (returns, yields, a call's KW_NAMES/PRECALL) has nothing to resume
    if LAYOUT.pushes_null(ins.opname, ins.arg) or stack_inputs(ins) is None:
        raise Unsupported(f"cannot resume after {ins.opname}")
