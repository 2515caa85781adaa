"""kiln.debug.accuracy: float64-referenced comparison, stricter than a fixed tolerance."""
from __future__ import annotations

import dataclasses
from collections import OrderedDict

import pytest
import torch
import torch.nn as nn

from kiln.debug import AccuracyReport, compare, fp64_copy


def model_fn(x, w):
    return torch.softmax(x @ w, dim=-1) * x.sum(dim=-1, keepdim=True)


def reordered_model_fn(x, w):
    """Same maths, different fp32 rounding: matmul as broadcast-multiply + sum, reversed sums."""
    prod = (x.unsqueeze(-1) * w.unsqueeze(0)).flip(1).sum(1)
    return torch.softmax(prod, dim=-1) * x.flip(-1).sum(dim=-1, keepdim=True)


@pytest.fixture
def data():
    torch.manual_seed(0)
    x, w = torch.randn(64, 256), torch.randn(256, 128)
    expected = model_fn(x, w)
    ref = model_fn(x.double(), w.double())
    return expected, ref, x, w


def test_fp32_noise_passes(data):
    expected, ref, x, w = data
    actual = reordered_model_fn(x, w)
    assert not torch.equal(actual, expected)   # really a different rounding
    report = compare(expected, actual, ref)
    assert report.ok, str(report)
    assert report.worst.name == "output" and report.worst.err > 0 and report.worst.noise > 0


def test_a_few_times_the_noise_passes(data):
    expected, ref, _, _ = data
    actual = (expected.double() + 3 * (expected.double() - ref)).float()
    assert compare(expected, actual, ref).ok


def test_thousand_times_the_noise_fails(data):
    expected, ref, _, _ = data
    actual = (ref + 1000 * (expected.double() - ref)).float()
    report = compare(expected, actual, ref)
    assert not report.ok
    assert report.worst.err > 100 * report.worst.noise
    assert "FAILED" in str(report) and "output" in str(report)


def test_bigbird_like_gradient_error_fails_where_a_fixed_tolerance_passes():
    """Gradients off by ~3e-5 absolute (~1000x their fp32 noise) must fail."""
    torch.manual_seed(0)
    a, b = torch.randn(128, 16), torch.randn(16, 64)
    grad = (a @ b) / 100                             # scale ~0.2, fp32 noise ~3e-8 absolute
    ref = (a.double() @ b.double()) / 100
    assert (grad.double() - ref).abs().max() < 5e-8
    bad = grad.clone()
    bad[3, 7] += 3e-5
    bad[100, 0] -= 3e-5
    assert torch.allclose(bad, grad, rtol=1e-4, atol=1e-4)   # a fixed tolerance is fooled
    report = compare({"encoder.layer.0.weight": grad}, {"encoder.layer.0.weight": bad},
                     {"encoder.layer.0.weight": ref}, name="grad")
    assert not report.ok
    assert report.worst.name == "grad[encoder.layer.0.weight]"
    assert report.worst.err > 500 * report.worst.noise
    assert report.worst.err > 10 * report.worst.limit
    assert report.worst.index in {(3, 7), (100, 0)}


def test_exact_values_get_a_small_floor():
    x = torch.arange(10.0)
    ref = x.double()
    assert compare(x, x, ref).ok
    assert compare(x, x + x.abs().max() * 2e-7, ref).ok          # ~2 ulp of the scale
    assert not compare(x, x + x.abs().max() * 1e-5, ref).ok


@pytest.mark.parametrize("actual,what", [
    (torch.ones(3, dtype=torch.float64), "dtype"),
    (torch.ones(4), "shape"),
    (torch.ones(3, requires_grad=True), "requires_grad"),
    ([torch.ones(3)], "compiled gave a list"),
    (None, "compiled gave None"),
])
def test_metadata_and_structure_mismatches_fail(actual, what):
    report = compare(torch.ones(3), actual, torch.ones(3, dtype=torch.float64))
    assert not report.ok
    assert what in str(report)


