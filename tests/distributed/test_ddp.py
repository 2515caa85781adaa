"""DistributedDataParallel and Kiln on two gloo processes: a compiled DDP model trains
exactly as eager DDP (losses, gradients and parameters after three SGD steps), in both
orders (``kiln.compile(DDP(m))`` and ``DDP(kiln.compile(m))``), under the eager and
aot_eager backends with the graphs split at bucket boundaries, under aot_eager with
the splitting off, and with a graph break inside the model."""
from __future__ import annotations

import pytest

import kiln

from .launch import requires_gloo, run_on_two_ranks
from .tiny_transformer import build
from .training import assert_same_training, train

pytestmark = requires_gloo

# about 50 KB: the tiny transformer's ~140 KB of parameters make three or four buckets
BUCKET_CAP_MB = 0.05


def ddp(model):
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel(model, bucket_cap_mb=BUCKET_CAP_MB)


ORDERS = {
    "compile_ddp": lambda backend, **kw: kiln.compile(ddp(build(**kw)), backend=backend),
    "ddp_of_compiled": lambda backend, **kw: ddp(kiln.compile(build(**kw), backend=backend)),
}


def _compare(rank, order, graph_break, cases):
    expected = train(ddp(build(graph_break=graph_break)), rank)
    for backend, split in cases:
        kiln.config.ddp_split_graphs = split
        kiln.reset()
        recompiles = []
        got = train(ORDERS[order](backend, graph_break=graph_break), rank,
                    after_step=lambda step: recompiles.append(kiln.metrics.recompiles))
        what = f"{order}/{backend}/split={split}/graph_break={graph_break}"
        assert kiln.metrics.graphs >= (2 if graph_break else 1), f"{what}: graphs {kiln.metrics.graphs}"
        if split:
            assert kiln.metrics.ddp_stages > kiln.metrics.ddp_split_graphs > 0, f"{what}: not split"
        else:
            assert kiln.metrics.ddp_split_graphs == 0, f"{what}: split with the switch off"
        assert_same_training(expected, got, f"{what}")
        # DDP's forward takes another path once, on the step after its bucket rebuild; then it is stable
        assert recompiles[1] == recompiles[-1], f"{what}: recompiles after each step {recompiles}"


# both backends with the graphs split; the unsplit path under aot_eager (where it matters)
CASES = [("eager", True), ("aot_eager", True), ("aot_eager", False)]


@pytest.mark.parametrize("order", ["compile_ddp", pytest.param("ddp_of_compiled", marks=pytest.mark.slow)])
def test_ddp_trains_as_eager(order):
    run_on_two_ranks(_compare, order, False, CASES)


@pytest.mark.slow
def test_ddp_with_a_graph_break_trains_as_eager():
    run_on_two_ranks(_compare, "compile_ddp", True, [("eager", True), ("aot_eager", True)])
