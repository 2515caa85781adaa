"""Kiln's backend failure policy: warn and run eagerly, or raise BackendError."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.fx

from kiln.backends import BackendFallbackWarning, compile_graph, lookup
from kiln.config import config
from kiln.exc import BackendError
from kiln.metrics import metrics


def scale_and_bump(x, y):
    x.add_(1)
    return (x * y,)


def make_gm():
    return torch.fx.symbolic_trace(scale_and_bump)


def inputs():
    return [torch.zeros(3), torch.full((3,), 2.0)]


def failing_compile(gm, example_inputs):
    raise RuntimeError("no kernel for you\nsecond line of detail")


class FailingAtCall:
    """A backend whose compiled callable raises; counts how often it is called."""

    def __init__(self, mutate_first=False):
        self.calls = 0
        self.mutate_first = mutate_first

    def __call__(self, gm, example_inputs):
        def run(*args):
            self.calls += 1
            if self.mutate_first:
                args[0].add_(100)
            raise RuntimeError("kernel exploded")
        return run


def compile_it(backend_fn, gm=None, name="custom"):
    gm = gm or make_gm()
    return compile_graph(gm, inputs(), backend_fn, backend_name=name, graph_name="scale_and_bump_0",
                         user_location="model.py:12")


def test_compile_failure_warns_once_and_runs_eagerly():
    before = metrics.backend_fallbacks
    gm = make_gm()
    with pytest.warns(BackendFallbackWarning) as record:
        fn = compile_it(failing_compile, gm)
    assert len(record) == 1
    message = str(record[0].message)
    assert "\n" not in message
    for part in ("'custom'", "scale_and_bump_0", "model.py:12", "RuntimeError: no kernel for you", "eagerly"):
        assert part in message
    assert metrics.backend_fallbacks == before + 1
    x, y = inputs()
    assert torch.equal(fn(x, y)[0], torch.full((3,), 2.0)) and torch.equal(x, torch.ones(3))


def test_compile_failure_raises_when_configured():
    config.raise_on_backend_error = True
    with pytest.raises(BackendError, match="failed while compiling") as info:
        compile_it(failing_compile)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "model.py:12" in str(info.value)


def test_non_callable_result_is_a_backend_failure():
    with pytest.warns(BackendFallbackWarning, match="not a callable"):
        fn = compile_it(lambda gm, ex: 42)
    assert fn(*inputs())[0].shape == (3,)


def test_first_call_failure_falls_back_and_mutates_once():
    backend = FailingAtCall()
    before = metrics.backend_fallbacks
    fn = compile_it(backend)
    x, y = inputs()
    with pytest.warns(BackendFallbackWarning, match="on its first call"):
        out = fn(x, y)
    assert torch.equal(x, torch.ones(3))          # the mutation happened exactly once
    assert torch.equal(out[0], torch.full((3,), 2.0))
    assert metrics.backend_fallbacks == before + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fn(x, y)                                  # later calls go straight to eager, silently
    assert backend.calls == 1 and torch.equal(x, torch.full((3,), 2.0))


def test_first_call_failure_raises_when_configured():
    config.raise_on_backend_error = True
    fn = compile_it(FailingAtCall())
    x, y = inputs()
    with pytest.raises(BackendError, match="first call") as info:
        fn(x, y)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert torch.equal(x, torch.zeros(3))         # not run eagerly behind the user's back


def test_failure_after_mutating_an_input_is_not_retried():
    fn = compile_it(FailingAtCall(mutate_first=True))
    x, y = inputs()
    with pytest.raises(BackendError, match=r"changing input\(s\) \[0\]"):
        fn(x, y)
    assert torch.equal(x, torch.full((3,), 100.0))  # eager did not add 1 on top


def test_error_that_eager_also_raises_is_the_users():
    def bad_matmul(x, y):
        return (x @ y,)

    gm = torch.fx.symbolic_trace(bad_matmul)
    fn = compile_graph(gm, [torch.ones(2, 3), torch.ones(3, 2)], FailingAtCall(),
                       backend_name="custom", graph_name="g", user_location=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError, match="shapes cannot be multiplied") as info:
            fn(torch.ones(2, 3), torch.ones(2, 3))
    assert not isinstance(info.value, BackendError)
    assert any("kernel exploded" in note for note in getattr(info.value, "__notes__", []))


def test_later_failures_are_not_swallowed():
    state = {"n": 0}

    def flaky(gm, ex):
        def run(*args):
            state["n"] += 1
            if state["n"] > 1:
                raise RuntimeError("second call fails")
            return gm(*args)
        return run

    fn = compile_it(flaky)
    fn(*inputs())
    with pytest.raises(RuntimeError, match="second call fails"):
        fn(*inputs())


def test_compile_time_is_counted():
    import time

    def slow_backend(gm, ex):
        time.sleep(0.05)
        return gm.forward

    before = metrics.backend_seconds
    compile_it(slow_backend)
    assert metrics.backend_seconds - before >= 0.05


def test_eager_result_is_returned_unwrapped():
    gm = make_gm()
    assert compile_it(lookup("eager"), gm) == gm.forward


@pytest.mark.parametrize("backend", ["aot_eager", "aten"])
def test_real_backend_through_policy(backend):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fn = compile_it(lookup(backend), name=backend)
        x, y = inputs()
        assert torch.equal(fn(x, y)[0], torch.full((3,), 2.0)) and torch.equal(x, torch.ones(3))
        assert torch.equal(fn(x, y)[0], torch.full((3,), 4.0)) and torch.equal(x, torch.full((3,), 2.0))


def test_backend_that_rewrites_the_graph_does_not_break_the_fallback():
    def vandal(gm, ex):
        for node in list(gm.graph.nodes):
            if node.op == "call_method":
                node.target = "sub_"
        gm.recompile()
        raise RuntimeError("gave up")

    with pytest.warns(BackendFallbackWarning):
        fn = compile_it(vandal)
    x, y = inputs()
    fn(x, y)
    assert torch.equal(x, torch.ones(3))
