"""A graph Kiln captured without symbols reaches inductor with static sizes.

Kiln hands graphs to backends with on-disk caches (inductor) inside a tracing context
whose fake mode holds static fakes of the inputs (``compile_frame.static_fake_mode``).
AOTAutograd fakes the real inputs again in that mode; if the mode has lost its fakes
(its memo holds them weakly) every size becomes a fresh symbol and inductor compiles a
dynamic-shape graph: bigger C++ kernels, slower cold compiles than torch.compile's.

Inductor's inner compiler is replaced here (through ``INNER_COMPILER_WRAPPERS``) by one
that records what it was given and runs the graph in Python, so no C++ is compiled.
"""
from __future__ import annotations

import gc

import pytest
import torch
import torch.nn as nn

import kiln
from kiln.backends import _aot
from kiln.capture.frames.compile_frame import static_fake_mode


def _symbolic(value) -> bool:
    if isinstance(value, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride()))
    return isinstance(value, (torch.SymInt, torch.SymFloat))


@pytest.fixture
def inner_inputs():
    """Records (direction, example inputs) of every inductor inner compile."""
    from functorch.compile import make_boxed_func

    seen: list[tuple[str, list]] = []

    def wrap(compiler, backend_name, which):
        if backend_name != "inductor":
            return compiler

        def record(gm, example_inputs, *args, **kwargs):
            seen.append((which, list(example_inputs)))
            return make_boxed_func(gm.forward)

        return record

    _aot.INNER_COMPILER_WRAPPERS.append(wrap)
    try:
        yield seen
    finally:
        _aot.INNER_COMPILER_WRAPPERS.remove(wrap)


class RMSNormMLP(nn.Module):
    """A float attribute read in forward (T5's ``variance_epsilon``) and parameters."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)
        self.weight = nn.Parameter(torch.ones(32))
        self.variance_epsilon = 1e-6

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.variance_epsilon) * self.weight
        return self.fc2(h)


def test_static_fake_mode_keeps_its_fakes():
    p = nn.Parameter(torch.randn(10, 4))
    x = torch.randn(3, 5)
    mode = static_fake_mode([p, x, 1.5])
    gc.collect()
    for real in (p, x):
        fake = mode.from_tensor(real)   # as AOTAutograd fakes its inputs: no static_shapes
        assert not _symbolic(fake)
        assert fake.shape == real.shape
        assert mode.from_tensor(real) is fake
    assert not mode.shape_env.var_to_range   # no symbol was made


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_static_graph_reaches_inductor_with_static_sizes(inner_inputs, train):
    torch.manual_seed(0)
    model = RMSNormMLP()
    x = torch.randn(4, 16)
    compiled = kiln.compile(model, backend="inductor")
    for x in (x, torch.randn(4, 16)):
        with torch.set_grad_enabled(train):
            expected = model(x)
            got = compiled(x)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        if train:
            got.sum().backward()
    # one forward (and one backward) compile serves both calls
    directions = [which for which, _ in inner_inputs]
    assert directions == (["forward", "backward"] if train else ["forward"])
    for which, inputs in inner_inputs:
        symbolic = [i for i, v in enumerate(inputs) if _symbolic(v)]
        assert not symbolic, f"{which} graph inputs {symbolic} have symbolic sizes"


def test_dynamic_graph_still_reaches_inductor_with_symbols(inner_inputs):
    torch.manual_seed(0)
    model = RMSNormMLP()
    compiled = kiln.compile(model, backend="inductor", dynamic=True)
    with torch.no_grad():
        for batch in (4, 6):
            x = torch.randn(batch, 16)
            torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    assert len(inner_inputs) == 1   # one compile serves both batch sizes
    (_, inputs), = inner_inputs
    assert any(_symbolic(v) for v in inputs)
