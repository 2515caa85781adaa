"""nn.Module calls inlined: nested modules, ModuleList / ModuleDict / Sequential,
parameters and buffers (read and updated in place), module attributes and
properties, super().forward, and modules passed as arguments."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .capture_harness import Case, I, parametrize, run_case


def seeded(cls, *args, **kwargs):
    torch.manual_seed(0)
    return cls(*args, **kwargs)


def x8(r):
    return (r.randn(2, 8),)


def x4(r):
    return (r.randn(3, 4),)


class MLP(nn.Module):
    def __init__(self, d=8, h=16):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class ParamsAndBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(-1, 1, 4))
        self.register_buffer("offset", torch.full((4,), 0.5))
        self.register_buffer("scratch", torch.zeros(4), persistent=False)
        self.scale = 2.0

    def forward(self, x):
        return (x * self.weight + self.offset) * self.scale + self.scratch


class Counting(nn.Module):
    """Updates a buffer in place and a Python attribute on every call."""

    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("running", torch.zeros(4))
        self.calls = 0

    def forward(self, x):
        self.steps += 1
        self.running.mul_(0.9).add_(x.mean(0) * 0.1)
        self.calls += 1
        return x - self.running


class Stack(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(n)])
        self.norms = nn.ModuleList(nn.LayerNorm(4) for _ in range(n))

    def forward(self, x):
        for i, (layer, norm) in enumerate(zip(self.layers, self.norms)):
            x = x + norm(layer(x)) * (i + 1)
        return x, len(self.layers)


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"cls": nn.Linear(4, 2), "reg": nn.Linear(4, 1)})

    def forward(self, x):
        out = {name: head(x) for name, head in self.heads.items()}
        out["both"] = self.heads["cls"](x).sum(-1, keepdim=True) + out["reg"]
        return out, list(self.heads.keys()), "reg" in self.heads


class SeqIndex(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2), nn.Tanh()))

    def forward(self, x):
        h = self.seq[0](x)
        return self.seq[-1](h), self.seq(x), len(self.seq)


class Branchy(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        if self.mode == "residual":
            return x + self.lin(x)
        if self.training:
            return self.lin(x) * 2
        return self.lin(x)


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class Derived(Base):
    def forward(self, x):
        return super().forward(x).relu() + 1


class WithProperty(nn.Module):
    def __init__(self):
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(0.5))
        self.lin = nn.Linear(4, 4)

    @property
    def scaled_alpha(self):
        return self.alpha * 2

    @property
    def out_dim(self):
        return self.lin.out_features

    def project(self, x):
        return self.lin(x) * self.scaled_alpha

    def forward(self, x):
        return self.project(x).reshape(-1, self.out_dim)


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.out = nn.Linear(4, 10, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, idx):
        return self.out(self.emb(idx))


class ParamLoops(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.b = nn.Linear(3, 2, bias=False)

    def forward(self, x):
        reg = sum(p.pow(2).sum() for p in self.parameters())
        names = [n for n, _ in self.named_parameters()]
        kids = [type(m).__name__ for m in self.children()]
        return self.b(self.a(x)), reg, names, kids


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flat = nn.Flatten()
        self.drop = nn.Dropout(0.0)   # deterministic in training mode too

    def forward(self, x):
        return self.drop(self.flat(self.pool(F.relu(self.bn(self.conv(x))))))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def encode(self, x, *, scale=1.0):
        return self.lin(x) * scale

    def forward(self, x):
        return self.encode(x)


class UsesEncoderMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Encoder()
        self.ident = nn.Identity()

    def forward(self, x):
        return self.ident(self.enc.encode(x, scale=0.5)), self.enc.lin.weight.shape, self.enc.lin.in_features


class ReturnsStructure(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)

    def forward(self, x, mask=None):
        logits = self.lin(x)
        if mask is not None:
            logits = logits.masked_fill(mask, -1e9)
        return {"logits": logits, "probs": logits.softmax(-1)}, (logits.argmax(-1),)


def call_module_argument(mod, x):
    return mod(x) * 2, mod.fc1.weight.sum()


def functional_on_params(mod, x):
    return F.linear(x, mod.fc1.weight, mod.fc1.bias), mod.fc2.weight.T @ mod.fc2.weight


def in_eval(mod):
    mod.eval()
    return mod


def requires_grad_inputs(r):
    return (r.randn(2, 8, requires_grad=True),)


CASES = [
    Case("linear_module", seeded(nn.Linear, 8, 3), x8, 1, 1),
    Case("mlp_nested", seeded(MLP), x8, 1, 3),
    Case("mlp_requires_grad", seeded(MLP), requires_grad_inputs, 1, 3),
    Case("mlp_no_grad_mode", seeded(MLP), x8, 1, 3, grad_mode=False),
    Case("params_and_buffers", seeded(ParamsAndBuffers), x4, 1, 4),
    # `calls` is only incremented and written back (never branched on): it stays unspecialised
    Case("buffer_updated_in_place", seeded(Counting), x4, 1, 6),
    Case("module_list_zip", seeded(Stack), x4, 1, 12),
    Case("module_dict", seeded(Heads), x4, 1, 5),
    Case("sequential_index_nested", seeded(SeqIndex), x4, 1, 7),
    Case("module_config_branch", seeded(Branchy, "residual"), x4, 1, 2),
    Case("module_training_branch", seeded(Branchy, "plain"), x4, 1, 2),
    Case("module_eval_branch", in_eval(seeded(Branchy, "plain")), x4, 1, 1),
    Case("super_forward", seeded(Derived), x4, 1, 3),
    Case("module_property", seeded(WithProperty), x4, 1, 4),
    Case("tied_weights", seeded(Tied), lambda r: r.randint(0, 10, 2, 3), 1, 2),
    Case("parameter_iteration", seeded(ParamLoops), x4, 1, 11),
    Case("conv_bn_train", seeded(Conv), lambda r: r.randn(2, 2, 5, 5), 1, 7, atol=1e-5, rtol=1e-4),
    Case("conv_bn_eval", in_eval(seeded(Conv)), lambda r: r.randn(2, 2, 5, 5), 1, 6, atol=1e-5, rtol=1e-4),
    Case("submodule_method_call", seeded(UsesEncoderMethod), x4, 1, 2),
    Case("returns_structure", seeded(ReturnsStructure), x4, 1, 3),
    Case("returns_structure_masked", seeded(ReturnsStructure),
         lambda r: I(r.randn(3, 4), mask=r.randbool(3, 2)), 1, 4),
    Case("module_as_argument", call_module_argument, lambda r: I(seeded(MLP), r.randn(2, 8)), 1, 5),
    Case("functional_on_params", functional_on_params, lambda r: I(seeded(MLP), r.randn(2, 8)), 1, 3),
    Case("builtin_layers", seeded(nn.Sequential, nn.LayerNorm(4), nn.SiLU(), nn.Softmax(-1)), x4, 1, 3),
    Case("embedding_bag_of_layers", seeded(nn.Sequential, nn.Embedding(10, 4), nn.Flatten(0), nn.Identity()),
         lambda r: r.randint(0, 10, 3), 1, 2),
]


@parametrize(CASES)
def test_program(case):
    run_case(case)
