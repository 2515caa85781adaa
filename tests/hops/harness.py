"""Checks for higher-order operator tests: compile with fullgraph=True under a backend
wrapped in a counter, compare values (and gradients) with eager on several inputs
(``kiln.comparison`` within ``atol``/``rtol``; NaN is a difference)."""
from __future__ import annotations

import copy

import torch

import kiln
from kiln.backends.registry import lookup
from kiln.testing import CompileCounter, Rules, assert_same


class Counting(CompileCounter):
    """CompileCounter in front of a real backend (counts graphs and ops, then compiles)."""

    def __init__(self, backend: str):
        super().__init__()
        self.inner = lookup(backend)

    def __call__(self, gm, example_inputs):
        super().__call__(gm, example_inputs)
        return self.inner(gm, example_inputs)


def hop_nodes(cc: CompileCounter) -> list:
    return [n for gm in cc.graphs for n in gm.graph.nodes
            if n.op == "call_function" and isinstance(n.target, torch._ops.HigherOrderOperator)]


def _grads(out, leaves):
    flat = [o for o in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(o, torch.Tensor)]
    total = sum((o.float() * (i + 1)).sum() for i, o in enumerate(flat) if o.requires_grad)
    return torch.autograd.grad(total, leaves, allow_unused=True)


def check(fn, inputs: list, backend: str = "eager", graphs: int = 1, ops: int | None = None,
          grad: bool = False, atol=1e-5, rtol=1e-4, compiled=None) -> Counting:
    """``fn`` compiled (fullgraph) vs eager on every input tuple; with ``grad``, gradients of
    the floating inputs that require grad too.  Returns the counter."""
    cc = Counting(backend)
    cfn = compiled or kiln.compile(fn, backend=cc, fullgraph=True)
    for args in inputs:
        a_eager, a_comp = copy.deepcopy(args), copy.deepcopy(args)
        expected = fn(*a_eager)
        got = cfn(*a_comp)
        same = Rules(rtol=rtol, atol=atol, equal_nan=False)
        assert_same(expected, got, same, "result")
        if grad:
            le = [a for a in a_eager if isinstance(a, torch.Tensor) and a.requires_grad]
            lc = [a for a in a_comp if isinstance(a, torch.Tensor) and a.requires_grad]
            params_e = [p for m in a_eager if isinstance(m, torch.nn.Module) for p in m.parameters()]
            params_c = [p for m in a_comp if isinstance(m, torch.nn.Module) for p in m.parameters()]
            assert_same(_grads(expected, le + params_e), _grads(got, lc + params_c), same, "grads")
    assert cc.frame_count == graphs, cc
    if ops is not None:
        assert cc.op_count == ops, cc
    return cc
