"""CaptureState: everything one capture shares across the root frame and every
function inlined into it (graph, guards, side effects, the object -> Value map)."""
from __future__ import annotations

import torch

from ...exc import Unsupported
from ..basics import GraphBuilder, GuardSet
from ..hops import hop_functions
from ..basics import Namespace, ShapePolicy, SideEffects
from ..values import CellValue, TensorValue, torch_special_functions

INSTRUCTION_LIMIT = 2_000_000


class CaptureState:
    def __init__(self, fn, shapes: ShapePolicy | None = None):
        self.fn = fn
        self.functional_backend = False    # the backend may functionalize graphs: it does not declare
        # runs_graph_as_is (set by compile_frame; backends/contract.py)
        self.shapes = shapes if shapes is not None else ShapePolicy(False)
        self.ns = Namespace()
        self.guards = GuardSet(self.ns)
        self.builder = GraphBuilder()
        self.side_effects = SideEffects()
        self.fake_values: dict[int, object] = {}   # id(fake) -> TensorValue
        self.replayed: dict[int, object] = {}      # id(instance) -> ReplayedObjectValue
        self._known: dict[int, object] = {}        # id(real object) -> Value
        self._cells: dict[int, object] = {}        # id(real cell) -> CellValue
        self.keepalive: list = []
        self.instructions_run = 0
        self._initial_grad_mode = torch.is_grad_enabled()
        self._grad_mode_changed = False
        self._special = None
        self.subclass_dispatch_off = 0   # DisableTorchFunctionSubclass blocks entered (values/tensor_subclasses.py)
        self.autocast_stack: list = []   # AutocastValues entered and not yet exited, innermost last
        self.probed_iterators: set = set()   # id()s of carried iterators whose remaining items were read
        self.layer_bodies = None             # repeated layers traced once (hops/layers.LayerBodies)
        self.real_locals: dict = {}          # the frame's real arguments by name (set by compile_frame)
        self.guards.global_state()

    # -- object identity --------------------------------------------------------------
    def known_value(self, obj):
        return self._known.get(id(obj))

    def known_values(self):
        """Every Value made for a real object so far in this capture."""
        return self._known.values()

    def remember(self, obj, value):
        self._known[id(obj)] = value
        self.keepalive.append(obj)
        return value

    def cell_for(self, real_cell, source):
        cv = self._cells.get(id(real_cell))
        if cv is None:
            cv = CellValue(None, source, real_cell)
            self._cells[id(real_cell)] = cv
            self.keepalive.append(real_cell)
        return cv

    def real_value(self, source):
        """Evaluate a source against the real arguments (for rare lazy reads)."""
        # ``___fn``: the function being compiled, as the glue names it (closure sources)
        return eval(source.expr(self.ns), {**self.ns.values, "___fn": self.fn}, self.real_locals)

    # -- special functions -------------------------------------------------------------
    def special_functions(self) -> dict:
        if self._special is None:
            self._special = {**torch_special_functions(), **hop_functions()}
        return self._special

    # -- global state ----------------------------------------------------------------------
    def set_grad_mode(self, mode: bool):
        if mode != torch.is_grad_enabled():
            self.builder.raw(torch._C._set_grad_enabled, (mode,))
            torch._C._set_grad_enabled(mode)
            self._grad_mode_changed = True

    def close_autocast(self, record: bool):
        """Leave every autocast the trace entered, innermost first: in the graph too when
        ``record`` (the graph ends where the trace stopped, at a break inside the block),
        else only at trace time (a trace abandoned by an error)."""
        while self.autocast_stack:
            self.autocast_stack.pop().close(self.builder if record else None)

    def restore_global_state(self):
        """Put grad mode and autocast back after tracing (and close the graph's region)."""
        self.close_autocast(record=True)
        if torch.is_grad_enabled() != self._initial_grad_mode:
            self.builder.raw(torch._C._set_grad_enabled, (self._initial_grad_mode,))
            torch._C._set_grad_enabled(self._initial_grad_mode)

    def tick(self):
        self.instructions_run += 1
        if self.instructions_run > INSTRUCTION_LIMIT:
            raise Unsupported(f"more than {INSTRUCTION_LIMIT} instructions traced (a very long unrolled loop?)")

    def note_tensor_mutation(self, args, kwargs):
        if self.side_effects.in_hop:
            scope = self.side_effects.in_hop[-1]
            first = kwargs.get("out") if kwargs.get("out") is not None else (args[0] if args else None)
            if isinstance(first, TensorValue) and not scope.owns_tensor(first):
                raise scope.mutation_error(f"tensor {first.describe()} (in-place op)")
