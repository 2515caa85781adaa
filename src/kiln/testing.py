"""Helpers for tests: a counting backend and eager-vs-compiled comparisons.

The comparisons are :mod:`kiln.comparison`'s (re-exported here so a test imports one
place); ``assert_same_as_eager`` is its strictness for a call's result.
"""
from __future__ import annotations

import torch
import torch.fx

from .comparison import (InputWatch, Rules, Walk, aliasing, aliasing_differences, assert_same, differences,
                         tensor_leaves, walk)
from .fx_ops import count_ops


# count_ops is kiln.fx_ops's; the comparison names are kiln.comparison's
__all__ = ["count_ops", "CompileCounter", "assert_same_as_eager", "Rules", "Walk", "assert_same", "differences",
           "walk", "tensor_leaves", "aliasing", "aliasing_differences", "InputWatch"]


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


def assert_same_as_eager(eager, compiled, rtol: float | None = None, atol: float | None = None,
                         path: str = "result") -> None:
    """``compiled`` is what ``eager`` is (:func:`kiln.comparison.assert_same`): the same
    types and structure; tensors with the same requires_grad, is_leaf, dtype, shape and
    values close within ``rtol``/``atol`` (NaN is a difference here); anything else equal.
    ``is_leaf`` is part of it because a compiled call that hands back a graph output where
    eager made a leaf (or the other way round) changes what ``.grad`` and ``backward()``
    do afterwards."""
    assert_same(eager, compiled, Rules(rtol=rtol, atol=atol, is_leaf=True, equal_nan=False), path)
