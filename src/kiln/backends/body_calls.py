"""Calls of one traced body from several places of a graph (repeated layers traced once).

Kiln records a call of a layer body that it traced once (``capture/hops/layers.py``) as
``call_body(body, identifier, *operands)``: a plain function that runs the body's
GraphModule on the operands, so that a graph that runs as it is (the eager backend, a
counting backend, Kiln's own eager fallback) computes and differentiates it like any
Python call.  torch's ``invoke_subgraph`` operator means the same, but it cannot run
eagerly under autograd (its backward needs a fake mode), which is why it is not the
captured graph's target.

Backends built on AOTAutograd (``aot_eager``, ``inductor``) get the calls as torch's
``invoke_subgraph`` (``with_invoke_subgraph``): AOTAutograd then traces each distinct
body once per graph (its cache of bodies, keyed by the identifier, lives in the tracing
context, so one is opened when the graph has none), and inductor compiles it once and
calls it per layer.
"""
from __future__ import annotations

import contextlib
import operator

import torch
import torch.fx
from torch._guards import TracingContext, tracing
from torch._higher_order_ops.invoke_subgraph import invoke_subgraph

from ..runtime import copy_graph


def call_body(body, identifier, *operands):
    """The body's outputs for ``operands`` (a tuple), as ``invoke_subgraph`` gives them."""
    return body(*operands)


def has_body_calls(gm: torch.fx.GraphModule) -> bool:
    return any(n.op == "call_function" and n.target is call_body for n in gm.graph.nodes)


def with_invoke_subgraph(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` itself without body calls; else a GraphModule over a copy of its graph
    whose body calls are torch's ``invoke_subgraph`` (``gm``, the eager fallback, keeps
    its own)."""
    if not has_body_calls(gm):
        return gm
    graph = copy_graph(gm.graph)
    for node in graph.nodes:
        if node.op == "call_function" and node.target is call_body:
            node.target = invoke_subgraph
    return torch.fx.GraphModule(gm, graph)


def body_tracing_context(gm: torch.fx.GraphModule, fake_mode=None):
    """A tracing context for compiling ``gm`` when it calls bodies and none is open:
    AOTAutograd keeps its per-identifier cache of traced bodies there (without one each
    call of a body is traced again, and compiled again)."""
    if TracingContext.try_get() is not None or not has_body_calls(gm):
        return contextlib.nullcontext()
    from torch._subclasses.fake_tensor import FakeTensorMode  # (imported by torch with the HOP above)
    return tracing(TracingContext(fake_mode if fake_mode is not None else FakeTensorMode()))


def inline_body_calls(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` itself without body calls; else a GraphModule over a copy of its graph with
    every body call replaced by the body's nodes: for graph passes that cut a graph by
    its nodes (the DDP bucket splitter), where a call of a shared body would have to sit
    in one stage while its parameters belong to several buckets."""
    if not has_body_calls(gm):
        return gm
    graph = copy_graph(gm.graph)
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not call_body:
            continue
        body_node, _, *operands = node.args
        body = getattr(gm, body_node.target) if body_node.op == "get_attr" else body_node
        placeholders = [n for n in body.graph.nodes if n.op == "placeholder"]
        if any(n.op == "get_attr" for n in body.graph.nodes) or len(placeholders) != len(operands):
            raise NotImplementedError("a body call whose body holds attributes cannot be inlined")
        with graph.inserting_before(node):
            outputs = graph.graph_copy(body.graph, dict(zip(placeholders, operands)))
        for user in list(node.users):
            if not (user.op == "call_function" and user.target is operator.getitem):
                raise NotImplementedError("a body call's result is used other than by index")
            user.replace_all_uses_with(outputs[user.args[1]])
            graph.erase_node(user)
        graph.erase_node(node)
    graph.eliminate_dead_code()
    return torch.fx.GraphModule(gm, graph)
