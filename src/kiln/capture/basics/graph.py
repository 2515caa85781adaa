"""GraphBuilder: the fx.Graph being captured plus fake tensors for its metadata.

Graph inputs are added lazily, the first time traced code touches a tensor that
lives outside the frame.  Every op is run on fake tensors as it is recorded, so
shapes, dtypes and ``requires_grad`` are known while tracing without touching data.

Sizes can be symbolic: the fake mode owns a ``ShapeEnv`` (torch's symbolic-shape
machinery).  An input tensor whose dimensions are marked dynamic gets a fake with
``SymInt`` sizes, a Python int input marked dynamic becomes a ``SymInt`` placeholder,
and ops propagate the symbols.  Whatever the trace decides about a symbol
(``if n > 4``, a specialisation to a constant) is recorded by the ShapeEnv as a guard,
which ``shape_guards`` renders for Kiln's guard function.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import operator
import re
from typing import Any

import torch
import torch.fx
from torch._guards import GuardSource, Source as TorchSource
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
)
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    GuardOnDataDependentSymNode,
    ShapeEnv,
    StatelessSymbolicContext,
    compute_unbacked_bindings,
    has_free_unbacked_symbols,
)
import sympy
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten
from torch.utils._sympy.numbers import int_oo
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts

from ...exc import Unsupported
from .constant_values import settle_constant_symbols
from ...fx_ops import count_ops
from ...backends import DrawWatcher

SYMBOLIC_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


class _MetaErrorsKilnHandles(logging.Filter):
    """Drops torch's log of a meta kernel that raised (``failed while attempting to run
    meta for aten.mm.default`` and its traceback, at ERROR level) while Kiln runs an op on
    fakes: Kiln handles that error itself (a graph break, after which the op raises
    eager's error at the user's line; or a clear ``Unsupported``), so the log is only
    noise before the real error.  Outside Kiln's op runs the log is left alone."""

    active = 0

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.active and str(record.msg).startswith("failed while attempting to run meta"))


_QUIET_META = _MetaErrorsKilnHandles()
logging.getLogger("torch._subclasses.fake_tensor").addFilter(_QUIET_META)


@dataclasses.dataclass(frozen=True)
class ShapeSource(TorchSource):
    """Names one symbolic graph input for the ShapeEnv: ``{s<index>}``, a placeholder that
    ``GraphBuilder.shape_guards`` replaces with the input's expression in Kiln's guard
    function.  (torch's ``Source`` is the interface the ShapeEnv reads names from.)"""

    index: int

    @property
    def _name_template(self) -> str:
        return f"{{s{self.index}}}"

    @functools.cached_property
    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL


@dataclasses.dataclass
class SymbolicInput:
    """A graph input with symbols in it: a tensor with dynamic dimensions, or a Python int."""
    source: Any          # Kiln's source of the input
    example: Any         # its fake tensor or SymInt
    marked: tuple = ()   # dimensions the user marked dynamic (must stay symbolic)
    symbolic: frozenset = frozenset()   # its size/stride expressions that were symbols when made


