"""The opcode families CPython 3.13 introduced, one program each.

As in test_opcodes_312: plain Python that every version compiles, producing the 3.13
opcodes (named per case) on 3.13; ``fullgraph=True``, compiled against eager on two
input sets, with the same graph and op counts on every version.
"""
from __future__ import annotations

import dis

import torch

from ..capture.capture_harness import Case, I, parametrize, run_case


def x1(r):
    return (r.randn(3, 4),)


def scaled(x, *, k=1.0, bias=None):
    out = x * k
    return out if bias is None else out + bias


# -- CALL_KW ----------------------------------------------------------------------------------
def keywords(x, b):
    return scaled(x, k=2.0), scaled(x, bias=b, k=0.5), torch.sum(x, dim=1, keepdim=True)


# -- LOAD_FAST_LOAD_FAST / STORE_FAST_LOAD_FAST / STORE_FAST_STORE_FAST --------------------------
def superinstructions(x, y):
    a, b = y, x            # STORE_FAST_STORE_FAST
    c = a + b              # LOAD_FAST_LOAD_FAST
    d = [t * c for t in (a, b)]   # STORE_FAST_LOAD_FAST
    return c, a, b, d


# -- TO_BOOL (and COMPARE_OP's bool bit) -------------------------------------------------------
def truth(x, items, n, name):
    out = x
    if items:
        out = out + len(items)
    if not n:
        out = out * 2
    if name and n > 1:
        out = out - 1
    if x.shape[0] > 2 or items is None:
        out = out.relu()
    return out


# -- SET_FUNCTION_ATTRIBUTE: closures, defaults, keyword defaults, annotations ------------------
def functions(x):
    w = x * 2

    def inner(t, s=3.0, *, u=1.0) -> torch.Tensor:
        return t * s + w * u

    lam = lambda t, k=2: t - k   # noqa: E731 - a lambda with a default is the case under test
    return inner(x), inner(x, 1.0, u=0.5), lam(x)


# -- FORMAT_SIMPLE / FORMAT_WITH_SPEC / CONVERT_VALUE (f-strings of constants) ------------------
def fstrings(x, n, name):
    tag = f"{name}-{n}:{n:>4}|{name!r}|{2.5:.2f}|{name!s:^9}|{name!a}"
    return x * len(tag), tag


# -- CALL_FUNCTION_EX's layout ------------------------------------------------------------------
def star_calls(x, args, kwargs):
    return scaled(*args, **kwargs), scaled(x, **{"k": 3.0}), torch.cat(*[[x, x]])


CASES = [
    Case("call_kw", keywords, lambda r: I(r.randn(3, 4), r.randn(3, 4)), 1, 4),
    Case("superinstructions", superinstructions, lambda r: I(r.randn(3), r.randn(3)), 1, 3),
    Case("to_bool", truth, lambda r: I(r.randn(3, 4), [1, 2], 0, "a"), 1, 3),
    Case("to_bool_other_branches", truth, lambda r: I(r.randn(1, 4), [], 2, "b"), 1, 1),
    Case("set_function_attribute", functions, x1, 1, 8),
    Case("fstrings", fstrings, lambda r: I(r.randn(3), 7, "ab"), 1, 1),
    Case("call_function_ex", star_calls, lambda r: I(r.randn(3), (r.randn(3),), {"k": 2.0}), 1, 3),
]


@parametrize(CASES)
def test_opcode_family(case):
    run_case(case)


def test_the_cases_use_the_new_opcodes_where_the_version_has_them():
    have = set(dis.opmap)
    used = set()
    for fn in (keywords, superinstructions, truth, functions, fstrings, star_calls):
        used |= {i.opname for i in dis.get_instructions(fn)}
    wanted = {"CALL_KW", "LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "TO_BOOL",
              "SET_FUNCTION_ATTRIBUTE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "CONVERT_VALUE",
              "CALL_FUNCTION_EX"} & have
    assert wanted <= used, sorted(wanted - used)


def test_truth_of_a_tensor_breaks_and_the_step_converts_it():
    """3.13's POP_JUMP_IF_* and UNARY_NOT read an exact bool (TO_BOOL before them): a
    break there on a tensor's truth runs them in a step that converts it first."""
    from ..breaks.harness import check, randn

    def f(x):
        y = x * 2
        flag = not (y.sum() > 0)      # UNARY_NOT of a tensor
        if y.mean() > 0.1:            # POP_JUMP_IF_FALSE on a tensor
            y = y + 1
        return y.relu(), flag

    inputs = [(randn(0, 4),), (-randn(0, 4),), (randn(1, 4),)]
    check(f, inputs, graphs=3, total_graphs=4, breaks=2, total_breaks=2)
