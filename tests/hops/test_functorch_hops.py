"""torch.func transforms and flex_attention's score_mod traced as subgraphs."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

import kiln

from .harness import check

BACKENDS = ["eager", "aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]
W = torch.randn(3)


def grad_closure(x, y):
    return torch.func.grad(lambda a: (a.sin() * W * y).sum())(x)


def grad_and_value_two(x):
    return torch.func.grad_and_value(lambda a, b: (a * b * W).sum(), argnums=(0, 1))(x, x * 2)


def vmap_matmul(x, y):
    return torch.func.vmap(lambda a: a @ y + W.sum())(x)


def jacrev_sin(x):
    return torch.func.jacrev(lambda a: a.sin() * W)(x)


def loss_with_aux(a, y):
    out = (a.sin() * y).sum()
    return out, {"scaled": out * 2, "parts": (a.cos(), y * W)}   # aux: any pytree of tensors


def grad_has_aux(x, y):
    g, aux = torch.func.grad(loss_with_aux, has_aux=True)(x, y)
    return g + 1, aux["scaled"], aux["parts"]


def grad_and_value_has_aux(x, y):
    grads, (value, aux) = torch.func.grad_and_value(loss_with_aux, argnums=(0, 1), has_aux=True)(x, y)
    return grads, value, aux


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make", [
    (grad_closure, lambda: (torch.randn(3), torch.randn(3))),
    (grad_and_value_two, lambda: (torch.randn(3),)),
    (vmap_matmul, lambda: (torch.randn(4, 3), torch.randn(3, 2))),
    (jacrev_sin, lambda: (torch.randn(3),)),
    (grad_has_aux, lambda: (torch.randn(3), torch.randn(3))),
    (grad_and_value_has_aux, lambda: (torch.randn(3), torch.randn(3))),
])
def test_transforms(fn, make, backend):
    check(fn, [make(), make()], backend)


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_vmap_gradients(backend):
    def f(x, y):
        return torch.func.vmap(lambda a: (a * y).sin())(x)
    check(f, [(torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True))], backend, grad=True)


def attention_with_bias(q, k, v, bias):
    def score_mod(score, b, h, q_idx, kv_idx):
        return score + bias[q_idx, kv_idx]        # a closure over a bias tensor
    return flex_attention(q, k, v, score_mod=score_mod)


@pytest.mark.parametrize("backend", BACKENDS)
def test_flex_attention_score_mod_closure(backend):
    def make():
        return (*(torch.randn(1, 2, 8, 4) for _ in range(3)), torch.randn(8, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(attention_with_bias, [make(), make()], backend)
WINDOW = torch.tensor(3)


def causal_window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx <= WINDOW)     # a closure over a tensor


@pytest.mark.parametrize("backend", BACKENDS)
def test_flex_attention_block_mask_with_mask_mod_closure(backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bm = create_block_mask(causal_window, B=None, H=None, Q_LEN=8, KV_LEN=8, device="cpu", BLOCK_SIZE=4)

        def f(q, k, v, bias):
            return flex_attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s + bias[qi, ki], block_mask=bm)

        def make():
            return (*(torch.randn(1, 2, 8, 4) for _ in range(3)), torch.randn(8, 8))
        args = make()
        assert not torch.allclose(f(*args), attention_with_bias(*args))   # the mask matters
        check(f, [args, make()], backend)


def masked_in_frame(q, k, v, bias):
    # create_block_mask inside the compiled function: its mask_mod (a closure over WINDOW) is
    # a body, the mask's tensors are graph values; one mask used by two attention calls
    bm = create_block_mask(causal_window, None, None, 8, 8, device="cpu", BLOCK_SIZE=4)
    out = flex_attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s + bias[qi, ki], block_mask=bm)
    return flex_attention(out, k, v, block_mask=bm)


@pytest.mark.parametrize("backend", BACKENDS)
def test_create_block_mask_inside_the_compiled_function(backend):
    def make():
        return (*(torch.randn(1, 2, 8, 4) for _ in range(3)), torch.randn(8, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cc = check(masked_in_frame, [make(), make()], backend)
    runners = [n.target.__name__ for gm in cc.graphs for n in gm.graph.nodes if n.op == "call_function"
               and n.target.__name__.startswith("run_")]
    assert runners == ["run_create_block_mask", "run_flex_attention", "run_flex_attention"]


def test_block_mask_made_in_the_frame_that_escapes_runs_as_python():
    def f(q):
        bm = create_block_mask(causal_window, None, None, 8, 8, device="cpu", BLOCK_SIZE=4)
        return flex_attention(q, q, q, block_mask=bm), bm
    q = torch.randn(1, 2, 8, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(kiln.Unsupported, match="BlockMask made by create_block_mask"):
            kiln.compile(f, fullgraph=True)(q)
        kiln.reset()
        out, bm = kiln.compile(f)(q)
        expected, expected_bm = f(q)
    torch.testing.assert_close(out, expected)
    assert isinstance(bm, BlockMask) and bm.kv_indices.equal(expected_bm.kv_indices)


# flex_attention has no backward on CPU in eager either (NotImplementedError), so no gradient test


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.register_buffer("shift", torch.randn(2))

    def forward(self, x):
        return self.lin(x) + self.shift


@pytest.mark.parametrize("backend", BACKENDS)
def test_functional_call_with_other_parameters(backend):
    torch.manual_seed(0)
    model = Tiny()

    def f(params, x):
        return torch.func.functional_call(model, params, (x,))

    def make():
        return ({k: torch.randn_like(v) for k, v in model.named_parameters()}, torch.randn(4, 3))
    check(f, [make(), make()], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_sample_gradients_vmap_of_grad_over_a_parameter_dict(backend):
    torch.manual_seed(0)
    model = Tiny()

    def loss(params, x, y):
        out = torch.func.functional_call(model, params, (x.unsqueeze(0),))
        return ((out - y.unsqueeze(0)) ** 2).sum()

    def per_sample(params, xs, ys):
        return torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(params, xs, ys)

    def make():
        return ({k: v.detach().clone() for k, v in model.named_parameters()}, torch.randn(5, 3), torch.randn(5, 2))
    cc = check(per_sample, [make(), make()], backend)
    assert cc.frame_count == 1


def test_grad_over_a_dict_returns_a_dict():
    def f(p, x):
        return torch.func.grad(lambda q, a: (q["w"] * a).sin().sum() + q["b"].sum())(p, x)
    check(f, [({"w": torch.randn(3), "b": torch.randn(2)}, torch.randn(3))], "eager")


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_grad_has_aux_gradients(backend):
    # gradients of grad's result and of its aux output, taken outside the transform
    check(grad_has_aux, [(torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True))], backend,
          grad=True)
