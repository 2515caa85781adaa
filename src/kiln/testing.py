"""Helpers for tests: a counting backend and eager-vs-compiled comparisons."""
from __future__ import annotations

import torch
import torch.fx


def count_ops(gm: torch.fx.GraphModule) -> int:
    """Count the nodes that do work, the way TorchDynamo's CompileCounter does."""
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


class CompileCounter:
    """A backend that records how many graphs it saw and how many ops they had.

    ``frame_count`` counts graphs (one per compiled graph, as in TorchDynamo);
    ``op_count`` sums the ops of all graphs.  ``graphs`` keeps the GraphModules.
    """

    def __init__(self):
        self.frame_count = 0
        self.op_count = 0
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.frame_count += 1
        self.op_count += count_ops(gm)
        self.graphs.append(gm)
        return gm.forward

    @property
    def runs_graph_as_is(self) -> bool:
        """Declared for Kiln (``backends/contract.py``): it returns ``gm.forward``, so the graph
        runs as it is.  Not for a subclass that overrides ``__call__`` (a counter in front
        of ``aot_eager``), which may do anything: it declares nothing unless it says so
        itself (a class attribute, or ``self.runs_graph_as_is = ...``)."""
        if "runs_graph_as_is" in self.__dict__:
            return self.__dict__["runs_graph_as_is"] is True
        return type(self).__call__ is CompileCounter.__call__

    @runs_graph_as_is.setter
    def runs_graph_as_is(self, value: bool) -> None:
        self.__dict__["runs_graph_as_is"] = value

    def clear(self) -> None:
        self.frame_count = 0
        self.op_count = 0
        self.graphs.clear()

    def __repr__(self) -> str:
        return f"CompileCounter(frame_count={self.frame_count}, op_count={self.op_count})"
