"""Issue #15: compiled code is shared by fresh instances of one model class, and caches
never keep a model alive.

Parameters and buffers are graph inputs guarded on their metadata, modules on their
class, so a new instance with the same structure passes an existing entry's guards.
Entries hold no reference to the instances they were captured from (only to classes,
functions and constants the guards compare against), so ``del model`` frees it.
Sharing is a shortcut only where it is sound: an instance that differs in anything the
graph depended on (parameter shapes, requires_grad, hooks, an attribute the trace
branched on, a forward replaced on the instance) must not reuse the entry.
"""
from __future__ import annotations

import gc
import os
import weakref

import pytest
import torch

import kiln
from kiln.testing import CompileCounter

BACKENDS = ["eager", "aot_eager"]


def mlp(width=4):
    return torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 2))


def backend_for(name, counter):
    return counter if name == "eager" else name


@pytest.mark.parametrize("backend", BACKENDS)
def test_twelve_fresh_mlps_share_one_entry(backend, recwarn):
    cc = CompileCounter()
    for i in range(12):
        torch.manual_seed(i)
        model = mlp()
        compiled = kiln.compile(model, backend=backend_for(backend, cc))
        for x in (torch.randn(3, 4), torch.randn(3, 4)):
            torch.testing.assert_close(compiled(x), model(x))
    assert kiln.metrics.frames_captured == 1 and kiln.metrics.recompiles == 0
    if backend == "eager":
        assert cc.frame_count == 1 and cc.op_count == 3
    assert not [w for w in recwarn if "recompile limit" in str(w.message)]


def test_twelve_fresh_bert_models_share_one_entry(recwarn):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=32, vocab_size=50)
    cc = CompileCounter()
    for i in range(12):
        torch.manual_seed(i)
        model = transformers.BertModel(cfg).eval()
        compiled = kiln.compile(model, backend=cc)
        for ids in (torch.randint(0, 50, (2, 5)), torch.randint(0, 50, (2, 5))):
            with torch.no_grad():
                torch.testing.assert_close(compiled(ids).last_hidden_state, model(ids).last_hidden_state)
    assert cc.frame_count == 1 and kiln.metrics.recompiles == 0
    assert not [w for w in recwarn if "recompile limit" in str(w.message)]


# -- the shortcut stays sound: what differs between instances still recompiles ------------

class Gated(torch.nn.Module):
    def __init__(self, scale=2.0, use_bias=True):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4, bias=use_bias)
        self.scale = scale

    def forward(self, x):
        return self.lin(x) * self.scale


def run_both(model, backend, cc):
    compiled = kiln.compile(model, backend=backend_for(backend, cc))
    for x in (torch.randn(2, 4), torch.randn(2, 4)):
        expected, got = model(x), compiled(x)
        torch.testing.assert_close(got, expected)
        assert got.requires_grad == expected.requires_grad


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("change", ["attribute", "no_bias", "frozen", "hook", "forward_on_instance", "eval", "shape"])
def test_a_fresh_instance_that_differs_does_not_reuse_the_entry(backend, change):
    cc = CompileCounter()
    run_both(Gated(), backend, cc)
    other = Gated()
    if change == "attribute":
        other.scale = 3.0
    elif change == "no_bias":
        other = Gated(use_bias=False)
    elif change == "frozen":
        other.lin.weight.requires_grad_(False)
    elif change == "hook":
        other.lin.register_forward_hook(lambda mod, args, out: out + 100)
    elif change == "forward_on_instance":
        other.forward = lambda x: other.lin(x) - 1.0
    elif change == "eval":
        other.lin = torch.nn.Sequential(torch.nn.Dropout(0.5), torch.nn.Linear(4, 4)).eval()
    elif change == "shape":
        other.lin = torch.nn.Linear(4, 4).double()
        other.scale = 1.0
        compiled = kiln.compile(other, backend=backend_for(backend, cc))
        x = torch.randn(2, 4, dtype=torch.float64)
        torch.testing.assert_close(compiled(x), other(x))
        return
    run_both(other, backend, cc)


# -- caches never keep models alive -------------------------------------------------------

def freed_after(make_and_run) -> bool:
    ref = make_and_run()
    gc.collect()
    return ref() is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compiled_module_is_freed_after_del(backend):
    def run():
        model = mlp()
        compiled = kiln.compile(model, backend=backend)
        x = torch.randn(3, 4, requires_grad=True)
        compiled(x).sum().backward()
        compiled(torch.randn(3, 4))
        return weakref.ref(model.__getattr__("0").weight)
    assert freed_after(run)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_model_captured_only_by_a_compiled_closure_is_freed(backend):
    def run():
        model = mlp()

        def step(x):
            return model(x).relu() * 2
        compiled = kiln.compile(step, backend=backend)
        for x in (torch.randn(3, 4), torch.randn(3, 4)):
            torch.testing.assert_close(compiled(x), step(x))
        return weakref.ref(model)
    assert freed_after(run)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_model_used_under_dynamic_shapes_is_freed(backend):
    def run():
        model = mlp()
        compiled = kiln.compile(model, backend=backend)
        for n in (2, 3, 5):
            x = torch.randn(n, 4)
            torch.testing.assert_close(compiled(x), model(x))
        return weakref.ref(model.__getattr__("2").weight)
    assert freed_after(run)


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_rss_stays_flat_over_forty_fresh_models():
    def one_model():
        model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU())   # 4 MB of weights
        compiled = kiln.compile(model, backend="eager")
        with torch.no_grad():
            compiled(torch.randn(2, 1024))
    for _ in range(5):                      # warm up allocator and caches
        one_model()
    gc.collect()
    before = rss_bytes()
    for _ in range(40):
        one_model()
    gc.collect()
    grown = rss_bytes() - before
    assert grown < 40 * 4 * 2**20 / 4, f"RSS grew by {grown / 2**20:.1f} MB over 40 fresh 4 MB models"
    assert kiln.metrics.frames_captured == 1
