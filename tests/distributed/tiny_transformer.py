"""A small decoder-only transformer for the distributed tests and benchmark: token and
position embeddings, pre-norm blocks (causal attention, GELU MLP), a head and the
cross-entropy loss in ``forward``.  No dropout, so eager and compiled runs are the same
function of the weights.  ``graph_break=True`` puts a ``kiln.graph_break()`` between the
blocks, to check that DDP's graph splitting and FSDP2 work across breaks."""
from __future__ import annotations

import math

import torch
from torch import nn

import kiln

VOCAB, SEQ = 128, 16


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        head_dim = d // self.heads
        q, k, v = (z.view(b, t, self.heads, head_dim).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, dim=-1))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        attn = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class TinyTransformer(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 2, layers: int = 2, graph_break: bool = False):
        super().__init__()
        self.graph_break = graph_break
        self.tok = nn.Embedding(VOCAB, dim)
        self.pos = nn.Parameter(torch.randn(SEQ, dim) * 0.02)
        self.layers = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, VOCAB)

    def forward(self, ids, labels):
        x = self.tok(ids) + self.pos[: ids.shape[1]]
        for i, layer in enumerate(self.layers):
            if self.graph_break and i == 1:
                kiln.graph_break()
            x = layer(x)
        logits = self.head(self.ln(x))
        return nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())


def build(seed: int = 0, **kwargs) -> TinyTransformer:
    torch.manual_seed(seed)
    return TinyTransformer(**kwargs)


def batch(step: int, rank: int, batch_size: int = 2):
    """Each rank trains on its own data (so the gradient all-reduce matters)."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    return (torch.randint(0, VOCAB, (batch_size, SEQ), generator=g),
            torch.randint(0, VOCAB, (batch_size, SEQ), generator=g))
