"""PyTorch-level breadth (issue #14): module hooks, parametrizations, generators passed
into calls, autocast blocks, torch.distributions, einops and cached library helpers,
each captured in one graph (``fullgraph=True``) and compared with eager on two input
sets, with graph and op counts."""
from __future__ import annotations

import functools

import einops
import pytest
import torch
import torch.nn as nn
from einops.layers.torch import Rearrange
from torch.distributions import Categorical, Normal
from torch.nn.utils import parametrize as P

import kiln
from kiln.testing import CompileCounter

from .capture_harness import Case, I, parametrize, run_case


def seeded(make):
    torch.manual_seed(0)
    return make()


def x4(r):
    return (r.randn(3, 4),)


# -- module hooks --------------------------------------------------------------------


def double_input(mod, args):
    return (args[0] * 2,)


def plus_one(mod, args, out):
    return out + 1


def kw_pre(mod, args, kwargs):
    return (args[0] - 1,), kwargs


def kw_post(mod, args, kwargs, out):
    return out * 3


def observe(mod, args, out):
    return None    # returns nothing: the output stays


def hooked(pre=(), post=(), kw_pre_hooks=(), kw_post_hooks=()):
    def make():
        m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
        for h in pre:
            m[0].register_forward_pre_hook(h)
        for h in kw_pre_hooks:
            m[0].register_forward_pre_hook(h, with_kwargs=True)
        for h in post:
            m[2].register_forward_hook(h)
        for h in kw_post_hooks:
            m[2].register_forward_hook(h, with_kwargs=True)
        return m
    return seeded(make)


HOOK_CASES = [
    Case("forward_pre_hook", hooked(pre=[double_input]), x4, 1, 4),
    Case("forward_hook", hooked(post=[plus_one]), x4, 1, 4),
    Case("forward_hook_returning_none", hooked(post=[observe]), x4, 1, 3),
    Case("pre_and_post_hooks", hooked(pre=[double_input], post=[plus_one, plus_one]), x4, 1, 6),
    Case("kwargs_hooks", hooked(kw_pre_hooks=[kw_pre], kw_post_hooks=[kw_post]), x4, 1, 5),
]


@parametrize(HOOK_CASES)
def test_module_hooks(case):
    run_case(case)


def test_global_module_hooks_and_hook_changes_recompile():
    m = seeded(lambda: nn.Sequential(nn.Linear(4, 4), nn.ReLU()))

    def f(x):
        return m(x).sum(-1)

    counter = CompileCounter()
    compiled = kiln.compile(f, backend=counter, fullgraph=True)
    x = torch.randn(3, 4)
    assert torch.equal(compiled(x), f(x))
    handle = nn.modules.module.register_module_forward_hook(
        lambda mod, args, out: out * 0.5 if isinstance(mod, nn.ReLU) else None)
    try:
        assert torch.equal(compiled(x), f(x))        # added: recompiled, hook traced
    finally:
        handle.remove()
    local = m[0].register_forward_pre_hook(double_input)
    assert torch.equal(compiled(x), f(x))
    local.remove()
    assert torch.equal(compiled(x), f(x))            # removed: the first entry again
    assert counter.frame_count == 3 and kiln.metrics.breaks == []


def test_backward_hooks_stay_a_break():
    m = seeded(lambda: nn.Linear(4, 2))
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(go[0].shape))

    def f(x):
        return m(x * 2).sum()

    x = torch.randn(3, 4, requires_grad=True)
    compiled = kiln.compile(f)
    compiled(x).backward()
    f(x).backward()
    assert seen == [(3, 2), (3, 2)]
    assert any("backward hooks" in b.reason for b in kiln.metrics.breaks)


# -- parametrizations ----------------------------------------------------------------


class Symmetric(nn.Module):
    def forward(self, w):
        return w.triu() + w.triu(1).transpose(-1, -2)


OLD_WEIGHT_NORM = seeded(lambda: nn.utils.weight_norm(nn.Linear(4, 3)))


def parametrized():
    m = nn.Linear(4, 4)
    P.register_parametrization(m, "weight", Symmetric())
    return m


PARAMETRIZATION_CASES = [
    Case("register_parametrization", seeded(parametrized), x4, 1, 5),
    Case("parametrizations_weight_norm", seeded(lambda: nn.utils.parametrizations.weight_norm(nn.Linear(4, 3))),
         x4, 1, 2),
    # (the old hook-based weight_norm's module cannot be deep-copied: called from a function)
    Case("old_weight_norm", lambda x: OLD_WEIGHT_NORM(x), x4, 1, 2),
]


@parametrize(PARAMETRIZATION_CASES)
def test_parametrizations(case):
    run_case(case)


# -- generators handed to calls -----------------------------------------------------

NET = seeded(lambda: nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)))


def total(tensors):
    return sum(t.sum() for t in tensors)


def f_parameters(x):
    return total(NET.parameters()) + x


