"""The symbolic bytecode interpreter: frame state and the dispatch loop.

One ``Tracer`` runs one code object over Values.  The root tracer runs the frame
being compiled; calls to user functions run in child tracers (inlining) that share
the parent's CaptureState.  Instruction semantics live in ``handlers/`` as one table.
"""
from __future__ import annotations

import linecache

from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from .basics import data_dependent_expr, literal
from ..config import config
from ..exc import Unsupported
from ..runtime import caches
from .semantics import HANDLERS, operators
from .hops import layers, subgraph
from .basics import CO_ASYNC_GENERATOR, CO_COROUTINE, CO_GENERATOR, CO_ITERABLE_COROUTINE, decode, exception_table, index_at_offset
from .basics import GlobalSource, ROWS
from .values import builder, const, construction, ExceptionValue, GeneratorValue, TracedException, Value

_DECODED: dict = caches.register_dict("capture.interpreter.decoded", {})   # code -> instructions
_EXC_TABLES: dict = caches.register_dict("capture.interpreter.exception_tables", {})   # code -> its table


def exception_entries(code):
    table = _EXC_TABLES.get(code)
    if table is None:
        table = _EXC_TABLES[code] = exception_table(code)
    return table


def decoded(code):
    ins = _DECODED.get(code)
    if ins is None:
        ins = _DECODED[code] = decode(code)
    return ins


def _unsupported(reason: str):
    def handler(tx, ins):
        raise Unsupported(reason)
    return handler


class BreakHere(Exception):
    """The root frame reached the instruction chosen for a graph break."""

    def __init__(self, ins):
        super().__init__(ins.opname)
        self.ins = ins


