"""The ``programs`` suite (src/kiln/bench/models_programs.py): every program runs eagerly
and under Kiln in inference and training, gives eager's results, and makes the graphs it
is known to make (1 where Kiln is at torch.compile's count or below; the others are
pinned at today's count, so a change shows up here and in docs/bench.md)."""
from __future__ import annotations

import warnings

import pytest
import torch

import kiln
from kiln.bench import registry, runner
from kiln.bench.results import RunOptions
from kiln.comparison import Rules, assert_same
from kiln.testing import CompileCounter

PROGRAMS = ["word_lm", "gat", "ppo", "moe", "retnet_step", "numpy_prep"]
#: graphs per call under Kiln's default settings (torch.compile: 2, 2, 1, 0, 1, 1)
GRAPHS = {"word_lm": 1, "gat": 1, "ppo": 1, "moe": 1, "retnet_step": 1, "numpy_prep": 1}


def test_suite_is_registered():
    assert [s.name for s in registry.select("programs")] == PROGRAMS
    assert "programs" in registry.suites()


def _step(spec, training, model, inputs):
    for p in model.parameters():
        p.grad = None
    with torch.set_grad_enabled(training):
        out = model(**inputs)
    if not training:
        return out
    loss = spec.loss(out)
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_program_matches_eager(name, training):
    spec = registry.get(name)
    runner.seed_all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # nn.TransformerEncoder's nested-tensor notice
        model = spec.build(training)
    model.train(training)
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(model, backend=counter)
    for seed in range(2):
        inputs = spec.inputs(training, torch.Generator().manual_seed(seed))
        expected = _step(spec, training, model, inputs)
        actual = _step(spec, training, compiled, inputs)
        assert_same(expected, actual, Rules(atol=1e-5, rtol=1e-5))
        if seed == 0:
            graphs = counter.frame_count
    assert graphs == GRAPHS[name], [str(b) for b in kiln.metrics.breaks]
    assert counter.frame_count == graphs, "the second input set recompiled"


@pytest.mark.slow
def test_runner_passes_every_program():
    for name in PROGRAMS:
        for mode in ("inference", "training"):
            row = runner.run_model(name, "kiln", RunOptions(mode=mode, repeat=1, warmup=1))
            assert row.status == "pass" and row.accuracy == "ok", (name, mode, row.reason)
