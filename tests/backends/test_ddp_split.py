"""The DDP bucket splitter on its own, in one process: a graph captured by Kiln is cut
into bucket-sized stages that run in order, each compiled by the wrapped backend, each
its own autograd node, with the same results and gradients as the whole graph."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import kiln
from kiln.backends.aot_eager import aot_eager
from kiln.backends.ddp_split import BucketLayout, BucketSplittingBackend, split_at_buckets, stage_of_nodes


class Stack(nn.Module):
    """Four 16x16 layers: 1088 bytes of parameters each."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList(nn.Linear(16, 16) for _ in range(4))

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x.sum()


LAYER_BYTES = (16 * 16 + 16) * 4


def captured(model, x):
    """Kiln's graph of ``model(x)`` and its example inputs (parameters are inputs)."""
    seen = []

    def record(gm, example_inputs):
        seen.append((gm, example_inputs))
        return gm.forward

    kiln.compile(model, backend=record)(x)
    (gm, example_inputs), = seen
    return gm, example_inputs


def backward_node_count(out):
    seen, stack = set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(n for n, _ in node.next_functions)
    return sum(type(n).__name__ != "AccumulateGrad" for n in seen)


@pytest.mark.parametrize("cap_layers, stages", [(1, 4), (2, 2), (4, 1), (100, 1)])
def test_stages_hold_a_bucket_of_parameters_each(cap_layers, stages):
    model = Stack()
    gm, example_inputs = captured(model, torch.randn(2, 16))
    layout = BucketLayout(caps=(cap_layers * LAYER_BYTES,), params=tuple(model.parameters()))
    assignment = stage_of_nodes(gm, example_inputs, layout)
    assert (max(assignment.values()) + 1 if assignment else 1) == stages
    order = [assignment[n] for n in gm.graph.nodes if n in assignment]
    assert order == sorted(order), "stages must follow the graph's node order"


def test_first_bucket_has_its_own_cap():
    model = Stack()
    gm, example_inputs = captured(model, torch.randn(2, 16))
    # the last layer alone, then two layers per bucket: stages [layer 0], [1, 2], [3]
    layout = BucketLayout(caps=(LAYER_BYTES, 2 * LAYER_BYTES), params=tuple(model.parameters()))
    assert max(stage_of_nodes(gm, example_inputs, layout).values()) == 2


def test_split_graph_trains_as_the_whole_graph_with_one_backward_node_per_stage():
    model = Stack()
    x = torch.randn(2, 16)
    gm, example_inputs = captured(model, x)
    layout = BucketLayout(caps=(LAYER_BYTES,), params=tuple(model.parameters()))
    compiled_stages = []

    def backend(stage_gm, stage_inputs):
        compiled_stages.append(stage_gm)
        return aot_eager(stage_gm, stage_inputs)

    split = split_at_buckets(gm, example_inputs, backend, layout)
    whole = aot_eager(gm, example_inputs)
    out_split, = split(*example_inputs)
    assert len(compiled_stages) == 4
    assert backward_node_count(out_split) == 4
    grads_split = torch.autograd.grad(out_split, list(model.parameters()))
    out_whole, = whole(*example_inputs)
    assert backward_node_count(out_whole) == 1
    grads_whole = torch.autograd.grad(out_whole, list(model.parameters()))
    assert torch.equal(out_split, out_whole)
    for a, b in zip(grads_split, grads_whole):
        assert torch.equal(a, b)


def test_splitting_backend_passes_graphs_through_outside_ddp_and_when_switched_off():
    model = Stack()
    gm, example_inputs = captured(model, torch.randn(2, 16))
    layout = BucketLayout(caps=(LAYER_BYTES,), params=tuple(model.parameters()))
    calls = []

    def backend(g, inputs):
        calls.append(g)
        return g.forward

    BucketSplittingBackend(backend, lambda: None)(gm, example_inputs)
    assert calls == [gm]
    saved = kiln.config.ddp_split_graphs
    try:
        kiln.config.ddp_split_graphs = False
        BucketSplittingBackend(backend, lambda: layout)(gm, example_inputs)
        assert calls == [gm, gm]
        kiln.config.ddp_split_graphs = True
        split = BucketSplittingBackend(backend, lambda: layout)(gm, example_inputs)
        split(*example_inputs)
        assert len(calls) == 2 + 4
    finally:
        kiln.config.ddp_split_graphs = saved
