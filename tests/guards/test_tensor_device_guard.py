"""The tensor guard's device check (``is_cpu`` for CPU tensors) rejects every other device."""
from __future__ import annotations

import torch

import kiln
from kiln.testing import CompileCounter


def f(x):
    return x * 2


def test_cpu_entry_rejects_a_meta_tensor_and_recompiles():
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(f, backend=counter)
    for x in (torch.randn(3), torch.randn(3)):
        torch.testing.assert_close(compiled(x), f(x), rtol=0, atol=0)
    assert counter.frame_count == 1
    entry = compiled.entries[0]
    assert ".is_cpu" in entry.guard_source
    meta = torch.empty(3, device="meta")
    assert entry.guard(f, meta) is False
    assert "x.device: cpu -> meta" in entry.explain_guard(f, meta)
    out = compiled(meta)
    assert out.device.type == "meta" and out.shape == (3,)
    assert counter.frame_count == 2
