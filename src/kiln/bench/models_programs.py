"""Small programs of the kinds users write outside the model zoo (suite ``programs``).

Why a suite of its own: the Hugging Face zoo and the local models are mostly one big
``forward`` of tensor ops.  The programs here are shaped after public example code and
domain programs, and each one leans on one thing the zoo does not: library code that
branches on tensor values (``nn.TransformerEncoder``'s fast-path checks,
``torch.distributions``' argument validation), sizes that depend on data (masked
indexing, ``torch.where(cond)`` routing, ``topk``), an integer argument that changes from
call to call (a decoding position), and numpy in the middle of a forward.  Each is
small (a few hundred thousand weights at most) and written for this suite.

=================  ====================================================================
``word_lm``        word-level language model: embedding, sinusoidal positions, causal
                   ``nn.TransformerEncoder`` (nested-tensor fast path left on), decoder
``gat``            graph attention network: self-loops dropped by masked indexing of the
                   edge list, attention over a dense adjacency, loss on masked nodes
``ppo``            a PPO actor-critic step: ``Categorical`` and ``Normal`` policies
                   (argument validation on), clipped surrogate, value and entropy terms
``moe``            mixture of experts: top-2 router, tokens gathered per expert with
                   ``torch.where(cond)``, combined with ``index_add_``
``retnet_step``    one recurrent retention step at position ``n`` (an ``int`` argument):
                   decay ``gamma ** n`` and rotary angles ``n * theta``
``numpy_prep``     preprocessing in numpy (``Tensor.numpy()``, ``np.log1p``, ``np.clip``,
                   ``np.finfo``, float64 statistics) then ``torch.from_numpy`` into an MLP
=================  ====================================================================

In ``--dynamic`` runs the sequence length of the series is the sequence (``word_lm``,
``moe``), the node count (``gat``, ``ppo``'s number of transitions) or the position ``n``
(``retnet_step``).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical, Normal

from .registry import register

SUITE = ("programs",)
BATCH = 4
VOCAB = 500


def _sized(make, seq):
    """An inputs function ``make(training, gen, seq, batch)`` at ``seq`` and :data:`BATCH`,
    with ``.at(seq, batch)`` for ``kiln bench --dynamic``."""

    def at(seq: int, batch: int):
        def inputs(training, gen):
            return make(training, gen, seq, batch)

        inputs.at = at
        return inputs

    return at(seq, BATCH)


# -- word_lm: the shape of PyTorch's word_language_model example (TransformerModel) --

class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512):
        super().__init__()
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(pos * div)
        pe[:, 0, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)

    def forward(self, x):                       # x: (seq, batch, d)
        return x + self.pe[:x.size(0)]


class WordLM(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, heads=4, hidden=128, layers=2):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, hidden, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.decoder = nn.Linear(d_model, vocab)

    def forward(self, tokens, targets=None):    # tokens: (seq, batch)
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.size(0), device=tokens.device)
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        logits = self.decoder(self.encoder(x, mask))     # is_causal found from the mask
        out = F.log_softmax(logits, dim=-1)
        if targets is None:
            return out
        return {"loss": F.nll_loss(out.view(-1, out.size(-1)), targets.view(-1)), "logits": out}


def _word_lm_inputs(training, gen, seq, batch):
    tokens = torch.randint(0, VOCAB, (seq + 1, batch), generator=gen)
    kw = {"tokens": tokens[:-1]}
    if training:
        kw["targets"] = tokens[1:]
    return kw


# -- gat: a two-layer graph attention network on an edge list --

class GATLayer(nn.Module):
    def __init__(self, d_in, d_out, heads):
        super().__init__()
        self.heads, self.d_out = heads, d_out
        self.proj = nn.Linear(d_in, heads * d_out, bias=False)
        self.a_src = nn.Parameter(torch.randn(heads, d_out) * 0.1)
        self.a_dst = nn.Parameter(torch.randn(heads, d_out) * 0.1)

    def forward(self, x, adj):                  # x: (N, d_in), adj: (N, N) bool
        n = x.size(0)
        h = self.proj(x).view(n, self.heads, self.d_out)
        e_src = (h * self.a_src).sum(-1)        # (N, heads)
        e_dst = (h * self.a_dst).sum(-1)
        scores = F.leaky_relu(e_dst.t().unsqueeze(2) + e_src.t().unsqueeze(1), 0.2)   # (heads, N, N)
        scores = scores.masked_fill(~adj, float("-inf"))
        att = torch.softmax(scores, dim=-1)
        return torch.einsum("hij,jhd->ihd", att, h).reshape(n, self.heads * self.d_out)


class GAT(nn.Module):
    def __init__(self, d_in=32, hidden=16, heads=4, classes=7):
        super().__init__()
        self.l1 = GATLayer(d_in, hidden, heads)
        self.l2 = GATLayer(hidden * heads, classes, 1)

    def forward(self, x, edge_index, node_mask, labels=None):
        n = x.size(0)
        keep = edge_index[0] != edge_index[1]                   # drop self loops ...
        src, dst = edge_index[:, keep]                          # ... by masked indexing
        adj = torch.eye(n, dtype=torch.bool, device=x.device)   # and add one of each back
        adj[dst, src] = True
        logits = self.l2(F.elu(self.l1(x, adj)), adj)
        picked = logits[node_mask]                              # the nodes we score
        if labels is None:
            return picked
        return {"loss": F.cross_entropy(picked, labels[node_mask]), "logits": picked}


def _gat_inputs(training, gen, seq, batch):
    nodes = 8 * seq // 4 + 4
    edges = 3 * nodes
    kw = {"x": torch.randn(nodes, 32, generator=gen),
          "edge_index": torch.randint(0, nodes, (2, edges), generator=gen),
          "node_mask": torch.rand(nodes, generator=gen) < 0.5}
    if training:
        kw["labels"] = torch.randint(0, 7, (nodes,), generator=gen)
    return kw


# -- ppo: one actor-critic loss evaluation over a batch of transitions --

class ActorCritic(nn.Module):
    def __init__(self, obs=16, actions=4, cont=2, hidden=64, clip=0.2):
        super().__init__()
        self.clip = clip
        self.body = nn.Sequential(nn.Linear(obs, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.pi = nn.Linear(hidden, actions)
        self.mu = nn.Linear(hidden, cont)
        self.log_std = nn.Parameter(torch.zeros(cont))
        self.v = nn.Linear(hidden, 1)

    def forward(self, obs, actions, cont_actions, old_log_probs, advantages, returns):
        h = self.body(obs)
        dist = Categorical(logits=self.pi(h))
        cont = Normal(self.mu(h), self.log_std.exp())
        log_probs = dist.log_prob(actions) + cont.log_prob(cont_actions).sum(-1)
        ratio = torch.exp(log_probs - old_log_probs)
        adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        surrogate = torch.min(ratio * adv, torch.clamp(ratio, 1 - self.clip, 1 + self.clip) * adv)
        value = self.v(h).squeeze(-1)
        entropy = dist.entropy().mean() + cont.entropy().sum(-1).mean()
        loss = -surrogate.mean() + 0.5 * F.mse_loss(value, returns) - 0.01 * entropy
        return {"loss": loss, "value": value, "log_probs": log_probs}


def _ppo_inputs(training, gen, seq, batch):
    n = 8 * seq
    return {"obs": torch.randn(n, 16, generator=gen), "actions": torch.randint(0, 4, (n,), generator=gen),
            "cont_actions": torch.randn(n, 2, generator=gen), "old_log_probs": -torch.rand(n, generator=gen) * 3,
            "advantages": torch.randn(n, generator=gen), "returns": torch.randn(n, generator=gen)}


# -- moe: a top-2 mixture of experts, tokens routed with torch.where(cond) --

class MoE(nn.Module):
    def __init__(self, d=64, experts=4, hidden=128, k=2, classes=10):
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d))
                                     for _ in range(experts))
        self.head = nn.Linear(d, classes)

    def forward(self, x, labels=None):          # x: (batch, seq, d)
        tokens = x.reshape(-1, x.size(-1))
        weights, chosen = torch.topk(torch.softmax(self.router(tokens), dim=-1), self.k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.where(chosen == e)
            out.index_add_(0, rows, expert(tokens[rows]) * weights[rows, slot].unsqueeze(-1))
        logits = self.head((tokens + out).view_as(x).mean(1))
        if labels is None:
            return logits
        return {"loss": F.cross_entropy(logits, labels), "logits": logits}


def _moe_inputs(training, gen, seq, batch):
    kw = {"x": torch.randn(batch, seq, 64, generator=gen)}
    if training:
        kw["labels"] = torch.randint(0, 10, (batch,), generator=gen)
    return kw


# -- retnet_step: one step of recurrent retention at an integer position --

class RetentionStep(nn.Module):
    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads, self.dk = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.norm = nn.GroupNorm(heads, d)
        self.register_buffer("gamma", 1 - 2.0 ** (-5 - torch.arange(heads, dtype=torch.float32)))
        self.register_buffer("theta", 10000 ** (-torch.arange(0, self.dk, 2, dtype=torch.float32) / self.dk))

    def rotate(self, t, n):                     # xPos-style rotation by position n
        angle = n * self.theta
        cos, sin = torch.cos(angle), torch.sin(angle)
        t1, t2 = t[..., 0::2], t[..., 1::2]
        return torch.stack((t1 * cos - t2 * sin, t1 * sin + t2 * cos), dim=-1).flatten(-2)

    def forward(self, x, state, n: int):        # x: (batch, d), state: (batch, heads, dk, dk)
        b = x.size(0)
        q, k, v = self.qkv(x).view(b, 3, self.heads, self.dk).unbind(1)
        q, k = self.rotate(q, n), self.rotate(k, n)
        decay = (self.gamma ** n).view(1, -1, 1, 1) / self.gamma.view(1, -1, 1, 1) ** (n - 1)
        state = decay * state + k.unsqueeze(-1) * v.unsqueeze(-2)
        y = torch.einsum("bhk,bhkv->bhv", q, state).reshape(b, -1)
        return {"y": self.out(self.norm(y)), "state": state}


def _retnet_inputs(training, gen, seq, batch):
    return {"x": torch.randn(batch, 64, generator=gen), "state": torch.randn(batch, 4, 16, 16, generator=gen),
            "n": seq}


# -- numpy_prep: feature preprocessing in numpy in the middle of the forward --

class NumpyPrep(nn.Module):
    def __init__(self, d=32, hidden=64, classes=5):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x, labels=None):          # x: (batch, d) raw, non-negative counts
        a = x.detach().numpy()
        a = np.log1p(np.clip(a, 0, None))
        mean, std = a.mean(axis=0), a.std(axis=0)           # float statistics in numpy
        a = (a - mean) / (std + np.finfo(np.float32).eps)
        a = a * (1 + np.arange(a.shape[1]) / a.shape[1])    # int64 / int: float64, as numpy does
        feats = torch.from_numpy(a).to(x.dtype)
        logits = self.mlp(feats)
        if labels is None:
            return logits
        return {"loss": F.cross_entropy(logits, labels), "logits": logits}


def _numpy_inputs(training, gen, seq, batch):
    kw = {"x": torch.randint(0, 50, (4 * batch, 32), generator=gen).float()}
    if training:
        kw["labels"] = torch.randint(0, 5, (4 * batch,), generator=gen)
    return kw


def _same(cls):
    return lambda training: cls()


register("word_lm", _same(WordLM), _sized(_word_lm_inputs, 16), suites=SUITE,
         description="word language model on a causal nn.TransformerEncoder")
register("gat", _same(GAT), _sized(_gat_inputs, 8), suites=SUITE,
         description="graph attention network; masked indexing of edges and nodes")
register("ppo", _same(ActorCritic), _sized(_ppo_inputs, 4), suites=SUITE,
         description="PPO actor-critic loss with torch.distributions")
register("moe", _same(MoE), _sized(_moe_inputs, 8), suites=SUITE,
         description="top-2 mixture of experts routed with torch.where(cond)")
register("retnet_step", _same(RetentionStep), _sized(_retnet_inputs, 5), suites=SUITE,
         loss=lambda out: out["y"].sum() + out["state"].square().mean(),
         description="recurrent retention step at an int position n")
register("numpy_prep", _same(NumpyPrep), _sized(_numpy_inputs, 8), suites=SUITE,
         description="numpy preprocessing (log1p, clip, statistics) before an MLP")