class GraphBuilder:
    def __init__(self):
        self.graph = torch.fx.Graph()
        # sizes that depend on tensor data (nonzero, boolean masks, unique) are unbacked symbols;
        # numbers read from tensors (item()) too, but only where Kiln asks for one
        # (``values.tensor.item_value``): an op's own internal item() stays a refusal
        self.shape_env = ShapeEnv(allow_scalar_outputs=False, allow_dynamic_output_shape_ops=True)
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=self.shape_env)
        self.placeholders: list[tuple[torch.fx.Node, Any]] = []  # (node, source)
        self.example_inputs: list = []    # real tensors; SymInts for symbolic int inputs
        self.symbolic_inputs: list[SymbolicInput] = []
        self._names: set[str] = set()
        self._first_output_node = None
        self.guard_locations: list = []   # user location at which each ShapeEnv guard was added
        self.attrs: dict = {}   # name -> subgraph GraphModule (bodies of higher-order operators)
        self.size_symbols: dict = {}   # size symbol -> (node, SymInt) reading it, for bodies (hops/subgraph.py)
        self.data_dependent = False   # the graph computes sizes or numbers from tensor data (unbacked symbols)

    @property
    def is_dynamic(self) -> bool:
        return bool(self.symbolic_inputs)

    # -- symbolic sizes --------------------------------------------------------------
    def note_guard_locations(self, location) -> None:
        """Attribute the ShapeEnv guards added since the last call to ``location`` (the
        user's ``(file:line, source line)`` being traced)."""
        missing = len(self.shape_env.guards) - len(self.guard_locations)
        if missing > 0:
            self.guard_locations.extend([location] * missing)

    def shape_guards(self) -> list[tuple[list, str, str]]:
        """What the trace assumed about symbolic sizes, for Kiln's guard function: a list of
        (sources of the inputs it reads, a Python check reading ``{v}``, ``{v1}``... for
        them, a description).  Rendered by torch's ShapeEnv, including the range facts
        (``2 <= x.size()[0]`` from the 0/1 specialisation) and symbolic strides."""
        if not self.symbolic_inputs:
            return []
        examples = [s.example for s in self.symbolic_inputs]
        names = [ShapeSource(i) for i in range(len(examples))]
        # ignore_static=False: a dimension made symbolic and then specialised by the trace
        # (``int(x.shape[0])``) is a number by now, and only this equality keeps it checked;
        # equalities on dimensions that were static from the start are the tensor guard's
        python, verbose = self.shape_env.produce_guards_verbose(examples, names, source_ref=lambda src: src.name,
                                                                ignore_static=False)
        symbolic = frozenset().union(*(s.symbolic for s in self.symbolic_inputs))
        out = []
        for check, text in zip(python.exprs, verbose.exprs):
            fixed = re.fullmatch(r"(\{s\d+\}\.(?:size|stride|storage_offset)\(\)(?:\[\d+\])?) == -?\d+", check)
            if fixed and fixed.group(1) not in symbolic:
                continue
            order = list(dict.fromkeys(int(m) for m in re.findall(r"\{s(\d+)\}", check)))
            if not order:
                continue
            slots = {f"{{s{k}}}": ("{v}" if j == 0 else f"{{v{j}}}") for j, k in enumerate(order)}
            described = text.split("  # ", 1)[0]
            for k in order:
                described = described.replace(f"{{s{k}}}", self.symbolic_inputs[k].source.describe())
            decided = self._user_lines(order)
            if decided:
                described += f" (assumed at {', '.join(decided)})"
            check = re.sub(r"\{s\d+\}", lambda m: slots[m.group(0)], check)
            out.append(([self.symbolic_inputs[k].source for k in order], check, described))
        return out

    def _user_lines(self, inputs: list) -> list:
        """The user lines whose traced code made the ShapeEnv guard the symbols of these inputs."""
        symbols = set()
        for k in inputs:
            example = self.symbolic_inputs[k].example
            for size in (example.shape if isinstance(example, torch.Tensor) else [example]):
                if isinstance(size, torch.SymInt):
                    symbols |= size.node.expr.free_symbols
        lines = []
        for g, where in zip(self.shape_env.guards, self.guard_locations):
            if where is not None and g.expr.free_symbols & symbols and where[0] not in lines:
                lines.append(where[0])
        return lines[:3]

    def specialised_marks(self) -> list[tuple[str, int, object]]:
        """Dimensions the user marked dynamic that the trace made constant anyway:
        (input description, dimension, user location that forced it or None)."""
        out = []
        for inp in self.symbolic_inputs:
            for dim in inp.marked:
                size = inp.example.shape[dim]
                if not isinstance(size, torch.SymInt):
                    out.append((inp.source.describe(), dim, None))
                    continue
                symbol = getattr(size.node, "_expr", size.node.expr)   # as created, before replacements
                if self.shape_env.simplify(symbol).is_number:
                    out.append((inp.source.describe(), dim, self._location_fixing(symbol)))
        return out

    def _location_fixing(self, expr):
        symbols = expr.free_symbols
        for i, g in enumerate(self.shape_env.guards):
            if g.expr.free_symbols & symbols and getattr(g.expr, "is_Relational", False) \
                    and type(g.expr).__name__ == "Equality":
                return self.guard_locations[i] if i < len(self.guard_locations) else None
        return None

    # -- inputs ---------------------------------------------------------------------
    def add_input(self, real: torch.Tensor, source, hint: str, dynamic_dims=(), marked=()) \
            -> tuple[torch.fx.Node, FakeTensor]:
        """A tensor input; ``dynamic_dims`` get symbolic sizes (0/1 still specialise)."""
        node = self._placeholder(hint)
        if dynamic_dims and real.dim():
            sizes = [DimDynamic.DYNAMIC if i in dynamic_dims else DimDynamic.STATIC for i in range(real.dim())]
            fake = self.fake_mode.from_tensor(
                real, symbolic_context=StatelessSymbolicContext(dynamic_sizes=sizes),
                source=ShapeSource(len(self.symbolic_inputs)))
            for dim, (low, high) in (marked or {}).items():
                size = fake.shape[dim]
                if isinstance(size, torch.SymInt) and (low is not None or high is not None):
                    # an open end is the size's own bound (the range is intersected with it)
                    self.shape_env.constrain_symbol_range(size.node.expr, compiler_min=0 if low is None else low,
                                                          compiler_max=int_oo if high is None else high)
            if any(isinstance(s, torch.SymInt) for s in fake.shape):
                k = len(self.symbolic_inputs)
                made = [(f"size()[{i}]", d) for i, d in enumerate(fake.shape)] + \
                       [(f"stride()[{i}]", d) for i, d in enumerate(fake.stride())] + \
                       [("storage_offset()", fake.storage_offset())]
                symbolic = frozenset(f"{{s{k}}}.{what}" for what, d in made if isinstance(d, torch.SymInt))
                self.symbolic_inputs.append(SymbolicInput(source, fake, tuple(marked or ()), symbolic))
        else:
            fake = self.fake_mode.from_tensor(real, static_shapes=True)
        node.meta["example_value"] = fake
        # moved by in-place ops: the graph mutates it (inference tensors have no version)
        node.meta["kiln_version"] = None if fake.is_inference() else fake._version
        self.placeholders.append((node, source))
        self.example_inputs.append(real)
        return node, fake

    def add_symint_input(self, value: int, source, hint: str) -> tuple[torch.fx.Node, torch.SymInt]:
        """A Python int input that is symbolic: a ``SymInt`` placeholder (the glue passes the int)."""
        node = self._placeholder(hint)
        shape_source = ShapeSource(len(self.symbolic_inputs))
        env = self.shape_env
        sym = env.create_symintnode(env.create_symbol(value, shape_source, positive=None), hint=value,
                                    source=shape_source)
        node.meta["example_value"] = sym
        if isinstance(sym, torch.SymInt):
            self.symbolic_inputs.append(SymbolicInput(source, sym))
        self.placeholders.append((node, source))
        self.example_inputs.append(sym)
        return node, sym

    def _placeholder(self, hint: str) -> torch.fx.Node:
        last = self.placeholders[-1][0] if self.placeholders else None
        return insert_placeholder(self.graph, self._unique(placeholder_name(hint)), after=last)

    def lift(self, node: torch.fx.Node, fake) -> torch.fx.Node:
        """The node standing for ``node`` in this graph; a subgraph builder turns a node of
        an enclosing graph into an input (``hops/subgraph.py``)."""
        return node

    def add_attr(self, gm, hint: str) -> torch.fx.Node:
        """A ``get_attr`` node for a subgraph module attached to this graph."""
        name = self._unique(placeholder_name(hint))
        self.attrs[name] = gm
        node = self.graph.get_attr(name)
        node.meta["example_value"] = gm
        return node

    def _unique(self, base: str) -> str:
        name, i = base, 1
        while name in self._names:
            name = f"{base}_{i}"
            i += 1
        self._names.add(name)
        return name

    # -- ops ------------------------------------------------------------------------
    def call(self, kind: str, target, node_args: tuple, node_kwargs: dict, fake_args: tuple, fake_kwargs: dict):
        """Record one op and run it on fakes; returns (node, fake_result)."""
        try:
            return self._call(kind, target, node_args, node_kwargs, fake_args, fake_kwargs)
        except Unsupported as e:
            # a number read from data that is a constant of the trace: settled, asked again
            settled = _settled_args(self, e, (node_args, node_kwargs, fake_args, fake_kwargs))
            if settled is None:
                raise
        try:
            return self._call(kind, target, *settled)
        except Unsupported as e:
            # asked again after settling (a guard, then a C function that needs a Python number)
            again = _settled_args(self, e, settled)
            if again is None:
                raise
        return self._call(kind, target, *again)

    def settle(self, error: GuardOnDataDependentSymNode) -> bool:
        """Whether the unbacked symbols ``error`` asked about were read from constant data
        and are now known (capture/basics/constant_values.py): the question can be asked again."""
        return settle_constant_symbols(self.graph, getattr(error, "cond", None))

    def _call(self, kind, target, node_args, node_kwargs, fake_args, fake_kwargs):
        node = self.graph.create_node(kind, target, node_args, node_kwargs)
        _QUIET_META.active += 1
        try:
            with self.fake_mode, DrawWatcher.of(self.fake_mode).watching() as draws:   # see random_draws.py
                if kind == "call_method":
                    self_arg, *rest = fake_args
                    result = getattr(self_arg, target)(*rest, **fake_kwargs)
                else:
                    result = target(*fake_args, **fake_kwargs)
        except (DataDependentOutputException, DynamicOutputShapeException) as e:
            self.graph.erase_node(node)
            raise Unsupported(f"{_target_name(target)} produces a value that depends on tensor data ({type(e).__name__})") from e
        except GuardOnDataDependentSymNode as e:
            self.graph.erase_node(node)
            raise Unsupported(f"{_target_name(target)} needs the exact value of a size or number computed from "
                              f"tensor data ({data_dependent_expr(e)})") from e
        except Unsupported:
            self.graph.erase_node(node)
            raise
        except Exception as e:
            self.graph.erase_node(node)
            raise Unsupported(f"{_target_name(target)} failed while Kiln propagated tensor metadata: "
                              f"{type(e).__name__}: {e}") from e
        finally:
            _QUIET_META.active -= 1
        node.meta["example_value"] = result
        node.meta["kiln_draws"] = tuple(draws)   # eager's draws: see random_draws.py
        # a size or number this op computes from tensor data is a new unbacked symbol, bound
        # to this node as torch's tracers bind them (the backends' retrace needs the binding)
        bindings = compute_unbacked_bindings(self.shape_env, result)
        if bindings:
            node.meta["unbacked_bindings"] = bindings
            self.data_dependent = True
        return node, result

    def insert_runtime_asserts(self, gm) -> None:
        """What the trace assumed about unbacked symbols (``torch._check``, a size being
        non-negative) becomes run-time assertions in the graph, as torch.compile does:
        facts about tensor data cannot be guards, so the graph checks them as it runs."""
        if self.data_dependent and self.shape_env.deferred_runtime_asserts:
            insert_deferred_runtime_asserts(gm, self.shape_env, "kiln")
            gm.recompile()

    def getitem(self, node: torch.fx.Node, index: int, fake):
        n = self.graph.call_function(operator.getitem, (node, index))
        n.meta["example_value"] = fake
        return n

    def raw(self, target, args=()):
        """A call recorded for its side effect only (e.g. grad-mode switches)."""
        return self.graph.call_function(target, args)

    def output(self, nodes: list[torch.fx.Node]):
        self.graph.output(tuple(nodes))

    def count_ops(self) -> int:
        return count_ops(self.graph)


