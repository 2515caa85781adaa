"""kiln.export of programs that change buffers (BatchNorm in training mode, counters,
EMA buffers, a buffer reassigned) — reported as buffer mutations once functionalized,
applied by ep.module() as eager applies them — and of higher-order operators, which stay
HOPs in the exported graph."""
from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import kiln
from kiln.bench.export_programs import Stateful
from tests.export.harness import check_export


def test_buffer_mutations_in_the_signature_and_applied_like_eager():
    m = Stateful().train()
    ep = check_export(m, (torch.randn(8, 4),), others=[(torch.randn(8, 4),), (torch.randn(8, 4),)])
    mutated = ep.run_decompositions({}).graph_signature.buffers_to_mutate
    assert sorted(mutated.values()) == ["bn.num_batches_tracked", "bn.running_mean", "bn.running_var",
                                       "count", "ema", "last"]


def test_buffer_changed_under_no_grad():
    """Not saved: on torch 2.13 torch.export.load refuses a program whose no_grad region
    (a wrap_with_set_grad_enabled) has no outputs ("missing val field"), torch.export's
    own non-strict programs alike."""
    class Ema(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.register_buffer("ema", torch.zeros(4))

        def forward(self, x):
            y = self.lin(x)
            with torch.no_grad():
                self.ema.mul_(0.9).add_(0.1 * y.mean(0))
            return y

    ep = check_export(Ema(), (torch.randn(8, 4),), others=[(torch.randn(8, 4),)], save=False)
    assert list(ep.run_decompositions({}).graph_signature.buffers_to_mutate.values()) == ["ema"]


def test_batchnorm_eval_mutates_nothing():
    m = Stateful().eval()
    m.bn.eval()
    ep = check_export(m.bn, (torch.randn(8, 4),), others=[(torch.randn(8, 4),)], ops=1)
    assert ep.run_decompositions({}).graph_signature.buffers_to_mutate == {}


def test_buffer_write_with_dynamic_batch():
    m = Stateful().train()
    check_export(m, (torch.randn(8, 4),), dynamic_shapes={"x": {0: Dim("b", min=2, max=64)}},
                 others=[(torch.randn(20, 4),)])


def test_python_attribute_write_is_refused_naming_the_line():
    class Calls(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * 2

    with pytest.raises(kiln.Unsupported, match=r"(?s)attribute 'calls'.*register_buffer.*test_state_and_hops.py:\d+\n\s+self.calls \+= 1"):
        kiln.export(Calls(), (torch.randn(3),))


def _branches(x, y):
    def yes(x, y):
        return x.sin() + y

    def no(x, y):
        return x.cos() - y

    return torch.cond(x.sum() > 0, yes, no, (x, y))


def test_cond_stays_a_hop():
    x, y = torch.ones(3), torch.randn(3)
    ep = check_export(_branches, (x, y), others=[(-torch.ones(3), torch.randn(3)), (torch.randn(3), torch.randn(3))])
    assert any(n.target is torch.ops.higher_order.cond for n in ep.graph.nodes)


def test_cond_with_dynamic_size():
    ep = check_export(_branches, (torch.ones(4), torch.randn(4)), dynamic_shapes=({0: Dim("n")}, {0: Dim("n")}),
                      others=[(-torch.ones(9), torch.randn(9))])
    assert any(n.target is torch.ops.higher_order.cond for n in ep.graph.nodes)


def test_map_and_while_loop_stay_hops():
    def mapped(xs, y):
        return torch._higher_order_ops.map(lambda a, b: a * b + 1, xs, y)

    ep = check_export(mapped, (torch.randn(3, 2), torch.randn(2)), others=[(torch.randn(3, 2), torch.randn(2))])
    assert any(n.target is torch.ops.higher_order.map_impl for n in ep.graph.nodes)

    def looped(i, x):
        return torch._higher_order_ops.while_loop(lambda i, x: i < 5, lambda i, x: (i + 1, x * 2), (i, x))

    ep = check_export(looped, (torch.tensor(0), torch.randn(3)), others=[(torch.tensor(2), torch.randn(3))])
    assert any(n.target is torch.ops.higher_order.while_loop for n in ep.graph.nodes)
