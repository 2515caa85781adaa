"""The in-process runner: statuses, timing fields and accuracy, with fake frontends."""
from __future__ import annotations

import pytest
import torch

from kiln.bench import checks, frontends, runner
from kiln.bench.results import RunOptions
from kiln.exc import KilnError

FAST = RunOptions(repeat=2, warmup=1)


class FakeFrontend:
    """A frontend whose 'compilation' is a wrapper we control."""

    name = "fake"

    def __init__(self, wrap=lambda fn: fn, compile_error=None):
        self.wrap, self.compile_error = wrap, compile_error

    def backend_label(self, backend):
        return backend

    def reset(self):
        pass

    def compile(self, fn, backend):
        if self.compile_error is not None:
            raise self.compile_error
        if callable(backend):       # one empty graph through the backend, as a capture would
            graph = torch.fx.Graph()
            graph.output(None)
            backend(torch.fx.GraphModule(torch.nn.Module(), graph), [])
        return self.wrap(fn)

    def backend_callable(self, backend):
        return None

    def is_frontend_error(self, exc):
        return isinstance(exc, KilnError)

    def stats(self):
        return {"graphs": 2, "breaks": 1, "top_breaks": "because (1)", "recompiles": 0}


@pytest.fixture
def fake(monkeypatch):
    def install(**kw):
        monkeypatch.setitem(frontends._FRONTENDS, "fake", lambda: FakeFrontend(**kw))
        return "fake"
    return install


def test_pass_row_has_every_measurement(fake):
    row = runner.run_model("mlp", fake(), FAST)
    assert row.status == "pass", row.reason
    assert row.accuracy == "ok"
    assert (row.graphs, row.breaks, row.top_breaks) == (2, 1, "because (1)")
    for field in ("eager_ms", "compiled_ms", "speedup", "first_call_s", "capture_s", "overhead_us"):
        assert getattr(row, field) is not None and getattr(row, field) >= 0, field


def test_wrong_output_is_fail_accuracy(fake):
    def perturb(fn):
        return lambda **kw: fn(**kw) * 1.01
    row = runner.run_model("mlp", fake(wrap=perturb), RunOptions(performance=False))
    assert row.status == "fail_accuracy" and row.accuracy == "fail"
    assert "error" in row.reason
    assert row.speedup is None   # accuracy-only run: no timing columns


def test_wrong_gradients_are_fail_accuracy_in_training(fake):
    def scale_loss(fn):
        def run(**kw):
            out = fn(**kw)
            return {"loss": out["loss"] * 1.5, "logits": out["logits"]}
        return run
    row = runner.run_model("mlp", fake(wrap=scale_loss), RunOptions(mode="training", performance=False))
    assert row.status == "fail_accuracy"


def test_frontend_error_is_fail_compile(fake):
    row = runner.run_model("mlp", fake(compile_error=KilnError("cannot capture this")), FAST)
    assert row.status == "fail_compile"
    assert row.reason == "KilnError: cannot capture this"


def test_runtime_error_in_compiled_call_is_fail_run(fake):
    def boom(fn):
        def run(**kw):
            raise ValueError("bad kernel")
        return run
    row = runner.run_model("mlp", fake(wrap=boom), FAST)
    assert row.status == "fail_run" and "bad kernel" in row.reason


def test_broken_model_is_eager_fail(fake, bench_plugins):
    row = runner.run_model("raise", fake(), FAST)
    assert row.status == "eager_fail" and "broken in eager mode" in row.reason


def test_accuracy_compare_uses_kiln_debug_accuracy():
    a = {"output": torch.ones(3)}
    ok, _ = checks.compare(a, {"output": torch.ones(3)}, {"output": torch.ones(3, dtype=torch.float64)})
    assert ok == "ok"
    verdict, detail = checks.compare(a, {"output": torch.ones(3) * 2}, {"output": torch.ones(3, dtype=torch.float64)})
    assert verdict == "fail" and "output" in detail


def test_flatten_names_nested_outputs():
    flat = checks.flatten({"a": torch.ones(1), "b": (torch.zeros(1), None, {"c": torch.ones(2)})})
    assert list(flat) == ["output.a", "output.b.0", "output.b.2.c"]


def test_torch_frontend_counts_graphs_and_breaks():
    fe = frontends.get("torch")
    fe.reset()

    def f(x):
        x = x + 1
        print("graph break here")
        return x * 2

    compiled = fe.compile(f, "eager")
    compiled(torch.ones(2))
    stats = fe.stats()
    assert stats["graphs"] == 2 and stats["breaks"] == 1
    assert "print" in stats["top_breaks"]
    fe.reset()
    assert fe.stats()["graphs"] == 0


def test_backend_names_map_for_torch():
    assert frontends.get("torch").backend_label("aten") == "aten->aot_eager"
    assert frontends.get("kiln").backend_label("aten") == "aten"
    with pytest.raises(ValueError, match="known frontends: kiln, torch"):
        frontends.get("tvm")


def test_overhead_replays_graphs_under_their_grad_mode():
    """Graphs are replayed in the grad mode they were compiled (and run) in: an inference
    graph replayed with grad enabled builds autograd history on every call (a ``scan``
    body even traced its backward per call, so scan_rnn's row timed out)."""
    from kiln.bench.overhead import GraphRecorder, model_overhead_us

    seen = []

    def graph(x):
        seen.append(torch.is_grad_enabled())
        return x * 2

    gm = torch.fx.symbolic_trace(graph)
    rec = GraphRecorder(lambda g, ex: (lambda *a: graph(*a)))
    with torch.no_grad():
        rec(gm, [torch.ones(2)])
    seen.clear()     # symbolic_trace ran it once
    model_overhead_us(lambda: None, rec, calls=2, rounds=1)
    assert seen and not any(seen)
