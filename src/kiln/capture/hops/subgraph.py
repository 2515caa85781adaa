"""Tracing a higher-order operator's body into its own fx graph.

The body runs in Kiln's own interpreter (``fn_value.call``, so user functions are
inlined as anywhere else) while ``state.builder`` is a ``SubgraphBuilder``: ops land
in a fresh ``torch.fx.Graph`` that shares the capture's fake mode.  A tensor of an
enclosing graph used in the body (a closed-over tensor, a parameter, a global, an
outer operand) is *lifted*: it becomes an input of the subgraph, and the operator's
call in the enclosing graph passes it explicitly.  Tensors read for the first time
inside the body become inputs of the root graph (guarded like any input) and are
lifted from there, level by level for nested bodies.  Python constants read in the
body stay constants; their guards land in the root entry's guard set.

While the body runs a ``HopScope`` is on ``side_effects.in_hop``: writes to anything
the body did not create raise ``HopBodyMutation``.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import free_symbols

from ...exc import Unsupported
from ..basics import GraphBuilder, insert_placeholder, placeholder_name
from ..values import ConstantValue, DictValue, ListValue, new_serial, TensorValue, TupleValue, Value
from .scope import HopRuleError, HopScope


class SubgraphBuilder(GraphBuilder):
    """A GraphBuilder for one body: its inputs are the body's arguments, then lifted
    tensors of enclosing graphs (``lifted`` maps the enclosing node to the input)."""

    def __init__(self, parent: GraphBuilder):
        self.parent = parent
        self.graph = torch.fx.Graph()
        self.fake_mode = parent.fake_mode
        # symbolic sizes belong to the whole capture: one ShapeEnv, one list of inputs
        self.shape_env = parent.shape_env
        self.symbolic_inputs = parent.symbolic_inputs
        self.guard_locations = parent.guard_locations
        self.placeholders = []
        self.example_inputs = []
        self._names = set()
        self._first_output_node = None
        self.attrs = {}
        self.size_symbols = parent.size_symbols
        self.lifted: dict = {}          # enclosing graph's node -> placeholder here
        self.lifted_fakes: list = []    # fakes of the lifted inputs, in order
        self._last_placeholder = None

    def add_input(self, real, source, hint, dynamic_dims=(), marked=()):
        # a tensor first read inside the body is an input of the whole capture (guarded
        # there); the body sees it through lifting
        return self.parent.add_input(real, source, hint, dynamic_dims, marked)

    def add_symint_input(self, value, source, hint):
        return self.parent.add_symint_input(value, source, hint)

    def placeholder(self, hint: str, fake) -> torch.fx.Node:
        node = insert_placeholder(self.graph, self._unique(placeholder_name(hint)[:60]), after=self._last_placeholder)
        node.meta["example_value"] = fake
        self._last_placeholder = node
        return node

    def call(self, kind, target, node_args, node_kwargs, fake_args, fake_kwargs):
        # ``bias[q_idx, kv_idx]`` with 0-d integer tensors (score_mod bodies) is advanced
        # indexing; fake tensors refuse the getitem form as data-dependent, aten.index is not
        if target is operator.getitem and _all_int_tensors(fake_args[1]):
            idx_nodes = list(node_args[1]) if isinstance(node_args[1], tuple) else [node_args[1]]
            idx_fakes = list(fake_args[1]) if isinstance(fake_args[1], tuple) else [fake_args[1]]
            return super().call(kind, torch.ops.aten.index.Tensor, (node_args[0], idx_nodes), {},
                                (fake_args[0], idx_fakes), {})
        return super().call(kind, target, node_args, node_kwargs, fake_args, fake_kwargs)

    def lift(self, node, fake):
        if node.graph is self.graph:
            return node
        outer = self.parent.lift(node, fake)
        inner = self.lifted.get(outer)
        if inner is None:
            inner = self.lifted[outer] = self.placeholder(
                outer.name if outer.name.startswith("lifted_") else f"lifted_{outer.name}", fake)
            self.lifted_fakes.append(fake)
        return inner


def lift_size_symbols(sub: SubgraphBuilder) -> None:
    """Every symbol in the sizes of a body's inputs becomes an input of the body too (a
    SymInt), as torch.compile passes them: torch's lowerings of the operators (inductor
    turns scan into a while_loop that allocates its outputs) rebuild sizes from the body's
    inputs and need each symbol bound there.  A symbol is read from the root input that
    has it as a size, once per capture, and lifted level by level like a tensor."""
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    examples = [n.meta.get("example_value") for n in placeholders]
    bound = {v.node.expr for v in examples if isinstance(v, torch.SymInt)}
    needed = []
    for v in examples:
        if isinstance(v, torch.Tensor):
            needed += [s for s in free_symbols(v) if s not in bound and s not in needed]
    if not needed:
        return
    root = sub
    while isinstance(root, SubgraphBuilder):
        root = root.parent
    for symbol in needed:
        node, sym = _size_node(root, symbol)
        sub.lift(node, sym)


def _size_node(root: GraphBuilder, symbol):
    """A node of the root graph whose value is ``symbol`` (made once per capture)."""
    if symbol in root.size_symbols:
        return root.size_symbols[symbol]
    for node, _ in root.placeholders:
        v = node.meta.get("example_value")
        if isinstance(v, torch.SymInt) and v.node.expr == symbol:
            found = node, v
            break
        sizes = list(v.shape) if isinstance(v, torch.Tensor) else []
        dim = next((d for d, n in enumerate(sizes) if isinstance(n, torch.SymInt) and n.node.expr == symbol), None)
        if dim is not None:
            found = root.call("call_method", "size", (node, dim), {}, (v, dim), {})
            break
    else:
        raise Unsupported(f"a body's input has a size ({symbol}) that no input of the graph has")
    root.size_symbols[symbol] = found
    return found


def _all_int_tensors(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return bool(items) and all(isinstance(i, torch.Tensor) and i.ndim == 0 and not i.is_floating_point()
                               and i.dtype != torch.bool for i in items)


@dataclass
class Subgraph:
    """A traced body: ``gm`` takes (*explicit args, *lifted); ``lifted`` holds the
    enclosing graph's nodes to pass for the lifted inputs."""
    gm: torch.fx.GraphModule
    lifted: list                     # nodes of the enclosing graph
    lifted_fakes: list
    out_fakes: list                  # one fake per output
    out_values: list                 # the body's output Values (inside the body)
    rebuild: object                  # list of outer Values -> the body's output structure
    out_tree: object = None          # the output structure with 0 for each tensor (a pytree)


