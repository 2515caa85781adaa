"""Hand-written models: small, dependency-free shapes of program Kiln must handle.

They cover what the Hugging Face zoo does not stress on its own: a plain MLP (the
cheapest case, so it is in the quick suite), a CNN with batch norm (buffers that
mutate in training), an LSTM (an opaque recurrent op) and ``nn.TransformerEncoder``
(whose inference fast path branches on the input in Python).

For training each model is wrapped by :class:`WithLoss`, so that, like a Hugging
Face head, the module takes the labels and returns ``{"loss", "logits"}``.  The
harness then treats every model the same way.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .registry import register

BATCH = 8


class WithLoss(nn.Module):
    """``model(x)`` plus cross-entropy against ``labels``, returned as a dict."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x, labels):
        logits = self.model(x)
        return {"loss": F.cross_entropy(logits, labels), "logits": logits}


def _with_loss(build):
    return lambda training: WithLoss(build()) if training else build()


def _with_labels(make, classes, seq=0):
    """Inputs ``make(gen, seq, batch)`` plus labels in training, at ``seq`` and :data:`BATCH`.

    The returned function has ``.at(seq, batch)`` for ``kiln bench --dynamic``; models
    without a sequence dimension ignore ``seq`` (only their batch size varies).
    """

    def at(seq: int, batch: int):
        def inputs(training, gen):
            kw = make(gen, seq, batch)
            if training:
                kw["labels"] = torch.randint(0, classes, (batch,), generator=gen)
            return kw

        inputs.at = at
        return inputs

    return at(seq, BATCH)


class MLP(nn.Module):
    def __init__(self, d_in=256, hidden=512, classes=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.LayerNorm(hidden), nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(x)


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()

        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

        self.features = nn.Sequential(block(3, 16), block(16, 32), nn.MaxPool2d(2), block(32, 64), nn.MaxPool2d(2))
        self.head = nn.Linear(64, classes)

    def forward(self, x):
        x = self.features(x)
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class LSTMClassifier(nn.Module):
    def __init__(self, d_in=64, hidden=128, classes=10):
        super().__init__()
        self.lstm = nn.LSTM(d_in, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


class Encoder(nn.Module):
    def __init__(self, d_model=128, heads=4, classes=10):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=256, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, classes)

    def forward(self, x):
        return self.head(self.encoder(x).mean(dim=1))


register("mlp", _with_loss(MLP), _with_labels(lambda g, s, b: {"x": torch.randn(b, 256, generator=g)}, 10),
         suites=("quick", "local"), description="3-layer MLP with GELU and LayerNorm")
register("cnn", _with_loss(SmallCNN),
         _with_labels(lambda g, s, b: {"x": torch.randn(b, 3, 32, 32, generator=g)}, 10),
         suites=("local",), description="conv + batch norm + pooling")
register("lstm", _with_loss(LSTMClassifier),
         _with_labels(lambda g, s, b: {"x": torch.randn(b, s, 64, generator=g)}, 10, seq=16),
         suites=("local",), description="2-layer LSTM classifier")
register("transformer_encoder", _with_loss(Encoder),
         _with_labels(lambda g, s, b: {"x": torch.randn(b, s, 128, generator=g)}, 10, seq=32),
         suites=("local",), description="nn.TransformerEncoder, 2 layers")
