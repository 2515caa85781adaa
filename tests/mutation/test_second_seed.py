"""The historical "second seed": a compiled frame returns ``x.contiguous().view(1, 1024, -1)``
of its input and the caller mutates that output in place inside a training step.  In
eager the output is a view of the input, so the input changes too and autograd rebases
the input's history onto the in-place op; compiled must do exactly the same."""
import time

import pytest
import torch

import kiln

pytestmark = pytest.mark.filterwarnings("ignore")


def reshape(x):
    return x.contiguous().view(1, 1024, -1)


class Model(torch.nn.Module):
    def __init__(self, reshape_fn):
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 4)
        self.reshape = reshape_fn

    def forward(self, inp):
        h = self.proj(inp)                 # (1024, 16), not a leaf
        y = self.reshape(h)                # a view of h
        y.mul_(2).add_(0.5)                # in place on the output: h changes too
        return self.head(torch.tanh(h)).sum() + y.pow(2).mean()


def train_step(model, inp):
    model.zero_grad(set_to_none=True)
    loss = model(inp)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def run_seed(backend, seed):
    torch.manual_seed(seed)
    eager = Model(reshape)
    torch.manual_seed(seed)
    compiled = Model(kiln.compile(reshape, backend=backend))
    torch.manual_seed(100 + seed)
    inp = torch.randn(1024, 16)
    for _ in range(2):   # a second step runs the cached entry
        el, eg = train_step(eager, inp)
        cl, cg = train_step(compiled, inp)
        assert torch.equal(el, cl), (el, cl)
        for name in eg:
            assert torch.equal(eg[name], cg[name]), name
        with torch.no_grad():
            for p, q in zip(eager.parameters(), compiled.parameters()):
                p.sub_(0.1 * p.grad)
                q.sub_(0.1 * q.grad)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "aten"])
def test_second_seed(backend):
    for seed in range(2):
        run_seed(backend, seed)


def test_second_seed_output_aliases_input_storage():
    for backend in ("eager", "aot_eager", "aten"):
        kiln.reset()
        f = kiln.compile(reshape, backend=backend)
        h = torch.randn(1024, 4, requires_grad=True) * 1
        y = f(h)
        assert y.untyped_storage().data_ptr() == h.untyped_storage().data_ptr() and y._base is h
        y.mul_(3)
        assert torch.equal(h.view(1, 1024, -1), y)


def test_second_seed_inductor():   # about 3 s warm, 9 s with a cold inductor cache
    t0 = time.perf_counter()
    for seed in range(2):
        run_seed("inductor", seed)
    print(f"inductor second seed: {time.perf_counter() - t0:.1f}s")
