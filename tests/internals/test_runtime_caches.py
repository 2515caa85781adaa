"""``kiln.reset()`` empties every process-wide cache, each registered by its owner with
``kiln.runtime.caches`` (docs/architecture.md, "Process-wide caches register")."""
from __future__ import annotations

import torch

import kiln
from kiln.runtime import caches
from kiln.testing import CompileCounter


def helper(x):
    return x.cos()


def loop_with_a_break(x, n):
    for i in range(n):
        x = x + i
        print("", end="")               # a graph break inside a for loop
        x = helper(x) * 2
    return x


def test_reset_empties_every_registered_cache():
    kiln.reset()
    cc = CompileCounter()
    compiled = kiln.compile(loop_with_a_break, backend=cc)
    for n in (2, 3):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x, n), loop_with_a_break(x, n))
    assert cc.frame_count >= 2 and cc.op_count >= 2
    filled = {name for name, size in caches.sizes().items() if size}
    # the frame caches, the decoded bytecode, the breaks' liveness and loops, and the
    # continuations' probes, at least, were filled by those calls
    assert {"cache.frame_caches", "capture.interpreter.decoded", "capture.frames.graph_break.liveness",
            "capture.frames.graph_break.loops", "capture.frames.resume.probed_iterators"} <= filled, filled
    kiln.reset()
    assert not any(caches.sizes().values()), caches.sizes()
    assert compiled._kiln_cache.stale          # a compiled function looks its cache up again
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x, 2), loop_with_a_break(x, 2))


def test_every_kiln_cache_is_registered_under_its_owners_name():
    modules = {name.rsplit(".", 1)[0] for name in caches.registered()}
    assert {"api", "cache", "capture.interpreter", "capture.frames.graph_break", "capture.frames.resume",
            "runtime.callees", "runtime.outputs"} <= modules
