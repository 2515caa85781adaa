"""kiln.export of functions and modules with static shapes: a real ExportedProgram whose
signature names the module's parameters and buffers, equal to eager on other inputs,
after a save/load round trip too; Python control flow on shapes and values specialised."""
from __future__ import annotations

import dataclasses
import enum

import pytest
import torch
from torch.export.graph_signature import InputKind

import kiln
from tests.export.harness import check_export, round_trip


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x * self.scale


def test_function_static():
    def f(x, y):
        z = x.sin() + y
        if x.shape[0] == 3:      # a Python branch on a size: specialised
            z = z * 2
        return z, x.cos()

    ep = check_export(f, (torch.randn(3, 4), torch.randn(3, 4)),
                      others=[(torch.randn(3, 4), torch.randn(3, 4))], ops=4)
    assert [s.kind for s in ep.graph_signature.input_specs] == [InputKind.USER_INPUT] * 2


def test_module_signature_names_parameters_and_buffers():
    m = MLP()
    ep = check_export(m, (torch.randn(2, 4),), others=[(torch.randn(2, 4),)], ops=7)
    sig = ep.graph_signature
    assert list(sig.parameters) == [n for n, _ in m.named_parameters()]
    assert list(sig.buffers) == ["scale"]
    assert set(ep.state_dict) == set(m.state_dict())


def test_module_kwargs_and_nested_outputs():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x, extra=None, *, scale=1.0):
            out = {"a": self.lin(x) * scale, "b": [x.sum()]}
            if extra is not None:
                out["c"] = extra["t"] + 1
            return out

    x, t = torch.randn(2, 3), torch.randn(5)
    check_export(M(), (x,), {"extra": {"t": t}, "scale": 2.0},
                 others=[((torch.randn(2, 3),), {"extra": {"t": torch.randn(5)}, "scale": 2.0})], ops=4)


@dataclasses.dataclass
class Config:
    width: int
    act: str
    residual: bool


class Act(enum.Enum):
    RELU = "relu"
    GELU = "gelu"


def test_config_dataclass_and_enum_specialised():
    cfg = Config(4, "gelu", True)

    class Block(torch.nn.Module):
        def __init__(self, cfg, mode):
            super().__init__()
            self.cfg, self.mode = cfg, mode
            self.lin = torch.nn.Linear(cfg.width, cfg.width)
            self.opts = {"eps": 1e-5, "norm": True}

        def forward(self, x):
            y = self.lin(x)
            y = torch.nn.functional.gelu(y) if self.mode is Act.GELU else torch.relu(y)
            if self.opts["norm"]:
                y = torch.nn.functional.layer_norm(y, (self.cfg.width,), eps=self.opts["eps"])
            return x + y if self.cfg.residual else y

    check_export(Block(cfg, Act.GELU), (torch.randn(2, 4),), others=[(torch.randn(2, 4),)], ops=4)


def test_module_hooks_are_part_of_the_program():
    """torch.export exports what calling the module does: its hooks too."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x)

    m = M()
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 3,))
    m.register_forward_hook(lambda mod, args, out: out * 10)
    m.lin.register_forward_hook(lambda mod, args, out: out + 100)
    check_export(m, (torch.randn(1, 2),), others=[(torch.randn(1, 2),)], ops=4)


def test_a_hook_with_a_python_side_effect_is_refused():
    calls = []

    class Counting(torch.nn.Module):
        def forward(self, x):
            return x + 1

    m = Counting()
    m.register_forward_hook(lambda *a: calls.append(1))
    with pytest.raises(kiln.Unsupported, match=r"(?s)changes Python state.*test_static.py:\d+.*calls.append"):
        kiln.export(m, (torch.randn(2),))


def test_an_input_of_another_dtype_is_refused():
    # the capture's tensor guard on dtype, which no shape constraint can say, is an op of
    # the exported program: a float64 input fails there, not somewhere inside (or not at all)
    def scale(x):
        return x * 2

    ep = check_export(scale, (torch.randn(3),), others=[(torch.randn(3),)], ops=1)
    with pytest.raises(RuntimeError, match="dtype mismatch"):
        ep.module()(torch.randn(3, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="dtype mismatch"):
        round_trip(ep).module()(torch.randn(3, dtype=torch.float64))
