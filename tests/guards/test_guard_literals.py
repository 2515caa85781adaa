"""Guards embed constants and names in generated Python: braces in them stay literal.

Guard checks are ``str.format`` templates (``{v}`` names the guarded source), so a
constant whose repr has braces (a string such as ``"{'a': 0}"``, carried over a break or
read from outside) or an attribute name with braces once made the guard's codegen fail
with a KeyError (found by the semantics oracle on 3.13: ``'%s' % (v,)`` of a dict breaks,
and its string result is a guarded constant of the continuation)."""
import numpy as np
import torch

import kiln
from kiln.testing import CompileCounter


class Holder:
    pass


def carried_string(x, d):
    s = "%s" % (d,)              # formatting a dict: a break, its result a constant after it
    kiln.graph_break()
    return x + len(s), s


def test_string_constant_with_braces_across_a_break():
    counter = CompileCounter()
    compiled = kiln.compile(carried_string, backend=counter)
    for seed in (1, 2):
        x, d = torch.arange(3.0) + seed, {"a": 0, "b": 2}
        got, want = compiled(x, d), carried_string(x, d)
        assert torch.equal(got[0], want[0]) and got[1] == want[1]
    assert counter.frame_count == 1      # only after the break is there tensor work


def strange_names(x, obj, g):
    return x * 2 if hasattr(obj, "{v}") else x - 1, getattr(obj, "{v1}", "none"), g == "{v}}"


def test_braces_in_attribute_names_and_constants():
    counter = CompileCounter()
    compiled = kiln.compile(strange_names, backend=counter, fullgraph=True)
    for seed in (1, 2):
        x, obj = torch.arange(3.0) + seed, Holder()
        got, want = compiled(x, obj, "{v}}"), strange_names(x, obj, "{v}}")
        assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    setattr(obj, "{v}", 1)          # the guard on the missing attribute now fails: recompiles
    got, want = compiled(x, obj, "x"), strange_names(x, obj, "x")
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    assert counter.frame_count == 2


NUMPY_NAN = None


def _uses_numpy_nan(x):
    return x + 1 if NUMPY_NAN != NUMPY_NAN else x - 1


def test_a_nan_constant_of_another_kind_passes_its_guard_again():
    # a NaN is never == itself: a numpy NaN scalar (as a float NaN already was) is guarded
    # as "the same value, or both NaN", instead of failing every call to the recompile limit
    global NUMPY_NAN
    kiln.reset()
    counter = CompileCounter()
    fast = kiln.compile(_uses_numpy_nan, backend=counter)
    try:
        for value in (np.float32("nan"), np.float32("nan"), np.float32(2.0)):
            NUMPY_NAN = value
            x = torch.randn(3)
            torch.testing.assert_close(fast(x), _uses_numpy_nan(x))
        assert counter.frame_count == 2   # the two NaNs share an entry; 2.0 recompiles
    finally:
        NUMPY_NAN = None
