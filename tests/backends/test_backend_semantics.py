"""Every backend must behave like eager on Kiln-style graphs: values, gradients,
input mutation and output aliasing.  Graphs are made with torch.fx by hand or with
symbolic_trace, the way Kiln's capture would hand them over."""
from __future__ import annotations

from operator import setitem

import pytest
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kiln.backends import lookup
from kiln.debug import check_same_behaviour, compare, fp64_copy

BACKENDS = ["eager", "aot_eager", "aten", pytest.param("inductor", marks=pytest.mark.slow)]
AOT_BACKENDS = ["aot_eager", "aten", pytest.param("inductor", marks=pytest.mark.slow)]


def trace(fn) -> torch.fx.GraphModule:
    """symbolic_trace, recording calls to ``setitem`` as nodes (``x[i] = v`` cannot be traced)."""
    root = fn if isinstance(fn, nn.Module) else nn.Module()
    graph = torch.fx.Tracer(autowrap_functions=(setitem,)).trace(fn)
    return torch.fx.GraphModule(root, graph)


def compile_with(backend: str, gm: torch.fx.GraphModule, inputs):
    return lookup(backend)(gm, list(inputs))


def seeded(make):
    def inputs():
        torch.manual_seed(0)
        return make()
    return inputs


# ---------------------------------------------------------------- graphs

def mlp_fn(x, w1, b1, w2, ln_w, ln_b):
    h = F.gelu(F.linear(x, w1, b1))
    h = F.layer_norm(h, (h.shape[-1],), ln_w, ln_b)
    return (h @ w2.t(), h.mean())


def mlp_inputs():
    return [torch.randn(8, 16), torch.randn(32, 16, requires_grad=True), torch.randn(32, requires_grad=True),
            torch.randn(4, 32, requires_grad=True), torch.randn(32, requires_grad=True),
            torch.randn(32, requires_grad=True)]


