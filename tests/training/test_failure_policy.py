"""Kiln's backend failure policy, end to end through ``kiln.compile``.

A backend that raises (while compiling, or on its first call) costs that graph its
compilation, never the user's result: Kiln warns once, naming the backend, and runs the
graph eagerly, so results and gradients are eager's.  With
``kiln.config.raise_on_backend_error`` the failure is a :class:`kiln.BackendError`
chained from the backend's exception.
"""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import kiln
from kiln.backends import BackendFallbackWarning


class BrokenBackendError(RuntimeError):
    pass


def broken_at_compile(gm, example_inputs):
    raise BrokenBackendError("no kernels for you")


def broken_at_first_call(gm, example_inputs):
    def run(*args):
        raise BrokenBackendError("kernel crashed")
    return run


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))


def step(fn, m, x):
    m.zero_grad(set_to_none=True)
    out = fn(x)
    out.square().mean().backward()
    return out.detach(), [p.grad.clone() for p in m.parameters()]


@pytest.fixture(autouse=True)
def _fallback_allowed():
    kiln.config.raise_on_backend_error = False      # the default policy


@pytest.mark.parametrize("backend", [broken_at_compile, broken_at_first_call])
def test_failing_backend_warns_naming_it_and_matches_eager(backend):
    m = model()
    x = torch.randn(4, 6)
    expected_out, expected_grads = step(m, m, x)
    compiled = kiln.compile(m, backend=backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, grads = step(compiled, m, x)
        out2, _ = step(compiled, m, x)          # later calls: eager, no second warning
    fallbacks = [w for w in caught if issubclass(w.category, BackendFallbackWarning)]
    assert len(fallbacks) == 1, [str(w.message) for w in caught]
    message = str(fallbacks[0].message)
    assert backend.__name__ in message
    assert "BrokenBackendError" in message and "eagerly" in message
    assert kiln.metrics.backend_fallbacks == 1
    assert torch.equal(out, expected_out) and torch.equal(out2, expected_out)
    for g, e in zip(grads, expected_grads):
        assert torch.equal(g, e)


def test_failing_backend_under_plain_function_with_mutation():
    """A fallback on the first call must not apply an input mutation twice."""
    def f(buf, x):
        buf.add_(1)
        return (x * buf).sum()

    buf, x = torch.zeros(3), torch.arange(3.0)
    compiled = kiln.compile(f, backend=broken_at_first_call)
    with pytest.warns(BackendFallbackWarning, match="broken_at_first_call"):
        out = compiled(buf, x)
    assert torch.equal(buf, torch.ones(3))
    assert out.item() == 3.0


@pytest.mark.parametrize("backend", [broken_at_compile, broken_at_first_call])
def test_failing_backend_raises_when_configured(backend):
    kiln.config.raise_on_backend_error = True
    m = model()
    compiled = kiln.compile(m, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BackendFallbackWarning)
        with pytest.raises(kiln.BackendError, match=backend.__name__) as info:
            compiled(torch.randn(4, 6))
    assert isinstance(info.value.__cause__, BrokenBackendError)
    assert kiln.metrics.backend_fallbacks == 0


def test_registered_backend_is_named_by_its_registered_name():
    kiln.backends.register("kiln_test_broken", broken_at_compile)
    m = model()
    x = torch.randn(2, 6)
    with pytest.warns(BackendFallbackWarning, match="'kiln_test_broken'"):
        out = kiln.compile(m, backend="kiln_test_broken")(x)
    assert torch.equal(out, m(x))
    kiln.config.raise_on_backend_error = True
    kiln.reset()
    with pytest.raises(kiln.BackendError, match="kiln_test_broken"):
        kiln.compile(m, backend="kiln_test_broken")(x)


def test_one_failing_graph_of_several_falls_back_alone():
    """With a graph break there are two graphs; only the one the backend refuses runs
    eagerly, the other stays compiled."""
    seen = []

    def picky(gm, example_inputs):
        seen.append(gm)
        if len(seen) == 1:
            raise BrokenBackendError("first graph refused")
        return gm.forward

    def f(x):
        y = x.sin() * 2
        print("", end="")            # a graph break
        return y.cos() + 1

    x = torch.randn(5)
    with pytest.warns(BackendFallbackWarning, match="picky"):
        out = kiln.compile(f, backend=picky)(x)
    assert torch.equal(out, f(x))
    assert len(seen) == 2 and kiln.metrics.backend_fallbacks == 1


def test_backend_time_is_counted_once():
    import time

    def slow(gm, example_inputs):
        time.sleep(0.2)
        return gm.forward

    kiln.compile(lambda x: x + 1, backend=slow)(torch.ones(2))
    assert 0.2 <= kiln.metrics.backend_seconds < 0.35


def fails_after_running(gm, example_inputs):
    """Runs the graph (its random draws, its side effects on tensors), then raises."""
    def run(*args):
        gm(*args)
        raise BrokenBackendError("crashed after running")
    return run


def test_first_call_failure_reruns_the_frame_with_eagers_random_numbers():
    """The fallback re-runs the frame as Python with the generators put back, so a graph
    that drew random numbers before failing does not shift eager's draws."""
    def f(x):
        return x + torch.rand(3)

    x = torch.zeros(3)
    torch.manual_seed(0)
    expected = [f(x), f(x)]
    compiled = kiln.compile(f, backend=fails_after_running)
    torch.manual_seed(0)
    with pytest.warns(BackendFallbackWarning, match="fails_after_running.*on its first call"):
        got = [compiled(x)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", BackendFallbackWarning)
        got.append(compiled(x))              # the graph runs eagerly from then on
    assert all(torch.equal(g, e) for g, e in zip(got, expected))
    assert kiln.metrics.backend_fallbacks == 1


def test_first_call_failure_applies_the_frames_side_effects_once():
    log = []

    def f(x):
        log.append(len(log))                 # a Python side effect the glue replays
        return x.sin() * 2

    x = torch.randn(4)
    compiled = kiln.compile(f, backend=broken_at_first_call)
    with pytest.warns(BackendFallbackWarning, match="on its first call"):
        out = compiled(x)
    assert log == [0] and torch.equal(out, x.sin() * 2)
    assert torch.equal(compiled(x), x.sin() * 2) and log == [0, 1]
