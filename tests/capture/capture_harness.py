"""A tiny harness for table-driven capture tests.

Each ``Case`` is a small program plus the graph and op counts Kiln should produce
for it.  ``run_case`` compiles the program with ``fullgraph=True`` and a fresh
``CompileCounter``, runs eager and compiled on two input sets (same shapes,
different values; every run gets its own deep copy of the inputs so in-place ops
cannot leak between runs) and compares results, input mutations and output
aliasing structurally, with ``kiln.comparison`` under ``rules(case)``.

Counts follow Kiln's design: every recorded op is a ``call_function`` /
``call_method`` node (including the ``getitem`` nodes that unpack a multi-output
op and the ``_set_grad_enabled`` switches of grad-mode blocks); metadata reads,
Python arithmetic and container work cost nothing; a frame with no op and no new
tensor output makes no graph at all.
"""
from __future__ import annotations

import copy
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
import torch

import kiln
from kiln import comparison
from kiln.comparison import Rules, assert_same
from kiln.testing import CompileCounter


class Rand:
    """Deterministic input factory: ``seed`` picks the values, the shapes are the caller's."""

    def __init__(self, seed: int):
        self.seed = seed
        self.g = torch.Generator().manual_seed(1234 + 7919 * seed)

    def randn(self, *shape, dtype=torch.float32, requires_grad=False):
        t = torch.randn(*shape, generator=self.g, dtype=dtype)
        return t.requires_grad_(requires_grad)

    def rand(self, *shape, dtype=torch.float32):
        return torch.rand(*shape, generator=self.g, dtype=dtype)

    def randint(self, low, high, *shape, dtype=torch.int64):
        return torch.randint(low, high, shape, generator=self.g, dtype=dtype)

    def positive(self, *shape):
        return torch.rand(*shape, generator=self.g) + 0.5

    def randbool(self, *shape):
        return torch.rand(*shape, generator=self.g) > 0.5


@dataclass
class Inputs:
    args: tuple
    kwargs: dict = field(default_factory=dict)


def I(*args, **kwargs) -> Inputs:  # noqa: E743 - short on purpose: used in every table row
    return Inputs(args, kwargs)


@dataclass
class Case:
    name: str
    fn: Callable
    inputs: Callable[[Rand], Any]     # Rand -> Inputs | tuple of positional args
    graphs: int
    ops: int
    atol: float | None = None
    rtol: float | None = None
    check_alias: bool = True          # outputs alias each other / the inputs as in eager
    setup: Callable | None = None     # resets outside state before every run
    state: Callable | None = None     # snapshot of outside state compared after every run
    grad_mode: bool = True            # grad mode the program is called under
    recompiles: int = 0               # extra graphs the second input set is expected to cause
    reference: Callable | None = None  # what eager should be compared against (default: fn itself)

    def __repr__(self):
        return self.name


def _as_inputs(x) -> Inputs:
    if isinstance(x, Inputs):
        return x
    if isinstance(x, tuple):
        return Inputs(x)
    return Inputs((x,))


# ------------------------------------------------------------------------------------
# Structural comparison (kiln.comparison): tensors with assert_close (the case's tolerances,
# else the default ones, NaN equal), Python floats within 1e-6 relative / 1e-9 absolute


def rules(case: Case) -> Rules:
    return Rules(rtol=case.rtol, atol=case.atol, float_rtol=1e-6, float_atol=1e-9)


def _tensors(inputs) -> list:
    return [t for _, t in comparison.tensor_leaves(inputs, "inputs")]


# ------------------------------------------------------------------------------------
# Running


def _call(fn, inputs: Inputs, grad_mode: bool):
    with torch.set_grad_enabled(grad_mode):
        try:
            return ("ok", fn(*inputs.args, **inputs.kwargs))
        except kiln.KilnError:
            raise
        except Exception as e:  # the program raising is behaviour to compare too
            return ("raise", e)