def _settled_args(builder, error: Unsupported, args: tuple):
    """``args`` (node args and kwargs, then their fakes) with each number read from
    constant data replaced by its value, once the ShapeEnv knows it (an op that needs a
    Python bool, as ``scaled_dot_product_attention``'s ``is_causal`` does, is then given
    one); None when the op failed for another reason or a number is not constant."""
    cause = error.__cause__
    symbolic = [v for v in tree_flatten(args[2:])[0] if isinstance(v, SYMBOLIC_TYPES)]
    # numbers settled earlier in the trace are constants now, whose expression has no symbols
    settled = [v for v in symbolic if not v.node.expr.free_symbols]
    unbacked = [v for v in symbolic if has_unbacked(v)]
    if isinstance(cause, GuardOnDataDependentSymNode):
        expr = getattr(cause, "cond", None)
    elif unbacked:
        expr = sympy.And(*[v.node.expr for v in unbacked]) if len(unbacked) > 1 else unbacked[0].node.expr
    else:
        expr = None
    if expr is not None and not settle_constant_symbols(builder.graph, expr):
        return None
    flat_fakes = settled + unbacked
    if not flat_fakes:   # the guard asked about a settled number inside the op: ask again
        return args if expr is not None else None
    nodes, spec = tree_flatten(args[:2])
    fakes, fake_spec = tree_flatten(args[2:])
    if len(nodes) != len(fakes):
        return None
    for i, fake in enumerate(fakes):
        if any(fake is f for f in flat_fakes):
            try:
                nodes[i] = fakes[i] = _SPECIALISE[type(fake)](fake)   # now known to the ShapeEnv
            except GuardOnDataDependentSymNode:
                pass
    return (*tree_unflatten(nodes, spec), *tree_unflatten(fakes, fake_spec))


