"""The historical "first seed": BigBird (block-sparse attention, seq 512) under the
``aten`` backend failed at run time with "set_storage_offset is not allowed on a Tensor
created from .data or .detach()" (a python-key traced graph replayed
``aten.unsqueeze_(detach_36, 2)``).  The backend now runs functionalized ATen graphs.

Train mode (forward + backward, matched against fp64) is covered by
test_training_step.py; this file runs eval mode, with and without autograd, and checks
the outputs against the fp64 reference."""
from __future__ import annotations

import pytest
import torch

import kiln
from kiln.backends.aten import check_functional
from kiln.debug.accuracy import compare, fp64_copy

from .models import build, seed_all

pytestmark = pytest.mark.slow


def test_bigbird_eval_under_aten():
    model = build("bigbird").eval()
    ref_model = fp64_copy(model)
    ids = torch.randint(1, 1000, (1, 512), generator=torch.Generator().manual_seed(3))
    compiled_graphs = []

    def aten_kept(gm, example_inputs):
        compiled = kiln.backends.lookup("aten")(gm, example_inputs)
        compiled_graphs.extend(compiled.aten_graphs)
        return compiled

    compiled = kiln.compile(model, backend=aten_kept)

    def run(fn):
        seed_all(7)
        return fn(input_ids=ids).logits

    with torch.no_grad():
        expected, reference = run(model), run(ref_model)
        actual = run(compiled)
    report = compare(expected, actual, reference, name="bigbird eval/aten no_grad")
    assert report.ok, str(report)
    # eval with autograd on (parameters require grad): the training variants of the graphs
    actual = run(compiled)
    assert actual.requires_grad
    report = compare(expected, actual.detach(), reference, name="bigbird eval/aten")
    assert report.ok, str(report)
    assert compiled_graphs and kiln.metrics.backend_fallbacks == 0 and kiln.metrics.eager_fallbacks == 0
    for g in compiled_graphs:
        check_functional(g)
    print(f"bigbird eval/aten: {kiln.metrics.graphs} graphs, {len(compiled_graphs)} ATen graphs")
