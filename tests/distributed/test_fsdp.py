"""FSDP2 (``fully_shard``) and Kiln on two gloo processes, in the orders a user may apply
them (shard then compile, compile then shard, compile each layer then shard; per layer
and on the whole model only): the compiled model must train exactly as eager FSDP2
(losses, gradients and parameters after three SGD steps), under the eager and aot_eager
backends."""
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


def compile_layers_shard_then_compile_root(backend):
    """Every forward compiled: the root's graphs break at the sharded layers (they have
    FSDP2's hooks), whose own forwards are compiled."""
    return kiln.compile(compile_each_layer_then_shard(backend), backend=backend)


def _shard_whole(model):
    """FSDP2 on the root only: one parameter group, all-gathered for the whole forward."""
    from torch.distributed.fsdp import fully_shard
    return fully_shard(model)


def shard_whole_then_compile(backend):
    return kiln.compile(_shard_whole(build()), backend=backend)


def compile_then_shard_whole(backend):
    return _shard_whole(kiln.compile(build(), backend=backend))


ORDERS = {f.__name__: f for f in (shard_then_compile, compile_then_shard, compile_each_layer_then_shard,
                                  compile_layers_shard_then_compile_root, shard_whole_then_compile,
                                  compile_then_shard_whole)}


def _compare_orders(rank, cases):
    from torch.distributed.fsdp import FSDPModule
    whole = "whole" in cases[0][0]
    expected = train(_shard_whole(build()) if whole else _shard(build()), rank)
    for order, backend in cases:
        kiln.reset()
        model = ORDERS[order](backend)
        assert isinstance(model, FSDPModule) and isinstance(model, type(build()))
        recompiles = []
        got = train(model, rank, after_step=lambda step: recompiles.append(kiln.metrics.recompiles))
        assert kiln.metrics.graphs > 0, f"{order}/{backend}: nothing was compiled"
        if whole:
            assert not kiln.metrics.breaks, f"{order}/{backend}: {kiln.metrics.breaks}"
        assert_same_training(expected, got, f"{order}/{backend}")
        # FSDP2 installs the same unsharded parameters on every step: nothing recompiles after the first
        assert recompiles[0] == recompiles[-1], f"{order}/{backend}: recompiles after each step {recompiles}"


def _both_backends(*orders):
    return [(order, backend) for order in orders for backend in BACKENDS]


# the three orders under both backends; their variants under aot_eager only, to keep CI time down
@pytest.mark.parametrize("cases", [
    _both_backends("shard_then_compile"),
    _both_backends("compile_then_shard"),
    _both_backends("compile_each_layer_then_shard") + [("compile_layers_shard_then_compile_root", "aot_eager")],
    [("shard_whole_then_compile", "aot_eager"), ("compile_then_shard_whole", "aot_eager")],
], ids=lambda cases: "+".join(dict.fromkeys(order for order, _ in cases)))
def test_fsdp2_trains_as_eager(cases):
    run_on_two_ranks(_compare_orders, cases)
