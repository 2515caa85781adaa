"""A break while a container's method is loaded but not yet called (``out.append(`` with
a print in its argument) resumes with that method rebuilt on the same object: the frame
stays compiled on both sides of the break, and the list is the one the frame made."""
from __future__ import annotations

import torch

import kiln
from kiln.metrics import metrics
from kiln.testing import CompileCounter


def appends(x):
    out = []
    out.append(print("step") or x + 1)
    out.append(x * 2)
    return out


def extends_input(x, acc):
    acc.extend([print("more") or x.sin()])
    return x.cos()


def test_list_method_loaded_across_a_break(capsys):
    kiln.reset()
    metrics.reset()
    counter = CompileCounter()
    fast = kiln.compile(appends, backend=counter)
    for seed in (0, 1):
        x = torch.randn(3, generator=torch.Generator().manual_seed(seed))
        expected = appends(x)
        got = fast(x)
        assert type(got) is list and len(got) == 2
        for a, b in zip(got, expected):
            torch.testing.assert_close(a, b)
    assert capsys.readouterr().out == "step\n" * 4
    assert metrics.eager_fallbacks == 0 and metrics.recompiles == 0
    # nothing to compute before the print; one graph after it, reused on the second call
    assert counter.frame_count == 1 and counter.op_count == 2


def test_input_list_method_loaded_across_a_break(capsys):
    kiln.reset()
    metrics.reset()
    counter = CompileCounter()
    fast = kiln.compile(extends_input, backend=counter)
    for seed in (0, 1):
        x = torch.randn(3, generator=torch.Generator().manual_seed(seed))
        a, b = [1], [1]
        torch.testing.assert_close(fast(x, a), extends_input(x, b))
        assert len(a) == len(b) == 2 and a[0] == 1 and torch.equal(a[1], b[1])
    assert capsys.readouterr().out == "more\n" * 4
    assert metrics.eager_fallbacks == 0 and metrics.recompiles == 0
    assert counter.frame_count == 1 and counter.op_count == 2