class Tracer:
    """Runs one code object over Values; implements ``values.base.Tracer``, the interface
    through which values reach the builder, the operators and inlining."""

    break_at: int | None = None   # root frames only: break before this instruction index

    def __init__(self, state, code, f_globals: dict, f_locals: dict, cells: dict, parent=None, fn_value=None):
        self.state = state
        self.code = code
        self.f_globals = f_globals
        self.locals: dict[str, Value] = dict(f_locals)
        self.cells = dict(cells)   # name -> CellValue for cellvars and freevars
        self.parent = parent
        self.fn_value = fn_value
        self.depth = 0 if parent is None else parent.depth + 1
        self.instructions = decoded(code)
        self.stack: list[Value] = []
        self.ip = 0
        self.current = None
        self.kw_names: tuple = ()
        self.return_value: Value | None = None
        self.done = False
        self.context_stack: list = []   # active with-blocks (values with enter/exit)
        self.exc_stack: list = []       # exceptions being handled (PUSH_EXC_INFO)
        self.yields: list | None = [] if code.co_flags & CO_GENERATOR else None
        if code.co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE):
            raise Unsupported(f"coroutines and async generators ({code.co_name}) are not supported")

    # -- stack helpers -------------------------------------------------------------------
    def push(self, v: Value):
        assert isinstance(v, Value), v
        self.stack.append(v)

    def pop(self) -> Value:
        return self.stack.pop()

    def popn(self, n: int) -> list:
        if n == 0:
            return []
        out = self.stack[-n:]
        del self.stack[-n:]
        return out

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> Value:
        while not self.done:
            self.step()
        return self.return_value

    def step(self):
        ins = self.instructions[self.ip]
        self.current = ins
        if self.parent is None and ins.index == self.break_at:
            raise BreakHere(ins)
        self.ip += 1
        self.state.tick()
        handler = HANDLERS.get(ins.opname)
        if handler is None:
            row = ROWS.get(ins.opname)
            why = row.unsupported if row is not None and row.unsupported else "not supported yet"
            handler = _unsupported(f"bytecode {ins.opname}: {why}")
        try:
            try:
                handler(self, ins)
            except GuardOnDataDependentSymNode as e:
                # Python needed the value of a number or size computed from tensor data
                # (an unbacked symbol), which no guard can fix: this instruction runs as
                # Python at a break, handed the real value by the graph so far
                raise Unsupported(f"{ins.opname} needs the value of a number or size computed from tensor "
                                  f"data ({data_dependent_expr(e)})") from e
            if self.state.builder.symbolic_inputs:
                self.state.builder.note_guard_locations(self.location())
            if self.state.side_effects.unlocated:
                self.state.side_effects.locate(self.location())
        except TracedException as e:
            if not self._route_exception(ins, e):
                raise
        except Unsupported as e:
            if e.user_stack is None:
                e.user_stack = self.user_stack()
                e.depth = self.depth   # 0: the unsupported step is in the frame being compiled
            if self.parent is None and e.root_index is None:
                e.root_index = ins.index
            raise e.with_location(*self.location())
        except Exception as e:
            if not getattr(e, "_kiln_located", False):
                e._kiln_located = True
                loc, text = self.location()
                e.add_note(f"while Kiln traced {ins.opname} at {loc}: {text}")
            raise

    def jump(self, ins):
        self.ip = ins.jump_target

    def _route_exception(self, ins, exc) -> bool:
        """Jump to the handler the exception table gives for ``ins``; False if none."""
        for start, end, target, depth, lasti in exception_entries(self.code):
            if start <= ins.offset < end:
                del self.stack[depth:]
                if lasti:
                    self.push(const(ins.offset))
                self.push(ExceptionValue.caught(exc))
                self.ip = self._index_of_offset(target)
                return True
        return False

    def _index_of_offset(self, offset: int) -> int:
        try:
            return index_at_offset(self.instructions, offset)
        except KeyError:
            raise Unsupported(f"exception handler at offset {offset} not found")

    # -- locations -------------------------------------------------------------------------
    def location(self) -> tuple[str, str | None]:
        ins = self.current
        line = ins.lineno if ins is not None else self.code.co_firstlineno
        text = linecache.getline(self.code.co_filename, line) if line else ""
        return f"{self.code.co_filename}:{line}", (text.rstrip() or None)

    def user_stack(self) -> list[tuple[str, str | None]]:
        out, t = [], self
        while t is not None:
            out.append(t.location())
            t = t.parent
        return out[::-1]

    # -- names -------------------------------------------------------------------------------
    def load_global(self, name: str) -> Value:
        # the module's one store (side_effects): writes through the module object count too
        pending = self.state.side_effects.pending_global(self.f_globals, name)
        if pending is not None:
            return pending
        g = self.f_globals
        source = GlobalSource.of(g, name, self.state.fn.__globals__)
        if name in g:
            return builder.wrap(self, g[name], source)
        builtins = g.get("__builtins__", __builtins__)
        bdict = builtins if isinstance(builtins, dict) else builtins.__dict__
        if name in bdict:
            self.state.guards.add("const", None,
                                  f"{literal(name)} not in {self.state.ns.ref(g, '___g')}",
                                  f"global {name!r}{source.of_module()} does not shadow the builtin",
                                  plan=(("on", g), ("in", name, False)))
            return builder.wrap(self, bdict[name], None)
        raise Unsupported(f"name {name!r} is not defined (NameError)")

    # -- calls -----------------------------------------------------------------------------------
    def inline_call(self, fn_value, code, fn_globals, bound: dict, closure: list) -> Value:
        if self.depth + 1 > config.inline_depth_limit:
            raise Unsupported(f"call depth over {config.inline_depth_limit} while inlining {code.co_name} (recursion?)")
        cells = {}
        for name, cell in zip(code.co_freevars, closure):
            cells[name] = cell
        child = Tracer(self.state, code, fn_globals, bound, cells, parent=self, fn_value=fn_value)
        if child.yields is not None:
            return GeneratorValue(child)   # its frame runs lazily, one yield at a time
        return child.run()

    # -- the rest of the interface values call back into (values.base.Tracer) ----------
    def wrap(self, obj, source) -> Value:
        return builder.wrap(self, obj, source)

    def wrap_fake_result(self, node, result) -> Value:
        return builder.wrap_fake_result(self, node, result)

    def wrap_traced_object(self, real) -> Value:
        return builder.wrap_traced_object(self, real)

    def lower_to_real(self, value: Value) -> object:
        return construction.lower_to_real(self, value)

    def construct(self, cls_value, args: list, kwargs: dict) -> Value:
        return construction.construct(self, cls_value, args, kwargs)

    def apply_operator(self, fn, *args: Value) -> Value:
        return operators.apply_operator(self, fn, *args)

    def call_repeated_layer(self, module_value, args: list, kwargs: dict):
        return layers.call_repeated_layer(self, module_value, args, kwargs)

    def trace_subgraph(self, fn_value, args: list, op: str, prelift=()):
        return subgraph.trace_subgraph(self, fn_value, args, op, prelift)
