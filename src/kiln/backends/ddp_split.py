"""Split a graph at DistributedDataParallel's gradient-bucket boundaries.

Why: DDP overlaps communication with the backward pass.  It hooks every parameter's
gradient accumulation; when all gradients of a bucket have arrived, it launches that
bucket's all-reduce while autograd goes on computing the rest.  An AOTAutograd backend
(aot_eager, aten, inductor) turns a whole graph into one autograd node, whose backward
produces every gradient at its very end, so no all-reduce can start before the backward
is over.  Cutting the graph into stages of about one bucket of parameters each, and
compiling every stage on its own, gives one autograd node per stage: the backward of
the last stage runs first and finishes its parameters' gradients, DDP's hooks fire and
the first all-reduce starts while the earlier stages are still differentiating.

How the stages are chosen: DDP fills buckets in roughly the order the backward produces
gradients, which is the reverse of the forward.  So the graph is walked from its end to
its start; each parameter's size (in bytes) is added to the current stage when the walk
meets its last use in the forward, and a stage closes once it holds a bucket's worth
(``BucketLayout.caps``: the first bucket may have its own cap, as in DDP).  The stage
indices therefore never decrease along the graph, so running the stages in order runs
every node in its original order (mutations and random ops keep their order).

Each stage is compiled by the wrapped backend the first time it runs, with the real
tensors it receives then, so a backend sees the same kind of example inputs as for an
unsplit graph.  A stage that fails makes the first call fail, and Kiln's failure policy
(``policy.compile_graph``) then runs the whole graph eagerly, where every operator is
its own autograd node, which overlaps by itself.

This module knows nothing of the DDP instance: whoever builds a
:class:`BucketSplittingBackend` gives it ``find_layout``, a function returning the
:class:`BucketLayout` of the DDP module whose forward is running (or None) when a graph
is compiled.  ``kiln.config.ddp_split_graphs = False`` turns the splitting off for
graphs compiled from then on.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import torch
import torch.fx
from torch.fx.passes.split_module import split_module

from kiln.config import config
from kiln.events import event

from .body_calls import inline_body_calls

__all__ = ["BucketLayout", "BucketSplittingBackend", "stage_of_nodes", "split_at_buckets"]


@dataclass(frozen=True)
class BucketLayout:
    """What the splitter needs to know of a DDP instance.

    ``caps``: byte limits of the buckets in the order the backward fills them; the
    last one repeats.  ``params``: the parameters DDP all-reduces (compared by
    identity with the graph's example inputs).
    """

    caps: tuple[int, ...]
    params: tuple[torch.Tensor, ...]

    def cap(self, stage_from_end: int) -> int:
        return self.caps[min(stage_from_end, len(self.caps) - 1)]


def stage_of_nodes(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], layout: BucketLayout) -> dict:
    """``{node: stage}`` for every node that computes, stages numbered in forward order.

    Returns an empty dict when the graph would make a single stage.
    """
    reduced = {id(p) for p in layout.params}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    param_bytes = {node: value.numel() * value.element_size()
                   for node, value in zip(placeholders, example_inputs)
                   if isinstance(value, torch.Tensor) and id(value) in reduced and value.requires_grad}
    from_end: dict[torch.fx.Node, int] = {}
    stage, filled = 0, 0
    counted: set = set()
    for node in reversed(gm.graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        from_end[node] = stage
        for arg in node.all_input_nodes:
            if arg in param_bytes and arg not in counted:
                counted.add(arg)
                filled += param_bytes[arg]
        if filled >= layout.cap(stage):
            stage, filled = stage + 1, 0
    last = max(from_end.values(), default=0)
    # nodes met after the last bucket closed, with no parameter of their own, join the first stage
    if filled == 0 and last == stage:
        last -= 1
    stages = {node: max(0, last - s) for node, s in from_end.items()}
    return stages if last > 0 else {}


class _Stage(torch.nn.Module):
    """One stage: compiled by the backend on its first call, from the inputs it gets."""

    def __init__(self, graph_module: torch.fx.GraphModule, backend: Callable):
        super().__init__()
        self.graph_module = graph_module
        self._backend = backend
        self._compiled: Optional[Callable] = None

    def forward(self, *args):
        if self._compiled is None:
            start = time.perf_counter()
            try:
                compiled = self._backend(self.graph_module, list(args))
            finally:
                event("ddp_stage_compile", seconds=time.perf_counter() - start)
            if not callable(compiled):
                raise TypeError(f"the backend returned a {type(compiled).__name__} for a DDP stage, not a callable")
            self._compiled = compiled
        return self._compiled(*args)


def split_at_buckets(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], backend: Callable,
                     layout: BucketLayout) -> Callable:
    """``gm`` cut into bucket-sized stages, each compiled by ``backend`` when first run.

    A graph that makes one stage (no reduced parameters, or fewer than a bucket's
    worth) is compiled whole.
    """
    gm = inline_body_calls(gm)     # a shared layer body's parameters span buckets
    stages = stage_of_nodes(gm, example_inputs, layout)
    if not stages:
        return backend(gm, list(example_inputs))
    split = split_module(gm, gm, lambda node: stages[node], keep_original_order=True, tuple_return=True)
    names = [n.target for n in split.graph.nodes if n.op == "call_module"]
    for name in names:
        setattr(split, name, _Stage(getattr(split, name), backend))
    event("ddp_split", stages=len(names))
    return split.forward


class BucketSplittingBackend:
    """A backend that splits the graphs compiled inside a DDP forward (see the module
    docstring) and passes every other graph to ``backend`` unchanged."""

    def __init__(self, backend: Callable, find_layout: Callable[[], Optional[BucketLayout]]):
        self.backend = backend
        self.wrapped_backend = backend   # the convention tools use to name the real backend
        self.find_layout = find_layout
        self.__name__ = getattr(backend, "__name__", type(backend).__name__)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]):
        layout = self.find_layout() if config.ddp_split_graphs else None
        if layout is None:
            return self.backend(gm, example_inputs)
        return split_at_buckets(gm, example_inputs, self.backend, layout)
