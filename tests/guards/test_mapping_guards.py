"""Guards on mappings check the keys that were read, not the key set (issue #29).

A lookup by a constant key (``d[k]``, ``d.get(k)``, ``k in d``) in a dict that reaches
the frame from outside guards that key's presence (and, where the value is used, the
value); whatever depends on the whole key set (iteration, ``len``, views, equality, a
write) guards the key set as before.  Each case: compiled equals eager on every call,
and the recompile count is what the rule says.
"""
from __future__ import annotations

import collections
import os

import pytest
import torch

import kiln
from kiln.metrics import metrics
from kiln.testing import CompileCounter

ENV_FLAG = "KILN_TEST_MAPPING_FLAG"
ENV_OTHER = "KILN_TEST_MAPPING_OTHER"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    kiln.reset()
    metrics.reset()
    monkeypatch.delenv(ENV_FLAG, raising=False)
    monkeypatch.delenv(ENV_OTHER, raising=False)
    yield
    kiln.reset()


def _check(fn, compiled, *args):
    expected, got = fn(*args), compiled(*args)
    torch.testing.assert_close(got, expected)


def by_environment(x):
    if os.environ.get(ENV_FLAG) == "1":
        return x + 1
    return x - 1


def test_reading_one_environment_variable_guards_that_variable_only(monkeypatch):
    counter = CompileCounter()
    fast = kiln.compile(by_environment, backend=counter)
    x = torch.randn(3)
    _check(by_environment, fast, x)
    monkeypatch.setenv(ENV_OTHER, "anything")        # not read: no recompile
    _check(by_environment, fast, torch.randn(3))
    assert metrics.recompiles == 0 and counter.frame_count == 1
    monkeypatch.setenv(ENV_FLAG, "1")                # read: absent -> present
    _check(by_environment, fast, x)
    monkeypatch.setenv(ENV_FLAG, "2")                # read: its value changed
    _check(by_environment, fast, x)
    monkeypatch.delenv(ENV_FLAG)                     # back to absent: the first entry
    _check(by_environment, fast, x)
    assert metrics.recompiles == 2 and counter.frame_count == 3
    assert counter.op_count == 3


def lookups(x, cfg):
    y = x * cfg["scale"]
    if "shift" in cfg:
        y = y + cfg["shift"]
    return y * cfg.get("gain", 1.0)


def test_constant_key_lookups_ignore_other_keys():
    counter = CompileCounter()
    fast = kiln.compile(lookups, backend=counter)
    x = torch.randn(4)
    _check(lookups, fast, x, {"scale": 2.0})
    _check(lookups, fast, torch.randn(4), {"scale": 2.0, "unused": 7})
    _check(lookups, fast, x, {"unused": 7, "scale": 2.0})
    assert counter.frame_count == 1 and metrics.recompiles == 0
    _check(lookups, fast, x, {"scale": 2.0, "shift": 1.0})      # a key read before is now there
    _check(lookups, fast, x, {"scale": 2.0, "gain": 3.0})
    _check(lookups, fast, x, {"scale": 5.0})   # a float read is a graph input (unspecialised), not a guard
    assert metrics.recompiles == 2
    _check(lookups, fast, x, {"scale": 5})     # an int is a constant: its value is guarded
    assert metrics.recompiles == 3


def missing_key(x, cfg):
    return x * cfg["scale"]


def test_a_missing_key_raises_as_eager_does():
    fast = kiln.compile(missing_key, backend="eager")
    x = torch.randn(2)
    _check(missing_key, fast, x, {"scale": 3.0})
    with pytest.raises(KeyError):
        missing_key(x, {"other": 1.0})
    with pytest.raises(KeyError):
        fast(x, {"other": 1.0})


def iterates(x, cfg):
    for k in cfg:
        x = x + cfg[k]
    return x * len(cfg)


def test_iteration_and_len_still_guard_the_key_set():
    counter = CompileCounter()
    fast = kiln.compile(iterates, backend=counter)
    x = torch.randn(3)
    _check(iterates, fast, x, {"a": 1.0, "b": 2.0})
    _check(iterates, fast, x, {"a": 1.0, "b": 2.0, "c": 3.0})
    _check(iterates, fast, x, {"b": 2.0, "a": 1.0})
    assert metrics.recompiles == 2


def length_after_lookup(x, cfg):
    return x * cfg["a"] + len(cfg)


def test_a_lookup_then_len_guards_the_key_set():
    fast = kiln.compile(length_after_lookup, backend="eager")
    x = torch.randn(3)
    _check(length_after_lookup, fast, x, {"a": 1.0})
    _check(length_after_lookup, fast, x, {"a": 1.0, "z": 0})
    assert metrics.recompiles == 1


def writes(x, cfg):
    cfg["seen"] = cfg.get("seen", 0) + 1
    return x + cfg["seen"]


def test_a_write_guards_the_key_set_and_lands_as_in_eager():
    fast = kiln.compile(writes, backend="eager")
    x = torch.randn(2)
    a, b = {"k": 1}, {"k": 1}
    for _ in range(3):
        torch.testing.assert_close(fast(x, a), writes(x, b))
        assert a == b and list(a) == list(b)
    c, d = {"seen": 5, "k": 1}, {"seen": 5, "k": 1}
    torch.testing.assert_close(fast(x, c), writes(x, d))
    assert c == d and list(c) == list(d)


def default_lookup(x, counts):
    counts["hits"] += 1
    return x * counts["hits"]


def test_defaultdict_missing_key_goes_through_its_factory():
    fast = kiln.compile(default_lookup, backend="eager")
    x = torch.randn(2)
    a, b = collections.defaultdict(int), collections.defaultdict(int)
    for _ in range(2):
        torch.testing.assert_close(fast(x, a), default_lookup(x, b))
        assert a == b


def test_non_literal_keys_guard_the_key_set():
    def by_tensor_key(x, table):
        return x + table[KEY]

    fast = kiln.compile(by_tensor_key, backend="eager")
    x = torch.randn(2)
    _check(by_tensor_key, fast, x, {KEY: 1.0})
    _check(by_tensor_key, fast, x, {KEY: 1.0, (1, 2): 3.0})
    assert metrics.recompiles == 1


KEY = (0, "k")
