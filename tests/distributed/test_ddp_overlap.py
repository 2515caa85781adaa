"""DDP overlaps gradient all-reduces with the backward pass only if gradients appear
during the backward.  With the graph split at bucket boundaries (aot_eager: one
autograd node per stage), at least one bucket's all-reduce must be launched while
backward nodes are still to run; with the splitting off, the whole backward is one
node and every all-reduce starts after it (the check that the test can fail).

A DDP communication hook records, at each launch, how many backward nodes have run so
far (counted by a post-hook on every node of the step's autograd graph other than
gradient accumulation, which is where DDP's own hooks sit)."""
from __future__ import annotations

import kiln

from .launch import requires_gloo, run_on_two_ranks
from .test_ddp import ddp
from .tiny_transformer import batch, build

pytestmark = requires_gloo

STEPS = 3   # DDP puts every parameter in one bucket for the first step, then rebuilds them


def backward_nodes(root):
    """Every node of the autograd graph under ``root`` except AccumulateGrad."""
    seen, stack, nodes = set(), [root], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if type(node).__name__ != "AccumulateGrad":
            nodes.append(node)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return nodes


def launches_during_backward(rank, split: bool):
    """For the last step: (backward nodes in the graph, nodes run at each all-reduce launch)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    kiln.reset()
    kiln.config.ddp_split_graphs = split
    model = ddp(build())
    nodes_run = [0]
    launches = []

    def record_launch(state, bucket):
        launches.append(nodes_run[0])
        return allreduce_hook(None, bucket)

    model.register_comm_hook(None, record_launch)
    compiled = kiln.compile(model, backend="aot_eager")
    total = 0
    for step in range(STEPS):
        loss = compiled(*batch(step, rank))
        if step == STEPS - 1:
            nodes = backward_nodes(loss.grad_fn)
            total = len(nodes)
            for node in nodes:
                node.register_hook(lambda grad_inputs, grad_outputs: nodes_run.__setitem__(0, nodes_run[0] + 1))
            launches.clear()
        loss.backward()
    return total, launches


def _check_overlap(rank):
    total, launches = launches_during_backward(rank, split=True)
    assert kiln.metrics.ddp_stages > 1
    assert launches and min(launches) < total, (
        f"with bucket splitting no all-reduce started before the backward ended: "
        f"{total} backward nodes, nodes run at each launch {launches}")
    total, launches = launches_during_backward(rank, split=False)
    assert launches and min(launches) == total, (
        f"without splitting an all-reduce started before the backward ended: "
        f"{total} backward nodes, nodes run at each launch {launches}")


def test_bucket_splitting_launches_an_all_reduce_before_backward_ends():
    run_on_two_ranks(_check_overlap)
