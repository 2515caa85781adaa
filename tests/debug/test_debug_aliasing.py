"""kiln.debug.aliasing / behaviour: outputs aliasing inputs, input mutation, one-stop check."""
from __future__ import annotations

import pytest
import torch

from kiln.debug import check_same_behaviour, compare_aliasing, record_call


def make():
    torch.manual_seed(0)
    return [torch.randn(4, 4), torch.randn(4)]


def test_record_call():
    def fn(x, y):
        y.mul_(2)
        return (x.view(-1), x + 1, y)

    rec = record_call(fn, make())
    assert rec.output_aliases == {"output[0]": ("input[0]",), "output[2]": ("input[1]",)}
    assert rec.mutated == ("input[1]",) and rec.bumped == ("input[1]",)


def test_same_function_passes():
    def fn(x, y):
        x.add_(y)
        return (x.t(), (x * y).sum())

    report = check_same_behaviour(fn, fn, make, fn_fp64=fn)
    assert report.ok, str(report)
    assert "OK" in str(report)


def test_copy_where_eager_returns_a_view_is_reported():
    def eager(x, y):
        return (x.view(-1),)

    def compiled(x, y):
        return (x.reshape(-1).clone(),)

    report = check_same_behaviour(eager, compiled, make, fn_fp64=eager)
    assert report.outputs.ok            # the values are right ...
    assert not report.ok                # ... but the aliasing is not
    assert report.aliasing == ["output[0] shares memory with input[0] in eager but with no input when compiled"]
    assert "aliasing" in str(report)


def test_outputs_sharing_storage_is_compared():
    def eager(x, y):
        z = x + 1
        return (z, z.view(-1))

    def compiled(x, y):
        z = x + 1
        return (z, z.clone().view(-1))

    report = check_same_behaviour(eager, compiled, make)
    assert any("share storage in eager" in p for p in report.aliasing)


def test_missing_mutation_is_reported():
    def eager(x, y):
        x.add_(1)
        return (x * 2,)

    def compiled(x, y):
        return ((x + 1) * 2,)

    report = check_same_behaviour(eager, compiled, make, fn_fp64=eager)
    assert report.outputs.ok and not report.inputs_after.ok
    assert "input[0] changed in eager but not when compiled" in report.aliasing


def test_mutation_without_version_bump_is_reported():
    def eager(x, y):
        x.add_(1)
        return (y,)

    def compiled(x, y):
        x.data.add_(1)      # same values, but autograd's version counter does not move
        return (y,)

    report = check_same_behaviour(eager, compiled, make)
    assert any("without bumping its version counter" in p for p in report.aliasing)


def test_spurious_version_bump_is_reported():
    def eager(x, y):
        return (y * 2,)

    def compiled(x, y):
        x.copy_(x)          # a write-back of an unchanged input
        return (y * 2,)

    report = check_same_behaviour(eager, compiled, make)
    assert any("bumped when compiled but not in eager" in p for p in report.aliasing)


def test_metadata_only_bump_on_an_alias_is_not_required():
    def eager(x, y):
        x.detach().unsqueeze_(0)   # bumps x's version counter, changes nothing about x
        return (y + 1,)

    def compiled(x, y):
        return (y + 1,)

    report = check_same_behaviour(eager, compiled, make)
    assert report.ok, str(report)


def test_compiled_exception_is_reported_not_raised():
    def compiled(x, y):
        raise RuntimeError("boom")

    report = check_same_behaviour(lambda x, y: (x,), compiled, make)
    assert not report.ok and "RuntimeError: boom" in str(report)


def test_nondeterministic_inputs_are_refused():
    with pytest.raises(ValueError, match="seed"):
        check_same_behaviour(lambda x: x, lambda x: x, lambda: [torch.randn(3)])


def test_compare_aliasing_of_identical_records_is_empty():
    rec = record_call(lambda x, y: (x[0], y), make())
    assert compare_aliasing(rec, rec) == []
