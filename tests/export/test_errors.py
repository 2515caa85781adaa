"""What kiln.export says about a program that cannot be one graph: every problem at once,
each with the user's file:line, the source line and a hint (torch.cond for a branch on a
tensor's value); the module is left as it was; strict=False exports with torch.export's
non-strict mode instead, with a warning."""
from __future__ import annotations

import warnings

import pytest
import torch

import kiln
from kiln.export_problems import ExportUnsupported


def several_problems(x):
    y = x * 2
    if x.sum() > 0:                 # problem 1
        y = y + 1
    print("value", y)               # problem 2
    values = y.tolist()             # problem 3
    return y * len(values)


def test_every_problem_with_its_line_and_a_hint(capsys):
    with pytest.raises(ExportUnsupported) as info:
        kiln.export(several_problems, (torch.randn(3),))
    err = info.value
    assert isinstance(err, kiln.Unsupported)
    assert len(err.problems) == 3
    text = str(err)
    for line in ("if x.sum() > 0:", 'print("value", y)', "values = y.tolist()"):
        assert line in text
    assert "torch.cond(pred, true_fn, false_fn, operands)" in text
    assert text.count("test_errors.py:") == 3
    assert err.location.startswith(__file__.rstrip("c")) or "test_errors.py" in err.location
    assert capsys.readouterr().out == ""       # the survey's prints are not the user's


def test_failing_export_leaves_the_module_alone():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("steps", torch.zeros(()))

        def forward(self, x):
            self.steps += 1
            if x.max() > 0:
                return x
            return -x

    m = M()
    with pytest.raises(kiln.Unsupported, match="torch.cond"):
        kiln.export(m, (torch.randn(3),))
    assert m.steps.item() == 0


def test_a_problem_in_a_called_function_names_its_line():
    def helper(x):
        return x.item() + 1 if x.numel() == 1 and float(x) > 0 else x

    def f(x):
        return helper(x.sum()) * 2

    with pytest.raises(kiln.Unsupported, match=r"(?s)test_errors.py:\d+"):
        kiln.export(f, (torch.randn(3),))


def test_not_strict_falls_back_to_torch_non_strict_with_a_warning():
    def prints(x):
        print("tracing")
        return x * 2

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ep = kiln.export(prints, (torch.ones(3),), strict=False)
    assert any("non-strict" in str(w.message) for w in caught)
    assert isinstance(ep, torch.export.ExportedProgram)
    assert torch.equal(ep.module()(torch.ones(3)), torch.full((3,), 2.0))


def test_not_strict_where_torch_fails_too_gives_kilns_account():
    with pytest.raises(ExportUnsupported, match="torch.cond") as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kiln.export(several_problems, (torch.ones(3),), strict=False)
    assert info.value.__cause__ is not None      # torch's own error, chained


NET = torch.nn.BatchNorm1d(3).train()


def uses_a_global_module(x):
    y = NET(x)
    if y.sum() > 0:
        return y
    return -y


def test_survey_of_a_function_leaves_the_modules_it_names_alone():
    before = NET.running_mean.clone(), NET.num_batches_tracked.clone()
    with pytest.raises(ExportUnsupported):
        kiln.export(uses_a_global_module, (torch.randn(4, 3),))
    assert torch.equal(NET.running_mean, before[0]) and torch.equal(NET.num_batches_tracked, before[1])
