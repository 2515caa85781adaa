"""The ``aten`` backend runs functionalized ATen graphs.

Regression: a python-key traced graph containing ``aten.unsqueeze_(detach_36, 2)`` failed
at run time with "set_storage_offset is not allowed on a Tensor created from .data or
.detach()".  After functionalization no in-place or view op is left in the graphs the
backend runs, so that failure cannot happen; these tests feed it exactly such graphs.
"""
from __future__ import annotations

import pytest
import torch
import torch.fx
import torch.nn as nn

from kiln.backends import lookup
from kiln.backends.aten import check_functional
from kiln.debug import check_same_behaviour, compare
from kiln.exc import BackendError

aten_ops = torch.ops.aten


def detach_unsqueeze_graph() -> torch.fx.GraphModule:
    """The shape of the historical graph: ATen detach, then in-place view ops on it."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    w = g.placeholder("w")
    detach_36 = g.call_function(aten_ops.detach.default, (x,))
    g.call_function(aten_ops.unsqueeze_.default, (detach_36, 2))          # (4, 6, 1)
    scaled = g.call_function(aten_ops.mul.Tensor, (detach_36, 0.5))
    d2 = g.call_function(aten_ops.detach.default, (w,))
    g.call_function(aten_ops.t_.default, (d2,))                           # (6, 4)
    g.call_function(aten_ops.squeeze_.dim, (scaled, 2))                   # (4, 6) again
    mm = g.call_function(aten_ops.mm.default, (scaled, d2))               # (4, 4)
    prod = g.call_function(aten_ops.mul.Tensor, (x, w))                   # keeps the autograd path
    g.output((mm, g.call_function(aten_ops.sum.default, (prod,))))
    return torch.fx.GraphModule(nn.Module(), g)


def data_style(x, w):
    """``x.data`` and ``x.detach()`` followed by in-place view ops, as user code writes them."""
    d = x.data
    d.unsqueeze_(0)
    e = w.detach()
    e.transpose_(0, 1)
    e.unsqueeze_(2)
    return ((x * w).sum() + d.sum(), e.squeeze(2) @ x)


@pytest.mark.parametrize("make_gm", [detach_unsqueeze_graph, lambda: torch.fx.symbolic_trace(data_style)],
                         ids=["aten_detach_unsqueeze_", "data_and_detach"])
def test_detach_then_inplace_view_ops(make_gm):
    gm = make_gm()

    def make():
        torch.manual_seed(0)
        return [torch.randn(4, 6, requires_grad=True), torch.randn(4, 6, requires_grad=True)]

    compiled = lookup("aten")(gm, make())
    report = check_same_behaviour(gm.forward, compiled, make, fn_fp64=gm.forward)
    assert report, str(report)

    # training through it: gradients match eager
    (ex, ew), (cx, cw) = make(), make()
    sum(o.sum() for o in gm(ex, ew)).backward()
    sum(o.sum() for o in compiled(cx, cw)).backward()
    assert torch.allclose(ex.grad, cx.grad) and torch.allclose(ew.grad, cw.grad)

    # and structurally: nothing in-place, no views, in any graph the backend runs
    assert len(compiled.aten_graphs) == 2  # forward and backward
    for graph in compiled.aten_graphs:
        check_functional(graph)
        targets = {n.target for n in graph.graph.nodes if n.op == "call_function"}
        forbidden = {aten_ops.unsqueeze_.default, aten_ops.squeeze_.dim, aten_ops.t_.default,
                     aten_ops.transpose_.default, aten_ops.detach.default, aten_ops.view.default}
        assert not targets & forbidden, graph.code


def test_inference_graph_is_functional_too():
    gm = detach_unsqueeze_graph()
    x, w = torch.randn(4, 6), torch.randn(4, 6)
    compiled = lookup("aten")(gm, [x, w])
    assert len(compiled.aten_graphs) == 1
    assert compare(gm(x, w), compiled(x, w), gm(x.double(), w.double())).ok


def test_input_mutation_is_written_back_outside_the_graph():
    def fn(x):
        x.unsqueeze(0).mul_(2)
        return (x + 1,)

    gm = torch.fx.symbolic_trace(fn)
    x = torch.randn(3)
    compiled = lookup("aten")(gm, [x.clone()])
    expected = x * 2
    out = compiled(x)
    assert torch.equal(x, expected) and torch.equal(out[0], expected + 1)
    check_functional(compiled.aten_graphs[0])
    assert "copy_" not in compiled.aten_graphs[0].code  # AOTAutograd's runtime does the write-back


def test_check_functional_rejects_inplace_and_views():
    from torch.fx.experimental.proxy_tensor import make_fx

    def fn(x):
        return x.clone().unsqueeze_(1) + 1

    unfunctionalized = make_fx(fn)(torch.randn(3))
    assert "unsqueeze_" in unfunctionalized.code
    with pytest.raises(BackendError, match="still mutates"):
        check_functional(unfunctionalized)
    views = make_fx(lambda x: x.view(-1) + 1)(torch.randn(2, 2))
    with pytest.raises(BackendError, match="view op"):
        check_functional(views)
