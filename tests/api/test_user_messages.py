"""Kiln's messages in the user's terms (issue #30): errors name the user's functions and
lines, recompile reasons say both sides of a change, warnings point at the user's call,
continuations carry the user's names, settings take effect when changed."""
import re
import warnings

import pytest
import torch

import kiln
from kiln.testing import CompileCounter


def pair_sum(x, y):
    return x + y


def _eager_error(fn, *args, **kwargs):
    with pytest.raises(TypeError) as info:
        fn(*args, **kwargs)
    return info.value


@pytest.mark.parametrize("args, kwargs", [((1,), {}), ((1, 2, 3), {}), ((1, 2), {"z": 3}), ((1,), {"x": 2})])
def test_arity_errors_are_eagers_naming_the_function(args, kwargs):
    """After a good call the entry's guard has the frame's signature plus one parameter:
    a call that does not fit raises eager's TypeError (message, no chained guard error)."""
    counter = CompileCounter()
    compiled = kiln.compile(pair_sum, backend=counter)
    x = torch.ones(3)
    for y in (torch.ones(3), torch.zeros(3)):
        assert torch.equal(compiled(x, y), pair_sum(x, y))
    real = [x] * len(args)
    expected = _eager_error(pair_sum, *real, **{k: x for k in kwargs})
    got = _eager_error(compiled, *real, **{k: x for k in kwargs})
    assert str(got) == str(expected) and "pair_sum()" in str(got)
    assert "___guard" not in str(got) and got.__context__ is None and got.__cause__ is None
    assert (counter.frame_count, counter.op_count) == (1, 1)


def test_a_typeerror_from_the_users_code_is_not_mistaken_for_arity():
    def bad(x):
        return x + "a"

    compiled = kiln.compile(bad, backend=CompileCounter())
    with pytest.raises(TypeError) as eager:
        bad(torch.ones(2))
    with pytest.raises(TypeError) as got:
        compiled(torch.ones(2))
    assert str(got.value) == str(eager.value)
