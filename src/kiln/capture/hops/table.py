"""The functions Kiln traces as higher-order operators, by the object users call."""
from __future__ import annotations

import sys

import torch
import torch._higher_order_ops  # noqa: F401  (registers cond, map, while_loop, scan)

from .control_flow import CondValue, MapValue, ScanValue, WhileLoopValue


def hop_functions() -> dict:
    hops = sys.modules["torch._higher_order_ops"]
    table = {
        torch.cond: CondValue(torch.cond),
        sys.modules["torch._higher_order_ops.map"].map: MapValue(sys.modules["torch._higher_order_ops.map"].map),
        hops.while_loop: WhileLoopValue(hops.while_loop),
        hops.scan: ScanValue(hops.scan),
    }
    return table