def attention_fn(q, k, v):
    b, t, d = q.shape
    qh = q.view(b, t, 2, d // 2).transpose(1, 2)
    kh = k.view(b, t, 2, d // 2).transpose(1, 2)
    vh = v.view(b, t, 2, d // 2).transpose(1, 2)
    att = torch.softmax(qh @ kh.transpose(-1, -2) / (d // 2) ** 0.5, dim=-1)
    out = (att @ vh).transpose(1, 2).reshape(b, t, d)
    return (out, att.sum(dim=-1))


def attention_inputs():
    return [torch.randn(2, 6, 8, requires_grad=True) for _ in range(3)]


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 24)
        self.fc2 = nn.Linear(24, 3)

    def forward(self, x):
        return (self.fc2(torch.tanh(self.fc1(x))),)


def grad_mode_graph() -> torch.fx.GraphModule:
    """x*2, then (a no_grad region) a*3, then a + b: gradient flows through a only."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.mul, (x, 2))
    g.call_function(torch._C._set_grad_enabled, (False,))
    b = g.call_function(torch.mul, (a, 3))
    g.call_function(torch._C._set_grad_enabled, (True,))
    g.output((g.call_function(torch.add, (a, b)),))
    return torch.fx.GraphModule(nn.Module(), g)


def loss_and_grads(fn, inputs, params=()):
    """Run fn, reduce the floating outputs to a loss, backprop; return outputs and grads."""
    outs = fn(*inputs)
    loss = sum((o * torch.linspace(-1, 1, o.numel(), dtype=o.dtype).view_as(o)).sum()
               for o in outs if o.requires_grad)
    loss.backward()
    grads = {f"input{i}": t.grad for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.requires_grad}
    grads.update({name: p.grad for name, p in params})
    return outs, grads


# ---------------------------------------------------------------- forward and training

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make", [(mlp_fn, mlp_inputs), (attention_fn, attention_inputs)],
                         ids=["mlp", "attention"])
def test_forward_matches_eager(backend, fn, make):
    gm = trace(fn)
    make = seeded(make)
    compiled = compile_with(backend, gm, make())
    report = check_same_behaviour(gm.forward, compiled, make, fn_fp64=gm.forward)
    assert report, str(report)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make", [(mlp_fn, mlp_inputs), (attention_fn, attention_inputs)],
                         ids=["mlp", "attention"])
def test_training_gradients_match_eager(backend, fn, make):
    gm = trace(fn)
    make = seeded(make)
    compiled = compile_with(backend, gm, make())
    e_out, e_grads = loss_and_grads(gm.forward, make())
    c_out, c_grads = loss_and_grads(compiled, make())
    r_out, r_grads = loss_and_grads(gm.forward, fp64_copy(make()))
    assert compare(e_out, c_out, r_out), str(compare(e_out, c_out, r_out))
    report = compare(e_grads, c_grads, r_grads, name="grad")
    assert report.ok, str(report)
    assert all(g is not None for g in c_grads.values())


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_graph_training(backend):
    torch.manual_seed(0)
    net = SmallNet()
    gm = trace(net)  # parameters reached through call_module, as symbolic_trace leaves them
    x = torch.randn(5, 12)
    compiled = compile_with(backend, gm, [x])
    ref_gm = fp64_copy(gm)
    e_out, e_grads = loss_and_grads(gm.forward, [x], gm.named_parameters())
    grads_eager = {k: v.clone() for k, v in e_grads.items()}
    gm.zero_grad(set_to_none=True)
    c_out, c_grads = loss_and_grads(compiled, [x], gm.named_parameters())
    r_out, r_grads = loss_and_grads(ref_gm.forward, [x.double()], ref_gm.named_parameters())
    assert compare(e_out, c_out, r_out).ok
    report = compare(grads_eager, c_grads, r_grads, name="grad")
    assert report.ok, str(report)
    with torch.no_grad():  # parameters owned by the graph module still require grad
        assert not compiled(x)[0].requires_grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_mode_region(backend):
    gm = grad_mode_graph()
    x = torch.randn(5, requires_grad=True)
    compiled = compile_with(backend, gm, [x])
    (out,) = compiled(x)
    out.sum().backward()
    assert torch.allclose(out, x * 2 + x * 6)
    assert torch.equal(x.grad, torch.full_like(x, 2.0))  # the no_grad branch adds nothing
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("backend", BACKENDS)
def test_single_tensor_and_nested_outputs(backend):
    def single(x):
        return torch.sin(x) * 2

    def nested(x):
        return {"a": x + 1, "b": (x * 2, x.sum())}

    x = torch.randn(4)
    for fn in (single, nested):
        gm = trace(fn)
        compiled = compile_with(backend, gm, [x])
        assert compare(gm(x), compiled(x), fp64_copy(gm)(x.double())).ok


@pytest.mark.parametrize("backend", AOT_BACKENDS)
def test_baked_scalar_input_is_guarded(backend):
    from kiln.exc import BackendError

    def fn(x, n):
        return (x * n,)

    gm = trace(fn)
    compiled = compile_with(backend, gm, [torch.ones(3), 3])
    assert torch.equal(compiled(torch.ones(3), 3)[0], torch.full((3,), 3.0))
    with pytest.raises(BackendError, match="baked in"):
        compiled(torch.ones(3), 5)


# ---------------------------------------------------------------- input mutation

def add_inplace(x, y):
    x.add_(1)
    return (x * y,)


def setitem_fn(x, y):
    setitem(x, 0, 1.0)                 # x[0] = 1.0
    setitem(x, slice(1, 3), y[:2])     # x[1:3] = y[:2]
    return ((x + y).sum(),)


def view_then_mul(x, y):
    v = x.view(-1)[2:6]
    v.mul_(2)
    return (v + y.sum(), x.t())


def mutate_non_contiguous(x, y):
    xt = x.t()
    xt[0].add_(y[0])
    return (y * 2,)


MUTATIONS = [add_inplace, setitem_fn, view_then_mul, mutate_non_contiguous]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", MUTATIONS, ids=lambda f: f.__name__)
def test_input_mutation_reaches_real_inputs(backend, fn):
    gm = trace(fn)
    make = seeded(lambda: [torch.randn(4, 4), torch.randn(4, 4)])
    compiled = compile_with(backend, gm, make())
    report = check_same_behaviour(gm.forward, compiled, make, fn_fp64=gm.forward)
    assert report, str(report)
    assert report.eager.mutated == ("input[0]",)  # the graphs really do mutate (sanity)


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_mutation_in_training(backend):
    """A buffer-like input updated in place while gradients flow to another input."""
    def fn(x, stats):
        stats.mul_(0.9).add_(x.detach().mean(0) * 0.1)
        return ((x - stats).pow(2).sum(),)

    gm = trace(fn)
    make = seeded(lambda: [torch.randn(6, 3, requires_grad=True), torch.zeros(3)])
    compiled = compile_with(backend, gm, make())
    (ex, es), (cx, cs) = make(), make()
    gm(ex, es)[0].backward()
    compiled(cx, cs)[0].backward()
    assert torch.allclose(es, cs) and not torch.equal(cs, torch.zeros(3))
    assert torch.allclose(ex.grad, cx.grad)


# ---------------------------------------------------------------- output aliasing

def alias_view(x):
    return (x.contiguous().view(1, 1024, -1),)


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_view_of_input_aliases(backend):
    gm = trace(alias_view)
    make = seeded(lambda: [torch.randn(1024, 8)])
    compiled = compile_with(backend, gm, make())
    report = check_same_behaviour(gm.forward, compiled, make)
    assert report, str(report)
    assert report.compiled.output_aliases == {"output[0]": ("input[0]",)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_caller_mutating_aliased_output_in_training_step(backend):
    """Regression: the caller writes into the returned view; the input must change, and
    the gradient must see that write, exactly as in eager."""
    gm = trace(alias_view)

    def step(fn_for):
        torch.manual_seed(0)
        w = torch.randn(1024, 8, requires_grad=True)
        hidden = w * 2                      # a non-leaf input, as inside a model
        fn = fn_for(hidden)
        (out,) = fn(hidden)
        assert out.untyped_storage().data_ptr() == hidden.untyped_storage().data_ptr()
        out.mul_(3)                         # the caller's in-place update
        assert torch.equal(hidden.detach(), w.detach() * 6)
        loss = (hidden * torch.linspace(0, 1, hidden.numel()).view_as(hidden)).sum()
        loss.backward()
        return hidden.detach(), w.grad

    eager_h, eager_g = step(lambda h: gm.forward)
    comp_h, comp_g = step(lambda h: compile_with(backend, gm, [h]))
    assert torch.equal(eager_h, comp_h)
    assert torch.allclose(eager_g, comp_g)


@pytest.mark.parametrize("backend", BACKENDS)
def test_aliased_output_mutated_under_no_grad(backend):
    gm = trace(alias_view)
    x = torch.randn(1024, 8)
    compiled = compile_with(backend, gm, [x])
    with torch.no_grad():
        (out,) = compiled(x)
        out.add_(1)
    assert torch.equal(out.view(1024, 8), x)


# ---------------------------------------------------------------- autograd situations

@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_in_training_then_called_under_no_grad(backend):
    gm = trace(mlp_fn)
    make = seeded(mlp_inputs)
    compiled = compile_with(backend, gm, make())
    with torch.no_grad():
        outs = compiled(*make())
    assert not any(o.requires_grad for o in outs)
    _, grads = loss_and_grads(compiled, make())  # and training still works afterwards
    assert all(g is not None for g in grads.values())


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_under_no_grad_then_used_for_training(backend):
    gm = trace(mlp_fn)
    make = seeded(mlp_inputs)
    with torch.no_grad():
        compiled = compile_with(backend, gm, make())
    e_out, e_grads = loss_and_grads(gm.forward, make())
    c_out, c_grads = loss_and_grads(compiled, make())
    assert all(o.requires_grad for o in c_out)
    assert compare(e_grads, c_grads, None, name="grad").ok


@pytest.mark.parametrize("backend", BACKENDS)
def test_frozen_inputs_get_no_gradient(backend):
    gm = trace(mlp_fn)
    make = seeded(mlp_inputs)
    compiled = compile_with(backend, gm, make())
    inputs = make()
    inputs[1].requires_grad_(False)  # freeze w1 after compiling
    _, grads = loss_and_grads(compiled, inputs)
    assert inputs[1].grad is None and "input1" not in grads
    assert all(g is not None for g in grads.values())
