"""Helpers for tests: a counting backend and eager-vs-compiled comparisons."""
from __future__ import annotations

import torch
import torch.fx

from .fx_ops import count_ops


__all__ = ["count_ops", "CompileCounter", "assert_same_as_eager"]      # count_ops: kiln.fx_ops's


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
    """``compiled`` is what ``eager`` is: for tensors the same requires_grad, is_leaf,
    dtype, shape and (close) values; lists and tuples of the same type and length,
    compared item by item; anything else equal.  ``is_leaf`` is part of it because a
    compiled call that hands back a graph output where eager made a leaf (or the other
    way round) changes what ``.grad`` and ``backward()`` do afterwards."""
    if isinstance(eager, torch.Tensor) or isinstance(compiled, torch.Tensor):
        assert isinstance(eager, torch.Tensor) and isinstance(compiled, torch.Tensor), \
            f"{path}: eager {eager!r}, compiled {compiled!r}"
        want = (eager.requires_grad, eager.is_leaf, eager.dtype, eager.shape)
        got = (compiled.requires_grad, compiled.is_leaf, compiled.dtype, compiled.shape)
        assert want == got, f"{path}: eager (requires_grad, is_leaf, dtype, shape) {want}, compiled {got}"
        torch.testing.assert_close(compiled.detach(), eager.detach(), rtol=rtol, atol=atol)
    elif isinstance(eager, (list, tuple)):
        assert type(eager) is type(compiled) and len(eager) == len(compiled), \
            f"{path}: eager {eager!r}, compiled {compiled!r}"
        for i, (e, c) in enumerate(zip(eager, compiled)):
            assert_same_as_eager(e, c, rtol, atol, f"{path}[{i}]")
    else:
        assert eager == compiled, f"{path}: eager {eager!r}, compiled {compiled!r}"
