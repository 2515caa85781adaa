"""FSDP2 (``fully_shard``) and Kiln, in the three orders a user may apply them, on two
gloo processes: the compiled model must train exactly as eager FSDP2 (losses, gradients
and parameters after three SGD steps), under the eager and aot_eager backends."""
from __future__ import annotations

import pytest
import torch

import kiln

from .launch import requires_gloo, run_on_two_ranks
from .tiny_transformer import build
from .training import assert_same_training, train

pytestmark = [requires_gloo, pytest.mark.slow]

BACKENDS = ("eager", "aot_eager")


def _shard(model):
    """FSDP2 as its documentation recommends: each block, then the root."""
    from torch.distributed.fsdp import fully_shard
    for layer in model.layers:
        fully_shard(layer)
    return fully_shard(model)


def shard_then_compile(backend):
    model = kiln.compile(_shard(build()), backend=backend)
    # FSDP2's methods find their state on the compiled module too
    model.reshard()
    return model


def compile_then_shard(backend):
    return _shard(kiln.compile(build(), backend=backend))


def compile_each_layer_then_shard(backend):
    model = build()
    for i, layer in enumerate(model.layers):
        model.layers[i] = kiln.compile(layer, backend=backend)
    return _shard(model)


ORDERS = {f.__name__: f for f in (shard_then_compile, compile_then_shard, compile_each_layer_then_shard)}


def _compare_orders(rank, order):
    from torch.distributed.fsdp import FSDPModule
    expected = train(_shard(build()), rank)
    for backend in BACKENDS:
        kiln.reset()
        model = ORDERS[order](backend)
        assert isinstance(model, FSDPModule) and isinstance(model, type(build()))
        got = train(model, rank)
        assert kiln.metrics.graphs > 0, f"{order}/{backend}: nothing was compiled"
        assert_same_training(expected, got, f"{order}/{backend}")


@pytest.mark.parametrize("order", list(ORDERS))
def test_fsdp2_trains_as_eager(order):
    run_on_two_ranks(_compare_orders, order)