def f_named_parameters(x):
    return total(p for _, p in NET.named_parameters()) + x


def f_buffers(x):
    return total(b.float() for b in NET.buffers()) + x


def f_modules(x):
    return x * len([m for m in NET.modules() if isinstance(m, nn.Linear)])


def counting(n):
    for i in range(n):
        yield i


def f_user_generator(x):
    return total(x * i for i in counting(3))


GENERATOR_CASES = [
    Case("parameters_into_function", f_parameters, x4, 1, 13),
    Case("named_parameters_into_function", f_named_parameters, x4, 1, 13),
    Case("buffers_into_function", f_buffers, x4, 1, 10),
    Case("modules_generator", f_modules, x4, 1, 1),
    Case("user_generator_into_function", f_user_generator, x4, 1, 9),
]


@parametrize(GENERATOR_CASES)
def test_generators_as_arguments(case):
    run_case(case)


def helper_that_breaks(params, x):
    print("before iterating")
    return total(params) + x


def test_unstarted_generator_across_a_break():
    """The callee breaks before iterating: the generator is made again by the glue."""
    def f(x):
        return helper_that_breaks(NET.parameters(), x)

    x = torch.randn(3)
    torch.testing.assert_close(kiln.compile(f)(x), f(x))


# -- autocast -----------------------------------------------------------------------

LIN = seeded(lambda: nn.Linear(4, 4))


