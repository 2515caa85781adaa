"""What counts as an op of an FX graph, asked in one place.

Graph and op counts are how tests, ``kiln explain``, the trace, the minifier and the
bench describe a capture, so they must all count the same nodes: the calls that do
work (``call_function``, ``call_method``, ``call_module``), not placeholders, constants
(``get_attr``) or the output node.  This is how TorchDynamo's ``CompileCounter`` counts,
so Kiln's figures compare with torch.compile's.
"""
from __future__ import annotations

import torch.fx

OP_KINDS = ("call_function", "call_method", "call_module")


def _graph(graph_or_module) -> torch.fx.Graph:
    return graph_or_module.graph if isinstance(graph_or_module, torch.fx.GraphModule) else graph_or_module


def op_nodes(graph_or_module) -> list[torch.fx.Node]:
    """The nodes that do work, in graph order."""
    return [n for n in _graph(graph_or_module).nodes if n.op in OP_KINDS]


def count_ops(graph_or_module) -> int:
    """How many nodes do work (a GraphModule or a Graph)."""
    return sum(1 for n in _graph(graph_or_module).nodes if n.op in OP_KINDS)


def op_name(node: torch.fx.Node) -> str:
    """The name an op is listed under: a method's name, or the callable's ``__name__``."""
    target = node.target
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))