def body_argument(sub: SubgraphBuilder, fake, hint: str) -> TensorValue:
    node = sub.placeholder(hint, fake)
    v = TensorValue(node, fake)
    v.cls = torch.Tensor
    return v


def _make_arg(sub, scope, a, hint):
    """A body argument: a Value passes through; a fake becomes a fresh input; tuples
    and lists of fakes become containers of inputs."""
    if isinstance(a, Value):
        return a
    if isinstance(a, (tuple, list)):
        items = [_make_arg(sub, scope, x, f"{hint}_{j}") for j, x in enumerate(a)]
        v = TupleValue(items) if isinstance(a, tuple) else ListValue(items)
    elif isinstance(a, dict):
        v = DictValue({k: _make_arg(sub, scope, x, f"{hint}_{k}") for k, x in a.items()})
    else:
        v = body_argument(sub, a, hint)
    scope.foreign_ids.add(id(v))
    return v


def add_inputs(sub_result: "Subgraph", fakes: list) -> None:
    """Append unused inputs to a traced body (a sibling body lifted more than it did)."""
    graph = sub_result.gm.graph
    last = [n for n in graph.nodes if n.op == "placeholder"]
    anchor = last[-1] if last else None
    for i, fake in enumerate(fakes):
        if anchor is not None:
            with graph.inserting_after(anchor):
                anchor = graph.placeholder(f"unused_{len(last) + i}")
        else:
            first = next(iter(graph.nodes))
            with graph.inserting_before(first):
                anchor = graph.placeholder(f"unused_{len(last) + i}")
        anchor.meta["example_value"] = fake
    sub_result.gm.recompile()


def merge_lifted(first: "Subgraph", second: "Subgraph") -> tuple[list, list]:
    """Give two sibling bodies one signature; ``second`` was traced with ``first``'s
    lifted inputs pre-lifted, so only its extras are missing from ``first``."""
    extra = second.lifted[len(first.lifted):]
    extra_fakes = second.lifted_fakes[len(first.lifted):]
    if extra:
        add_inputs(first, extra_fakes)
        first.lifted += extra
        first.lifted_fakes += extra_fakes
    return second.lifted, second.lifted_fakes


