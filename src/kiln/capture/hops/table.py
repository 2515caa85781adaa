"""The functions Kiln traces as higher-order operators, by the object users call."""
from __future__ import annotations

import sys

import torch
import torch._higher_order_ops  # noqa: F401  (registers cond, map, while_loop, scan)
import torch._higher_order_ops.invoke_subgraph  # noqa: F401  (nested_compile_region's placeholder)

import torch.utils.checkpoint

from .autograd import AutogradApplyValue, CheckpointValue
from .functorch import (CreateBlockMaskValue, FlexAttentionValue, FunctionalCallValue, FuncTransformValue,
                        create_block_mask, flex_attention)
from .control_flow import CondValue, MapValue, ScanValue, WhileLoopValue
from .layers import NestedRegionValue


def hop_functions() -> dict:
    hops = sys.modules["torch._higher_order_ops"]
    table = {
        torch.cond: CondValue(torch.cond),
        sys.modules["torch._higher_order_ops.map"].map: MapValue(sys.modules["torch._higher_order_ops.map"].map),
        hops.while_loop: WhileLoopValue(hops.while_loop),
        hops.scan: ScanValue(hops.scan),
    }
    table[torch.utils.checkpoint.checkpoint] = CheckpointValue(torch.utils.checkpoint.checkpoint)
    table[torch.autograd.Function.apply.__func__] = AutogradApplyValue(torch.autograd.Function.apply.__func__)
    for kind in ("grad", "grad_and_value", "vmap", "jacrev"):
        fn = getattr(torch.func, kind)
        table[fn] = FuncTransformValue(fn, kind)
    table[flex_attention] = FlexAttentionValue(flex_attention)
    table[create_block_mask] = CreateBlockMaskValue(create_block_mask)
    table[torch.func.functional_call] = FunctionalCallValue(torch.func.functional_call)
    # what functions marked with torch.compiler.nested_compile_region call (hops/layers.py)
    placeholder = sys.modules["torch._higher_order_ops.invoke_subgraph"].invoke_subgraph_placeholder
    table[placeholder] = NestedRegionValue(placeholder)
    return table