def f_autocast(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = LIN(x)
        z = y @ y.t()
    return z.float() + 1, y


def f_amp_autocast(x):
    with torch.amp.autocast("cpu", dtype=torch.bfloat16):
        y = LIN(x)
    return y


def f_cpu_amp_autocast(x):
    with torch.cpu.amp.autocast():
        y = LIN(x)
    return y


def f_autocast_disabled_inside(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = LIN(x)
        with torch.autocast("cpu", enabled=False):
            z = LIN(y.float())
    return y, z


AUTOCAST_CASES = [
    # _enter_autocast / _exit_autocast are ops of the graph
    Case("torch_autocast", f_autocast, x4, 1, 7),
    Case("torch_amp_autocast", f_amp_autocast, x4, 1, 3),
    Case("torch_cpu_amp_autocast", f_cpu_amp_autocast, x4, 1, 3),
    Case("nested_autocast_disabled", f_autocast_disabled_inside, x4, 1, 7),
]


@pytest.mark.filterwarnings("ignore::FutureWarning")
@parametrize(AUTOCAST_CASES)
def test_autocast(case):
    run_case(case)
    assert not torch.is_autocast_enabled("cpu")


def test_autocast_block_split_by_a_break():
    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = LIN(x)
            print("inside")
            z = LIN(y)
        return z, z.dtype, torch.is_autocast_enabled("cpu")

    x = torch.randn(3, 4, requires_grad=True)
    for backend in ("eager", "aot_eager"):
        kiln.reset()
        got, want = kiln.compile(f, backend=backend)(x), f(x)
        assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
        assert not torch.is_autocast_enabled("cpu")


# -- torch.distributions ------------------------------------------------------------


def f_categorical(logits):
    d = Categorical(logits=logits, validate_args=False)
    s = d.sample()
    return s, d.log_prob(s), d.entropy()


def f_normal(mu, std):
    d = Normal(mu, std, validate_args=False)
    r = d.rsample()
    return r, d.log_prob(r), d.entropy(), d.sample()


def _seed():
    torch.manual_seed(7)


DISTRIBUTION_CASES = [
    Case("categorical", f_categorical, lambda r: (r.randn(3, 5),), 1, 18, setup=_seed,
         state=lambda: torch.get_rng_state()),
    Case("normal", f_normal, lambda r: (r.randn(3), r.positive(3)), 1, 21, setup=_seed,
         state=lambda: torch.get_rng_state()),
]


@parametrize(DISTRIBUTION_CASES)
def test_distributions(case):
    run_case(case)


def test_distribution_validation_runs_as_python():
    """Validation decides on tensor values: it breaks (runs in Python, as eager does)
    rather than being dropped; an invalid argument raises eager's ValueError."""
    def f(mu, std):
        return Normal(mu, std, validate_args=True).log_prob(mu)

    compiled = kiln.compile(f)
    mu = torch.randn(3)
    torch.testing.assert_close(compiled(mu, torch.ones(3)), f(mu, torch.ones(3)))
    with pytest.raises(ValueError, match="scale"):
        compiled(mu, -torch.ones(3))


# -- einops and cached helpers -------------------------------------------------------


def f_einops(x):
    y = einops.rearrange(x, "b (h d) -> b h d", h=2)
    z = einops.repeat(y, "b h d -> b h d r", r=3)
    return einops.reduce(z, "b h d r -> b h", "mean")


REARRANGE = Rearrange("b (h d) -> b h d", h=2)


def f_rearrange_layer(x):
    return REARRANGE(x) * 2


@functools.lru_cache(None)
def scale_for(name):
    return {"small": 0.5, "big": 2.0}[name]


def f_cached_helper(x):
    return x * scale_for("big")


EINOPS_CASES = [
    Case("einops_functions", f_einops, x4, 1, 4),
    Case("einops_rearrange_layer", f_rearrange_layer, x4, 1, 2),
    Case("lru_cached_helper", f_cached_helper, x4, 1, 1),
]


@parametrize(EINOPS_CASES)
def test_einops_and_cached_helpers(case):
    run_case(case)


def test_einops_backend_lookup_on_first_use():
    """The first call in a process finds einops' backend through ``type.__subclasses__``
    and a relative import, and records it in einops' own tables: one graph, no break."""
    import einops._backends as backends
    saved = dict(backends._type2backend), dict(backends._loaded_backends)
    backends._type2backend.clear()
    backends._loaded_backends.clear()
    try:
        x = torch.randn(2, 4)
        counter = CompileCounter()
        got = kiln.compile(f_einops, backend=counter, fullgraph=True)(x)
        assert torch.equal(got, f_einops(x)) and counter.frame_count == 1
        assert type(backends._type2backend[torch.Tensor]).__name__ == "TorchBackend"
    finally:
        backends._type2backend.clear()
        backends._type2backend.update(saved[0])
        backends._loaded_backends.clear()
        backends._loaded_backends.update(saved[1])


# -- small library helpers ---------------------------------------------------------

from packaging import version as _version  # noqa: E402
from transformers.utils import import_utils as _hf_imports  # noqa: E402
from transformers.utils import logging as _hf_logging  # noqa: E402

_LOGGER = _hf_logging.get_logger("kiln.tests.breadth")


def f_library_helpers(x):
    _LOGGER.warning_once("logged once, as in eager")
    if _hf_imports.is_torch_greater_or_equal("2.0"):
        x = x + 1
    if _hf_imports.is_torch_distributed_available():
        x = x * 2
    if torch.__version__ >= "2.0":
        x = x - 1
    if _version.parse("2.13.0") >= _version.parse("2.0"):   # a slotted class, compared
        x = x / 2
    return x


LIBRARY_CASES = [
    Case("library_helpers", f_library_helpers, x4, 1, 4),
]


@parametrize(LIBRARY_CASES)
def test_library_helpers_inline(case):
    run_case(case)


# -- weak references -----------------------------------------------------------------

import weakref  # noqa: E402

_W = torch.randn(4, 4)
_LIVE = weakref.ref(_W)
_DEAD = weakref.ref(torch.randn(4, 4))    # its referent is gone: calling it gives None


def f_weakref_live(x):
    w = _LIVE()
    return x @ w if w is not None else x


def f_weakref_dead(x):
    w = _DEAD()
    return x @ w if w is not None else x + 1


def f_weakref_identity(x):
    return x * 2 if _LIVE() is _W else x


def f_weakref_made(x):
    r = weakref.ref(_W)      # made in the frame to an object from outside it
    return x @ r() if r() is _W else x


WEAKREF_CASES = [
    Case("weakref_call", f_weakref_live, x4, 1, 1),
    Case("weakref_dead", f_weakref_dead, x4, 1, 1),
    Case("weakref_is_referent", f_weakref_identity, x4, 1, 1),
    Case("weakref_made_in_frame", f_weakref_made, x4, 1, 1),
    # nn.LSTM checks its weights against weak references to them on every call
    Case("lstm_weight_refs", seeded(lambda: nn.LSTM(4, 6, num_layers=2, batch_first=True)),
         lambda r: (r.randn(2, 3, 4),), 1, 6),
]


@parametrize(WEAKREF_CASES)
def test_weak_references(case):
    run_case(case)


def test_weakref_retargeted_recompiles():
    """The referent is guarded through ``ref()``: a weight replaced behind the reference
    (what ``_weights_have_changed`` looks for) gives a new entry, not a stale graph.  That
    call makes new references in the frame (``_init_flat_weights``), stored on the module
    by the glue; they point at the new weight, so the next call reuses the entry."""
    lstm = seeded(lambda: nn.LSTM(4, 6, batch_first=True))
    counter = CompileCounter()
    fast = kiln.compile(lstm, backend=counter, fullgraph=True)
    x = torch.randn(2, 3, 4)
    assert torch.equal(fast(x)[0], lstm(x)[0])
    lstm.weight_ih_l0 = nn.Parameter(torch.randn(24, 4))     # the weak reference now points elsewhere
    got = fast(x)[0]
    assert counter.frame_count == 2
    assert all(r() is w for r, w in zip(lstm._flat_weight_refs, lstm._flat_weights))   # written by the glue
    assert torch.equal(got, lstm(x)[0])
    assert torch.equal(fast(x)[0], lstm(x)[0])
    assert counter.frame_count == 2
