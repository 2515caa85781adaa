"""``==``/``!=`` between builtin kinds that cannot compare equal: both sides' ``__eq__``
decline (NotImplemented), so Python answers by identity.  Each case runs under
``fullgraph=True`` (no break), on two inputs, and equals eager."""
from __future__ import annotations

import collections

import pytest
import torch

import kiln
from kiln.testing import CompileCounter


def _cases():
    yield "keys == list", lambda x, d: (x + 1, d.keys() == ["a", "b"], d.keys() != ["a", "b"])
    yield "keys == set", lambda x, d: (x + 1, d.keys() == {"a", "b"}, d.items() == {("a", 1), ("b", 2)})
    yield "values == values", lambda x, d: (x + 1, d.values() == d.values(), d.values() != list(d.values()))
    yield "list == tuple", lambda x, d: (x + 1, list(d) == tuple(d), [1, 2] != (1, 2))
    yield "dict == list", lambda x, d: (x + 1, d == list(d.items()), dict(d) == collections.OrderedDict(d))
    yield "str == list", lambda x, d: (x + 1, "ab" == list("ab"), list(d)[0] == ["a"])
    yield "set == frozenset", lambda x, d: (x + 1, set(d) == frozenset(d), set(d) == list(d))
    yield "None == dict", lambda x, d: (x + 1, None == d, d != None)   # noqa: E711
    yield "number == str", lambda x, d: (x + 1, d["a"] == "1", d["b"] == 2.0)


@pytest.mark.parametrize("name,fn", list(_cases()), ids=[n for n, _ in _cases()])
def test_equality_across_kinds(name, fn):
    kiln.reset()
    counter = CompileCounter()
    fast = kiln.compile(fn, backend=counter, fullgraph=True)
    for seed, d in ((0, {"a": 1, "b": 2}), (1, {"a": 1, "b": 2})):
        x = torch.randn(3, generator=torch.Generator().manual_seed(seed))
        expected, got = fn(x, d), fn and fast(x, d)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:]
    assert counter.frame_count == 1 and counter.op_count == 1
