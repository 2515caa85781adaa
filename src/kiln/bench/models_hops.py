"""Models built on higher-order operators (suite ``hops``): activation checkpointing
around each block, a data-dependent ``torch.cond`` between two heads, and a recurrent
cell run over the sequence by ``scan``.  Under Kiln each should be one graph with no
breaks; torch.compile gives the reference."""
from __future__ import annotations

import torch
from torch import nn
from torch._higher_order_ops import scan
from torch.utils.checkpoint import checkpoint

from .models_local import _with_labels, _with_loss
from .registry import register


class CheckpointedMLP(nn.Module):
    """Four residual MLP blocks, each under non-reentrant activation checkpointing."""

    def __init__(self, d=256, blocks=4, classes=10):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.GELU(),
                                                  nn.Linear(2 * d, d)) for _ in range(blocks))
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        for block in self.blocks:
            x = x + checkpoint(block, x, use_reentrant=False)
        return self.head(x)


class CondHeads(nn.Module):
    """Picks one of two heads by the sign of the batch mean: a branch on tensor data."""

    def __init__(self, d=256, classes=10):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d, d), nn.GELU())
        self.wide = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, classes))
        self.narrow = nn.Linear(d, classes)

    def forward(self, x):
        h = self.body(x)
        return torch.cond(h.mean() > 0, self.wide, self.narrow, (h,))


class ScanRNN(nn.Module):
    """An Elman cell over the sequence with ``scan``: one loop in the graph, not one copy
    of the cell per time step as a Python loop would unroll to."""

    def __init__(self, d=64, hidden=128, classes=10):
        super().__init__()
        self.inp = nn.Linear(d, hidden)
        self.rec = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):                       # x: (batch, seq, d)
        def step(h, xt):
            nxt = torch.tanh(self.inp(xt) + self.rec(h))
            return nxt, nxt.sum(-1)
        h0 = x.new_zeros(x.shape[0], self.rec.in_features)
        h, _ = scan(step, h0, x, dim=1)
        return self.head(h)


register("checkpointed_blocks", _with_loss(CheckpointedMLP),
         _with_labels(lambda g, seq, batch: {"x": torch.randn(batch, 256, generator=g)}, 10),
         suites=("hops",), description="residual MLP blocks under torch.utils.checkpoint")
register("cond_heads", _with_loss(CondHeads),
         _with_labels(lambda g, seq, batch: {"x": torch.randn(batch, 256, generator=g)}, 10),
         suites=("hops",), description="torch.cond between two heads on a data-dependent predicate")
register("scan_rnn", _with_loss(ScanRNN),
         _with_labels(lambda g, seq, batch: {"x": torch.randn(batch, 16, 64, generator=g)}, 10),
         suites=("hops",), description="a recurrent cell over the sequence with scan")