def flatten_output(v: Value, op: str) -> tuple[list, object]:
    """The tensors a body returns, and a function rebuilding the structure from new leaves."""
    if isinstance(v, TensorValue):
        return [v], lambda leaves: leaves[0]
    if isinstance(v, (TupleValue, ListValue)) and type(v) in (TupleValue, ListValue):
        parts = [flatten_output(i, op) for i in v.items]
        leaves = [leaf for p in parts for leaf in p[0]]
        ctor = TupleValue if isinstance(v, TupleValue) else ListValue

        def rebuild(new, parts=parts, ctor=ctor):
            out, i = [], 0
            for p_leaves, p_rebuild in parts:
                out.append(p_rebuild(new[i:i + len(p_leaves)]))
                i += len(p_leaves)
            return ctor(out)
        return leaves, rebuild
    if isinstance(v, DictValue) and v.cls is dict and not v.key_values:
        keys = list(v.items)
        leaves, rebuild_items = flatten_output(TupleValue([v.items[k] for k in keys]), op)
        return leaves, lambda new: DictValue(dict(zip(keys, rebuild_items(new).items)))
    if isinstance(v, ConstantValue) and v.value is None:
        return [], lambda leaves: v
    raise Unsupported(f"the body of `{op}` returns {v.describe()}; bodies must return tensors "
                      f"(or tuples/lists of tensors)")


def trace_subgraph(tx, fn_value: Value, args: list, op: str, prelift=()) -> Subgraph:
    """Trace ``fn_value(*args)`` as the body of ``op`` into its own graph.

    ``args`` are fakes (a fresh input per fake) or Values passed through as they are
    (outer tensors are then lifted on use, constants stay constants).  ``prelift``
    lists enclosing (node, fake) pairs to lift first, so that sibling bodies (cond's
    branches) share one input order.
    """
    state = tx.state
    parent = state.builder
    sub = SubgraphBuilder(parent)
    scope = HopScope(op, sub, new_serial())
    body_args = [_make_arg(sub, scope, a, f"arg{i}") for i, a in enumerate(args)]
    for node, fake in prelift:
        sub.lift(node, fake)
    state.builder = sub
    state.side_effects.in_hop.append(scope)
    try:
        result = fn_value.call(tx, body_args, {})
        leaves, rebuild = flatten_output(result, op)
        out_nodes = [sub.lift(v.node, v.fake) for v in leaves]
        sub.graph.output(tuple(out_nodes))
        lift_size_symbols(sub)
    except Unsupported as e:
        if not isinstance(e, HopRuleError) and not getattr(e, "_kiln_hop_noted", False):
            e._kiln_hop_noted = True
            e.reason = f"Kiln cannot trace the body of `{op}`: {e.reason}"
            e.args = (e._render(),)
        raise
    finally:
        state.builder = parent
        state.side_effects.in_hop.pop()
    gm = torch.fx.GraphModule(sub.attrs, sub.graph, class_name=f"{op.replace('.', '_')}_body")
    return Subgraph(gm, list(sub.lifted), list(sub.lifted_fakes), [v.fake for v in leaves], leaves, rebuild,
                    _tree_of(result))


def _tree_of(v: Value):
    if isinstance(v, TensorValue):
        return 0
    if isinstance(v, TupleValue):
        return tuple(_tree_of(i) for i in v.items)
    if isinstance(v, ListValue):
        return [_tree_of(i) for i in v.items]
    if isinstance(v, DictValue):
        return {k: _tree_of(i) for k, i in v.items.items()}
    return None


def emit(tx, target, node_args: tuple, fake_args: tuple, node_kwargs=None, fake_kwargs=None):
    """Record one call of a higher-order operator in the current graph; returns the fake result and node."""
    builder = tx.state.builder
    node, result = builder.call("call_function", target, node_args, node_kwargs or {}, fake_args, fake_kwargs or {})
    return node, result


def emit_known(tx, target, node_args: tuple, result):
    """Record a call whose result metadata the caller has already computed on fakes (the
    runners of torch.func and create_block_mask: the caller runs the real function on fakes
    once, to learn the result's structure as well)."""
    node = tx.state.builder.graph.create_node("call_function", target, node_args, {})
    node.meta["example_value"] = result
    return node, result


def outer_outputs(tx, node, results, count: int) -> list:
    """Values for the first ``count`` items of a HOP call's (tuple) result."""
    builder = tx.state.builder
    out = []
    for i in range(count):
        item = builder.getitem(node, i, results[i])
        out.append(tx.wrap_fake_result(item, results[i]))
    return out


def lower(tx, v: Value):
    """(node, fake) of a tensor operand in the current graph."""
    if not isinstance(v, TensorValue):
        raise Unsupported(f"{v.describe()} is not a tensor")
    return tx.state.builder.lift(v.node, v.fake), v.fake
