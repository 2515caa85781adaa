"""Test-only benchmark models, loaded through ``KILN_BENCH_PLUGINS``.

They misbehave on purpose so the tests can check that one bad model costs one row:
``crash_eager`` segfaults on its first call, ``crash_compiled`` aborts the process on
the first call after the eager phase (the 5th call with the default warm-up of 2:
eager, fp64 reference, 2 warm-ups), ``hang`` sleeps forever and ``tiny`` behaves.
The call counter lives in a function torch.compile must not trace
(``torch._dynamo.disable``), so it counts real calls.
"""
from __future__ import annotations

import ctypes
import os
import time

import torch
from torch import nn

from kiln.bench.registry import register

EAGER_CALLS = 4
_calls = [0]


@torch._dynamo.disable
def _count_and_maybe_abort(limit):
    _calls[0] += 1
    if limit is not None and _calls[0] > limit:
        os.abort()


class Tiny(nn.Module):
    def __init__(self, behaviour: str):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.behaviour = behaviour

    def forward(self, x):
        if self.behaviour == "crash_eager":
            ctypes.string_at(0)          # segfault
        elif self.behaviour == "hang":
            time.sleep(3600)
        elif self.behaviour == "crash_compiled":
            _count_and_maybe_abort(EAGER_CALLS)
        elif self.behaviour == "raise":
            raise RuntimeError("this model is broken in eager mode too")
        return self.lin(x)


def _inputs(training, gen):
    return {"x": torch.randn(2, 4, generator=gen)}


for _name in ("tiny", "crash_eager", "crash_compiled", "hang", "raise"):
    register(_name, (lambda b: (lambda training: Tiny(b)))(_name), _inputs, suites=("benchtest",),
             description=f"test-only: {_name}")