_SPECIALISE = {torch.SymBool: bool, torch.SymInt: int, torch.SymFloat: float}


def placeholder_name(hint: str) -> str:
    """A valid, readable fx placeholder name made from a source description."""
    out = "".join(c if c.isalnum() else "_" for c in hint).strip("_") or "input"
    if out[0].isdigit():
        out = "_" + out
    return out.lower() if out.isupper() else out


def _target_name(target) -> str:
    if isinstance(target, str):
        return f"Tensor.{target}"
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", None) or repr(target)
    return f"{mod}.{name}" if mod and not mod.startswith("_") else name


def insert_placeholder(graph: torch.fx.Graph, name: str, after: torch.fx.Node | None) -> torch.fx.Node:
    """A placeholder after ``after`` (the last one so far), or before every other node:
    placeholders come first, in the order inputs were added."""
    if after is not None:
        with graph.inserting_after(after):
            return graph.placeholder(name)
    first = next(iter(graph.nodes), None)
    if first is None:
        return graph.placeholder(name)
    with graph.inserting_before(first):
        return graph.placeholder(name)


def data_dependent_expr(error: GuardOnDataDependentSymNode) -> str:
    """The expression a data-dependent guard was asked about, for messages."""
    expr = getattr(error, "cond", None)
    return f"`{expr}`" if expr is not None else "an unbacked symbol"


def has_unbacked(value) -> bool:
    """Whether a symbolic number (or a tensor's sizes) involves a value read from tensor data."""
    return has_free_unbacked_symbols(value)


def contains_fake(x) -> bool:
    """Whether an op's result holds anything the graph must compute: a fake tensor, or a
    symbolic int/float/bool (a size that varies between calls)."""
    found = []
    tree_map(lambda v: found.append(1) if isinstance(v, (FakeTensor, *SYMBOLIC_TYPES))
             or is_traceable_wrapper_subclass(v) else None, x)   # (a wrapper subclass of fakes)
    return bool(found)
