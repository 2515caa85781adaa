"""Guards embed constants and names in generated Python: braces in them stay literal.

Guard checks are ``str.format`` templates (``{v}`` names the guarded source), so a
constant whose repr has braces (a string such as ``"{'a': 0}"``, carried over a break or
read from outside) or an attribute name with braces once made the guard's codegen fail
with a KeyError (found by the semantics oracle on 3.13: ``'%s' % (v,)`` of a dict breaks,
and its string result is a guarded constant of the continuation)."""
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
