"""Issue: BigBird (block sparse, seq 512) runs compiled in eval and train mode with
outputs equal to eager under the same numpy/torch seeds; few graphs; no recompiles for
new values; at most one recompile per frame for a new batch size; kiln explain lists
the breaks in modeling_big_bird.py."""
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import kiln
from kiln import cache
from kiln.testing import CompileCounter

from .bigbird_script import build, inputs

pytestmark = pytest.mark.slow

TORCH_COMPILE_GRAPHS = 11   # torch.compile (torch 2.13) on the same config


def seeded(fn, x, seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
    return fn(x)


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_bigbird_matches_eager_and_does_not_recompile(mode):
    model = build(mode)
    counter = CompileCounter()
    compiled = kiln.compile(model, backend=counter)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kiln.cache.KilnWarning)   # no eager fallback, no recompile limit
        for seed in range(3):
            x = inputs(seed=seed)
            expected = seeded(model, x, seed)
            actual = seeded(compiled, x, seed)
            assert torch.equal(actual.last_hidden_state, expected.last_hidden_state)
            assert torch.equal(actual.pooler_output, expected.pooler_output)
            if seed == 0:
                # the encoder's layer loop breaks at every layer call; its continuation takes
                # the next layer from the carried iterator, and the loop's exit (the iterator
                # found empty) resumes in a copy of its own: not a second entry (issue #14)
                assert kiln.metrics.recompiles == 0
        graphs = counter.frame_count
        assert 1 <= graphs < TORCH_COMPILE_GRAPHS
        assert kiln.metrics.recompiles == 0      # no recompiles for new values
        assert kiln.metrics.eager_fallbacks == 0
        # a new batch size: at most one more entry per compiled frame
        x = inputs(batch=2, seed=5)
        assert torch.equal(seeded(compiled, x, 5).last_hidden_state, seeded(model, x, 5).last_hidden_state)
    for frame_cache in cache._CACHES.values():
        # every frame, the layer loop's continuation and its exit copy alike, gets at most
        # one more entry for the new batch size
        assert len(frame_cache.entries) <= 2, f"{frame_cache.code.co_name} has {len(frame_cache.entries)} entries"
    print(f"bigbird {mode}: {graphs} graphs (torch.compile: {TORCH_COMPILE_GRAPHS})")


def test_kiln_explain_lists_bigbird_breaks():
    out = subprocess.run([sys.executable, "-m", "kiln.cli", "explain", "tests/models/bigbird_script.py:model"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "Graph breaks:" in out.stdout
    assert "modeling_big_bird.py:" in out.stdout
    # every listed break carries a file:line
    lines = out.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.strip()[:2].rstrip(".").isdigit() and i + 1 < len(lines) and lines[i + 1].strip().startswith("at "):
            assert ":" in lines[i + 1]