def test_integer_and_bool_tensors_must_be_equal():
    assert compare(torch.arange(5), torch.arange(5), None).ok
    report = compare(torch.arange(5), torch.tensor([0, 1, 2, 3, 5]), None)
    assert not report.ok and "1 of 5" in str(report)
    assert not compare(torch.tensor([True]), torch.tensor([False]), None).ok


def test_non_finite_values_must_match():
    e = torch.tensor([1.0, float("nan"), float("inf")])
    ref = e.double()
    assert compare(e, e.clone(), ref).ok
    assert not compare(e, torch.tensor([1.0, 0.0, float("inf")]), ref).ok
    assert not compare(e, torch.tensor([1.0, float("nan"), -float("inf")]), ref).ok


def test_nested_structures_and_paths():
    t = torch.ones(2)
    ref = {"logits": t.double(), "hidden": (t.double(), t.double())}
    e = {"logits": t, "hidden": (t, t)}
    assert compare(e, {"logits": t, "hidden": (t, t)}, ref).ok
    report = compare(e, {"logits": t, "hidden": (t, t * 2)}, ref)
    assert not report.ok and report.worst.name == "output.hidden[1]"
    report = compare(e, {"logits": t}, ref)
    assert not report.ok and "lacks ['hidden']" in str(report)
    assert not compare((t, t), (t,), None).ok


def test_numbers_none_and_other_leaves():
    assert compare((1.0, 3, None, "a"), (1.0, 3, None, "a"), (1.0, 3, None, "a")).ok
    assert not compare(3, 4, 3).ok
    assert not compare(1.0, 1.001, 1.0).ok
    assert not compare(1, 1.0, 1).ok
    assert not compare("a", "b", None).ok


@dataclasses.dataclass
class Output:
    loss: torch.Tensor
    extra: int = 0


def test_dataclasses_and_ordered_dicts():
    t = torch.ones(2)
    assert compare(Output(t), Output(t), Output(t.double())).ok
    report = compare(Output(t), Output(t + 1), Output(t.double()))
    assert not report.ok and report.worst.name == "output.loss"
    od = OrderedDict(a=t)
    assert not compare(od, {"a": t}, None).ok  # container type differs


def test_transformers_model_output():
    outputs = pytest.importorskip("transformers.modeling_outputs")
    t = torch.randn(2, 3)
    e = outputs.MaskedLMOutput(logits=t)
    ref = outputs.MaskedLMOutput(logits=t.double())
    assert compare(e, outputs.MaskedLMOutput(logits=t.clone()), ref).ok
    report = compare(e, outputs.MaskedLMOutput(logits=t + 1e-3), ref)
    assert not report.ok and report.worst.name == "output.logits"
    assert not compare(e, outputs.MaskedLMOutput(logits=t, loss=t.sum()), ref).ok
    converted = fp64_copy(e)
    assert type(converted) is type(e) and converted.logits.dtype == torch.float64


def test_report_without_values():
    report = compare((), (), ())
    assert isinstance(report, AccuracyReport) and report.ok and report.worst is None
    assert "OK" in str(report)


def test_fp64_copy():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    m64 = fp64_copy(model)
    assert model[0].weight.dtype == torch.float32 and m64[0].weight.dtype == torch.float64
    assert m64[1].running_mean.dtype == torch.float64
    assert m64[1].num_batches_tracked.dtype == torch.int64
    x = torch.randn(2, 3, requires_grad=True)
    ids = torch.tensor([1, 2])
    converted = fp64_copy({"x": x, "ids": ids, "pair": (x, 1.5), "none": None})
    assert converted["x"].dtype == torch.float64 and converted["x"].requires_grad and converted["x"].is_leaf
    assert converted["ids"].dtype == torch.int64 and converted["ids"] is not ids
    assert converted["pair"][1] == 1.5 and converted["none"] is None
    assert torch.allclose(m64(converted["x"]).float(), model(x), atol=1e-5)