def run_case(case: Case):
    kiln.reset()
    counter = CompileCounter()
    target = copy.deepcopy(case.fn) if isinstance(case.fn, torch.nn.Module) else case.fn
    compiled = kiln.compile(target, backend=counter, fullgraph=True)
    for run in range(2):
        base = _as_inputs(case.inputs(Rand(run)))
        eager_in, compiled_in = copy.deepcopy(base), copy.deepcopy(base)
        eager_before, compiled_before = _tensors(eager_in), _tensors(compiled_in)
        if case.setup:
            case.setup()
        expected = _call(case.reference or case.fn, eager_in, case.grad_mode)
        eager_state = case.state() if case.state else None
        if case.setup:
            case.setup()
        actual = _call(compiled, compiled_in, case.grad_mode)
        compiled_state = case.state() if case.state else None
        assert expected[0] == actual[0], f"eager {expected[0]}s ({expected[1]!r}) but compiled {actual[0]}s ({actual[1]!r})"
        same = rules(case)
        if expected[0] == "raise":
            assert type(actual[1]) is type(expected[1]) and str(actual[1]) == str(expected[1])
        else:
            assert_same(expected[1], actual[1], same, "result")
        assert_same(eager_in, compiled_in, same, "inputs after the call")
        if case.state:
            assert_same(eager_state, compiled_state, same, "outside state")
        if isinstance(case.fn, torch.nn.Module):
            assert_same(case.fn, target, same, "module after the call")
        if case.check_alias and expected[0] == "ok":
            found = comparison.roots_aliasing_differences(("inputs", "result"), (eager_in, expected[1]),
                                                          (compiled_in, actual[1]), eager_before, compiled_before)
            assert not found, "outputs alias each other or the inputs differently from eager:\n" + "\n".join(found)
        if run == 0:
            assert (counter.frame_count, counter.op_count) == (case.graphs, case.ops), \
                f"expected {case.graphs} graph(s) / {case.ops} op(s), got {counter.frame_count} / " \
                f"{counter.op_count}:\n" + "\n".join(g.code for g in counter.graphs)
            first = (counter.frame_count, counter.op_count)
    if case.recompiles == 0:
        assert (counter.frame_count, counter.op_count) == first, \
            f"the second input set recompiled: {counter!r} after {first}"
    else:
        assert counter.frame_count == first[0] + case.recompiles, \
            f"expected {case.recompiles} recompile(s) on the second input set: {counter!r} after {first}"


def parametrize(cases):
    names = [c.name for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"duplicate case names {dup}"
    return pytest.mark.parametrize("case", cases, ids=names)


# ------------------------------------------------------------------------------------
# Negative cases: fullgraph=True must refuse, naming the construct and the user's line


@dataclass
class Refusal:
    name: str
    fn: Callable
    inputs: Callable[[Rand], Any]
    match: str                       # regex the message must contain (names the construct)
    marker: str = "# <-- refused"    # the source line the location must point at
    where: Callable | None = None    # the function holding the marker (default: fn)

    def __repr__(self):
        return self.name


def line_of(fn, marker: str) -> tuple[str, int]:
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    target = inspect.unwrap(target)
    lines, start = inspect.getsourcelines(target)
    for i, text in enumerate(lines):
        if marker in text:
            return inspect.getsourcefile(target), start + i
    raise AssertionError(f"marker {marker!r} not found in {target}")


def run_refusal(case: Refusal):
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(case.fn, backend=counter, fullgraph=True)
    inputs = _as_inputs(case.inputs(Rand(0)))
    with pytest.raises(kiln.Unsupported) as info:
        compiled(*inputs.args, **inputs.kwargs)
    msg = str(info.value)
    assert re.search(case.match, msg), f"message does not name the construct ({case.match!r}):\n{msg}"
    path, line = line_of(case.where or case.fn, case.marker)
    assert f"{path}:{line}" in msg, f"message does not point at {path}:{line}:\n{msg}"
    assert counter.frame_count == 0
