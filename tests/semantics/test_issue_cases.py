"""The builtins cases of issue #24's table, as capture tests: compiled equals eager on two
inputs, one graph, ``fullgraph=True`` where the frame captures whole."""
from __future__ import annotations

import collections

import pytest
import torch

import kiln
from kiln.testing import CompileCounter

CONTAINERS = {
    "list": lambda s: [s, 2], "tuple": lambda s: (s, 2), "dict": lambda s: {"a": s}, "set": lambda s: {s, 9},
    "deque": lambda s: collections.deque([s, 2]), "tensor": lambda s: torch.ones(2) * s,
}


def _check(fn, make, graphs=1, fullgraph=True):
    counter = CompileCounter()
    compiled = kiln.compile(fn, backend=counter, fullgraph=fullgraph)
    for seed in (1, 2):
        x = torch.arange(3.0) + seed
        expected, got = fn(x, make(seed)), compiled(x.clone(), make(seed))
        assert type(got) is type(expected)
        for e, g in zip(expected, got):
            assert type(g) is type(e)
            assert torch.equal(g, e) if isinstance(e, torch.Tensor) else g == e
    assert counter.frame_count == graphs


def attribute_questions(x, v):
    return x + 1 if hasattr(v, "shape") else x - 1, hasattr(v, "__call__"), callable(v)


@pytest.mark.parametrize("kind", sorted(CONTAINERS))
def test_hasattr_and_callable_ask_the_type(kind):
    # a set's items are its keys, guarded by value: the second set recompiles
    _check(attribute_questions, CONTAINERS[kind], graphs=2 if kind == "set" else 1)


def deque_arithmetic(x, v):
    return x * len(v + v), v + v, v * 2


def test_deque_plus_and_times_make_a_deque():
    _check(deque_arithmetic, CONTAINERS["deque"])


def reversed_set(x, v):
    return x + 1, reversed(v)


@pytest.mark.parametrize("kind", ["set", "frozenset"])
def test_reversed_of_a_set_raises(kind):
    make = (lambda s: {s, 9}) if kind == "set" else (lambda s: frozenset({s, 9}))
    compiled = kiln.compile(reversed_set, backend=CompileCounter())
    for seed in (1, 2):
        with pytest.raises(TypeError, match="not reversible"):
            reversed_set(torch.ones(2), make(seed))
        with pytest.raises(TypeError, match="not reversible"):
            compiled(torch.ones(2), make(seed))


def bound_method_types(x, v):
    names = ("__len__", "__iter__", "add", "__add__", "__init__", "size")
    return x + 1, tuple(type(getattr(v, n, None)).__name__ for n in names)


def test_tensor_methods_have_their_bound_types():
    # torch/_tensor.py's Python methods bind to `method`, C methods to
    # builtin_function_or_method, slot wrappers to method-wrapper (fuzz seed 310223)
    _check(bound_method_types, CONTAINERS["tensor"])
