"""torch.cond, map, while_loop and scan traced as subgraphs: one graph under
fullgraph=True, values (and gradients, where differentiable) equal eager's."""
from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops import scan, while_loop
from torch._higher_order_ops.map import map as hop_map

import kiln
from kiln.capture.hops.scope import HopRuleError

from .harness import Counting, check, hop_nodes

BACKENDS = ["eager", "aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]
W = torch.randn(4)


def cond_closure(x, y):
    def true_fn(a):
        return a.sin() + W * y          # a global and a closed-over tensor, lifted
    def false_fn(a):
        return a.cos() - y
    return torch.cond(x.sum() > 0, true_fn, false_fn, (x,)) + 1


def both_branches(req=False):
    pos = torch.rand(4) + 0.5
    return [(pos.clone().requires_grad_(req), torch.randn(4)), ((-pos).requires_grad_(req), torch.randn(4))]


@pytest.mark.parametrize("backend", BACKENDS)
def test_cond_takes_each_branch(backend):
    cc = check(cond_closure, both_branches(), backend, ops=5)
    (node,) = hop_nodes(cc)
    assert len(node.args[3]) == 3   # x, W and y: lifted into both branches


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_cond_gradients(backend):
    check(cond_closure, both_branches(req=True), backend, grad=True)


class Branches(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 3)
        self.b = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())

    def forward(self, x):
        return torch.cond(x.mean() > 0, self.a, self.b, (x,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_cond_branches_call_submodules(backend):
    torch.manual_seed(0)
    m = Branches()
    pos = torch.rand(2, 4) + 0.5
    cc = Counting(backend)
    cm = kiln.compile(m, backend=cc, fullgraph=True)
    for x in (pos, -pos):
        torch.testing.assert_close(cm(x), m(x))
        xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
        m.zero_grad()
        m(xe).sum().backward()
        ge = [p.grad.clone() for p in m.parameters()]
        m.zero_grad()
        cm(xc).sum().backward()
        for p, g in zip(m.parameters(), ge):
            torch.testing.assert_close(p.grad, g)
        torch.testing.assert_close(xc.grad, xe.grad)
    assert cc.frame_count == 2      # x without and with requires_grad
    for node in hop_nodes(cc):
        assert len(node.args[3]) == 5   # x and the four parameters


def test_cond_python_predicate_picks_branch_and_guards():
    def f(x, flag):
        return torch.cond(flag, lambda a: a + 1, lambda a: a - 1, (x,))
    cc = check(f, [(torch.randn(3), True), (torch.randn(3), True)], "eager", ops=1)
    check(f, [(torch.randn(3), False)], "eager", ops=1)
    assert not hop_nodes(cc)


def test_cond_branch_mismatch_is_a_clear_error():
    def f(x):
        return torch.cond(x.sum() > 0, lambda a: a, lambda a: a[:2], (x,))
    with pytest.raises(HopRuleError, match=r"output 0 is \(3,\) float32 .* but \(2,\) float32"):
        kiln.compile(f)(torch.randn(3))


def map_body(xs, b, k):
    def body(x, c):
        return x * b + c * k, x.sum()
    return hop_map(body, xs, torch.ones(3))


# inductor lowers map and scan to a while_loop whose body reads its counter with .item():
# compiled under the capture's tracing context, whose fake mode then allows scalar outputs
@pytest.mark.parametrize("backend", BACKENDS)
def test_map(backend):
    cc = check(map_body, [(torch.randn(4, 3), torch.randn(3), 2.0), (torch.randn(4, 3), torch.randn(3), 2.0)],
               backend)
    assert len(hop_nodes(cc)) == 1


def test_map_closed_over_constant_recompiles_new_tensors_do_not():
    scale = [2.0]

    def f(xs):
        k = scale[0]
        return hop_map(lambda x: x.pow(k), xs)     # the exponent is baked into the body
    cc = check(f, [(torch.randn(2, 3),), (torch.randn(2, 3),)], "eager")
    scale[0] = 3.0
    cfn = kiln.compile(f, backend=cc, fullgraph=True)
    xs = torch.randn(2, 3)
    torch.testing.assert_close(cfn(xs), xs.pow(3.0))
    assert cc.frame_count == 2


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_map_tuple_xs_and_gradients(backend):
    def f(a, b):
        return hop_map(lambda xs: (xs[0] * xs[1]).sin(), (a, b))
    check(f, [(torch.randn(3, 2, requires_grad=True), torch.randn(3, 2, requires_grad=True))], backend,
          grad=True)


def count_up(x, n):
    def cond_fn(i, acc):
        return i < n
    def body_fn(i, acc):
        return i + 1, acc * 0.5 + x
    return while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_while_loop_trip_counts(backend):
    # torch's fake rule for while_loop makes unbacked symbols: AOTAutograd and inductor get
    # the capture's fake mode and ShapeEnv through a tracing context (no eager fallback:
    # the conftest makes a backend failure an error)
    x = torch.randn(3)
    cc = check(count_up, [(x, torch.tensor(n)) for n in (0, 1, 5, 9)], backend)
    assert len(hop_nodes(cc)) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_while_loop_gradients(backend):
    check(count_up, [(torch.randn(3, requires_grad=True), torch.tensor(n)) for n in (0, 1, 4)], backend,
          grad=True)


def test_while_loop_results_carry_eager_autograd_metadata():
    # the loop's fake rule (torch's, run at capture) says the result requires grad
    def f(x, n):
        i, acc = count_up(x, n)
        return acc * 2, acc.requires_grad, i.requires_grad
    check(f, [(torch.randn(3, requires_grad=True), torch.tensor(2)), (torch.randn(3), torch.tensor(2))],
          "eager", graphs=2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_while_loop_under_no_grad_after_training(backend):
    # a second variant of the compiled graph (inference) is compiled under the same context
    cfn = kiln.compile(count_up, backend=backend, fullgraph=True)
    x = torch.randn(3, requires_grad=True)
    cfn(x, torch.tensor(3))[1].sum().backward()
    with torch.no_grad():
        got = cfn(x, torch.tensor(2))
    torch.testing.assert_close(got, count_up(x.detach(), torch.tensor(2)))
    assert not got[1].requires_grad


def test_while_loop_body_must_keep_carried_metadata():
    def f(x):
        return while_loop(lambda a: a.sum() < 10, lambda a: (a.sum(),), (x,))
    with pytest.raises(HopRuleError, match="carried value 0 is"):
        kiln.compile(f)(torch.randn(3))


def cumulative(init, xs, w):
    def combine(carry, x):
        nxt = carry * w + x
        return nxt, nxt.sin()
    return scan(combine, init, xs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_scan(backend):
    cc = check(cumulative, [(torch.randn(3), torch.randn(n, 3), torch.randn(3)) for n in (1, 4)], backend,
               graphs=2)
    assert len(hop_nodes(cc)) == 2


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_scan_dim_and_reverse_with_gradients(backend):
    def f(init, xs):
        return scan(lambda c, x: (c + x, c * x), init, xs, dim=1, reverse=True)
    check(f, [(torch.randn(3, requires_grad=True), torch.randn(3, 5, requires_grad=True))], backend, grad=True)


def test_unsupported_body_breaks_in_default_mode_and_raises_under_fullgraph():
    def f(x):
        def body(a):
            kiln.graph_break()      # Kiln cannot trace this body (eager torch can)
            return a * 2
        return hop_map(body, x) + 1
    with pytest.raises(kiln.Unsupported, match=r"cannot trace the body of `map`.*graph break"):
        kiln.compile(f, fullgraph=True)(torch.randn(2, 3))
    kiln.reset()
    from kiln.metrics import metrics
    metrics.reset()
    x = torch.randn(2, 3)
    torch.testing.assert_close(kiln.compile(f)(x), f(x))
    assert any("body of `map`" in b.reason for b in metrics.breaks)


class Powered(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.p = 2.0

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda a: a.pow(self.p), lambda a: a.abs().pow(self.p + 1), (x,))


def test_cond_branch_reading_a_module_constant_is_guarded():
    m = Powered()
    cc = Counting("eager")
    cm = kiln.compile(m, backend=cc, fullgraph=True)
    for x in (torch.rand(3) + 0.5, -torch.rand(3) - 0.5):
        torch.testing.assert_close(cm(x), m(x))
    assert cc.frame_count == 1
    m.p = 3.0
    x = torch.rand(3) + 0.5
    torch.testing.assert_close(cm(x), m(x))
    assert cc.frame_count == 2


def test_hop_after_a_graph_break_is_traced_in_the_continuation():
    def f(x):
        y = x * 2
        print("break", end="")          # a graph break in default mode
        return torch.cond(y.sum() > 0, lambda a: a + 1, lambda a: a - 1, (y,))
    cc = Counting("eager")
    cf = kiln.compile(f, backend=cc)
    for x in (torch.rand(3), -torch.rand(3)):
        torch.testing.assert_close(cf(x), f(x))
    assert cc.frame_count == 2 and len(hop_nodes(cc)) == 1


def _dyn_cond(x):
    return torch.cond(x.sum() > 0, lambda a: a.sin() * W[0], lambda a: a.cos(), (x,))


def _dyn_map(xs):
    return hop_map(lambda r: r * 2, xs)


def _dyn_scan(init, xs):
    return scan(lambda c, x: (c + x, c * x), init, xs)


def _dyn_while(x, n):
    return while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * 0.5 + 1), (torch.zeros((), dtype=torch.int64), x))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make", [
    (_dyn_cond, lambda s: (torch.randn(s),)),
    (_dyn_map, lambda s: (torch.randn(s, 3),)),
    (_dyn_scan, lambda s: (torch.randn(3), torch.randn(s, 3))),
    (_dyn_while, lambda s: (torch.randn(s), torch.tensor(3))),
], ids=["cond", "map", "scan", "while_loop"])
def test_symbolic_sizes_one_graph_for_every_size(fn, make, backend):
    # the symbols in a body's input sizes are inputs of the body too (as torch.compile passes
    # them): inductor's lowering of scan allocates its outputs from them
    cc = Counting(backend)
    cfn = kiln.compile(fn, backend=cc, fullgraph=True, dynamic=True)
    for size in (4, 6, 9):
        args = make(size)
        torch.testing.assert_close(cfn(*args), fn(*args))
    assert cc.frame_count == 1
    bodies = [m for gm in cc.graphs for name, m in gm.named_children()]
    assert any(isinstance(n.meta.get("example_value"), torch.SymInt)
               for b in bodies for n in b.graph.nodes if n.op == "placeholder")


def test_scan_training_torch_cannot_partition_runs_eagerly_with_a_warning(strict_kiln):
    # torch 2.13's scan autograd saves the new carry as a forward intermediate and then
    # refuses it as aliasing an output ("scan might be aliasing the input or the output!"):
    # torch.compile fails the same way.  Kiln's failure policy runs the graph eagerly.
    from kiln.backends.policy import BackendFallbackWarning
    strict_kiln.raise_on_backend_error = False
    args = (torch.randn(3, requires_grad=True), torch.randn(4, 3), torch.randn(3))
    with pytest.warns(BackendFallbackWarning, match="aliasing"):
        got = kiln.compile(cumulative, backend="aot_eager", fullgraph=True)(*args)
    expected = cumulative(*args)
    torch.testing.assert_close(got, expected)
    (g,) = torch.autograd.grad(got[1].sum(), args[0])
    (ge,) = torch.autograd.grad(expected[1].sum(), args[0])
    torch.testing.assert_close(g, ge)
