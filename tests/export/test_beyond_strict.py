"""Programs torch.export's strict mode (Dynamo) refuses or gets wrong on torch 2.13 that
kiln.export captures exactly, kept beside torch.export's own result; and the
comparison table's runner (kiln.bench.export_programs) on a few rows."""
from __future__ import annotations

import pytest
import torch

from kiln.bench.export_programs import BEYOND_NON_STRICT, BEYOND_STRICT, Wrapped, compare, markdown
from tests.export.harness import check_export, input_checks


@pytest.mark.parametrize("name", sorted(BEYOND_STRICT))
def test_kiln_exports_what_strict_refuses_or_gets_wrong(name):
    fn = BEYOND_STRICT[name]
    x = torch.randn(3)
    check_export(fn, (x,), others=[(torch.randn(3),)], ops=None)
    try:
        ep = torch.export.export(Wrapped(fn), (x,), strict=True)
    except Exception:
        return                                      # refused (deque window, bytes method)
    y = torch.randn(3)
    assert not torch.allclose(ep.module()(y), fn(y))   # exported, but not eager's result (exception message)


def test_exception_message_graph():
    ep = check_export(BEYOND_STRICT["exception message"], (torch.randn(3),), ops=1)
    checks = input_checks(ep)
    assert [n.target for n in ep.graph.nodes if n.op == "call_function" and n not in checks] \
        == [torch.ops.aten.mul.Tensor]


def test_comparison_rows():
    rows = compare(only={"deque window", "torch.cond"}, repeat=1)
    cells = {(r["program"], r["mode"]): r for r in rows}
    assert cells[("deque window", "kiln")]["equal"] is True
    assert cells[("deque window", "strict")]["exported"] is False
    assert cells[("torch.cond", "kiln")]["equal"] is True
    assert "| deque window |" in markdown(rows)


@pytest.mark.parametrize("name", sorted(BEYOND_NON_STRICT))
def test_kiln_exports_what_non_strict_gets_wrong(name):
    fn = BEYOND_NON_STRICT[name]
    x = torch.randn(3)
    check_export(fn, (x,), others=[(torch.randn(3),)], ops=1)
    ep = torch.export.export(Wrapped(fn), (x,), strict=False)
    y = torch.randn(3)
    assert not torch.allclose(ep.module()(y), fn(y))     # the stand-in tensor's type name was kept
