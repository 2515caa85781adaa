"""Repeated layers traced once (capture/hops/layers.py): the layers of a ModuleList or
Sequential of one class become calls of one body, equal to the inlined graph forward and
backward, with a new body (or inlining) wherever a layer differs in what the body read."""
from __future__ import annotations

import time

import pytest
import torch

import kiln
from kiln.backends import call_body
from kiln.config import config

from .harness import Counting, check

BACKENDS = ["eager", "aot_eager"]


@pytest.fixture(autouse=True)
def bodies_on(strict_kiln):
    """Layer bodies are opt-in (kiln.config.reuse_layer_bodies); these tests turn them on
    (the HOP conftest restores the config after each test)."""
    config.reuse_layer_bodies = True


class Block(torch.nn.Module):
    def __init__(self, width=6, scale=1.0):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)
        self.scale = scale          # read by forward: layers that differ here get their own body
        self.layer_idx = 0          # never read: layers that differ only here share one

    def forward(self, x, mask=None):
        y = torch.relu(self.lin(self.norm(x))) * self.scale
        if mask is not None:
            y = y + mask
        return (x + y,)


class Stack(torch.nn.Module):
    def __init__(self, n=4, scales=None, sequential=False):
        super().__init__()
        blocks = [Block(scale=(scales[i] if scales else 1.0)) for i in range(n)]
        for i, b in enumerate(blocks):
            b.layer_idx = i
        self.layers = torch.nn.Sequential(*blocks) if sequential else torch.nn.ModuleList(blocks)

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask=mask)[0]
        return x


def run(model, x, mask):
    return model(x, mask)


def stack_of(**kw):
    torch.manual_seed(0)
    return Stack(**kw)


def bodies(cc) -> tuple[int, int]:
    """(distinct bodies, calls of bodies) over every graph the counter saw."""
    calls = [n for gm in cc.graphs for n in gm.graph.nodes if n.op == "call_function" and n.target is call_body]
    return len({(id(gm), n.args[0].target) for gm in cc.graphs for n in gm.graph.nodes
                if n.op == "call_function" and n.target is call_body}), len(calls)


def with_model(model, count=2):
    gen = torch.Generator().manual_seed(1)
    return [(model, torch.randn(3, 6, generator=gen, requires_grad=True), torch.randn(3, 6, generator=gen))
            for _ in range(count)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_body_for_identical_layers_forward_and_backward(backend):
    cc = check(run, with_model(stack_of()), backend=backend, grad=True)
    assert bodies(cc) == (1, 4)
    # 4 calls and their getitems, no per-layer ops in the frame's graph
    assert cc.op_count == 8


def test_sequential_layers_share_a_body():
    cc = check(run, with_model(stack_of(sequential=True)), grad=True)
    assert bodies(cc) == (1, 4)


def test_switched_off_every_layer_is_inlined():
    config.reuse_layer_bodies = False
    cc = check(run, with_model(stack_of()), grad=True)
    assert bodies(cc) == (0, 0)
    assert cc.op_count == 4 * 6    # layer_norm, linear, relu, mul, add, add


def test_layers_differing_in_a_read_attribute_are_not_confused():
    model = stack_of(scales=[1.0, 1.0, 2.0, 1.0])
    cc = check(run, with_model(model), grad=True)
    # layer 2 reads another scale: a body of its own; the others share the first
    assert bodies(cc) == (2, 4)
    body_graphs = {n.args[0].target: getattr(cc.graphs[0], n.args[0].target) for n in cc.graphs[0].graph.nodes
                   if n.target is call_body}
    assert len(body_graphs) == 2


def test_a_changed_read_attribute_recompiles():
    model = stack_of()
    cc = Counting("eager")
    f = kiln.compile(run, backend=cc, fullgraph=True)
    x, mask = torch.randn(3, 6), torch.randn(3, 6)
    torch.testing.assert_close(f(model, x, mask), run(model, x, mask))
    model.layers[3].scale = 3.0         # a layer that was not traced: its guard is the body's, re-rooted
    torch.testing.assert_close(f(model, x, mask), run(model, x, mask))
    assert cc.frame_count == 2
    model.layers[2].layer_idx = 7       # never read: no recompile
    torch.testing.assert_close(f(model, x, mask), run(model, x, mask))
    assert cc.frame_count == 2


def test_a_hook_on_one_layer_gives_that_layer_its_own_trace():
    model = stack_of()
    model.layers[1].register_forward_hook(lambda mod, args, out: (out[0] * 2,))
    cc = check(run, with_model(model), grad=True)
    distinct, calls = bodies(cc)
    # the hooked layer fails the body's "no hooks" check: traced again (with its hook)
    assert distinct == 2 and calls == 4


def test_a_body_writing_outer_state_is_inlined():
    class CountingCalls(Block):
        def forward(self, x, mask=None):
            self.calls = getattr(self, "calls", 0) + 1
            return super().forward(x, mask)

    torch.manual_seed(0)
    model = Stack()
    model.layers = torch.nn.ModuleList([CountingCalls() for _ in range(3)])
    cc = Counting("eager")
    f = kiln.compile(run, backend=cc)
    x, mask = torch.randn(3, 6), torch.randn(3, 6)
    torch.testing.assert_close(f(model, x, mask), run(model, x, mask))
    assert bodies(cc) == (0, 0)
    assert [m.calls for m in model.layers] == [2, 2, 2]


def test_a_graph_break_inside_a_layer_inlines_it():
    class Breaking(Block):
        def forward(self, x, mask=None):
            kiln.graph_break()
            return super().forward(x, mask)

    torch.manual_seed(0)
    model = Stack()
    model.layers = torch.nn.ModuleList([Breaking() for _ in range(3)])
    cc = Counting("eager")
    f = kiln.compile(run, backend=cc)
    for _ in range(2):
        x, mask = torch.randn(3, 6), torch.randn(3, 6)
        torch.testing.assert_close(f(model, x, mask), run(model, x, mask))
    assert bodies(cc) == (0, 0)


def test_tied_parameters_keep_their_aliasing():
    model = stack_of()
    model.layers[2].lin.weight = model.layers[1].lin.weight     # one tensor in two layers
    cc = check(run, with_model(model), grad=True)
    assert bodies(cc)[1] == 4


def test_parameters_of_another_shape_get_another_body():
    model = stack_of()
    model.layers[3].norm = torch.nn.LayerNorm(6, elementwise_affine=False)
    cc = check(run, with_model(model), grad=True)
    assert bodies(cc) == (2, 4)


@pytest.mark.slow
def test_inductor_compiles_the_body_once():
    start = time.perf_counter()
    cc = check(run, with_model(stack_of(n=6)), backend="inductor", grad=True, atol=1e-4)
    assert bodies(cc) == (1, 6)
    assert time.perf_counter() - start < 120


# -- torch.compiler.nested_compile_region ------------------------------------------------

@torch.compiler.nested_compile_region
def region(x, w):
    return torch.relu(x @ w) + 1


def chain(x, ws):
    for w in ws:
        x = region(x, w)
    return x


class MarkedLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)

    @torch.compiler.nested_compile_region
    def forward(self, x):
        return self.lin(x).tanh()


class TwoMarked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = MarkedLayer(), MarkedLayer()

    def forward(self, x, mask):
        return self.second(self.first(x)) + mask


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_marked_function_is_one_body(backend):
    gen = torch.Generator().manual_seed(2)
    cases = [(torch.randn(3, 4, generator=gen, requires_grad=True),
              [torch.randn(4, 4, generator=gen, requires_grad=True) for _ in range(3)]) for _ in range(2)]
    cc = Counting(backend)
    f = kiln.compile(chain, backend=cc, fullgraph=True)
    for x, ws in cases:
        torch.testing.assert_close(f(x, ws), chain(x, ws))
        got = torch.autograd.grad(f(x, ws).sum(), [x, *ws])
        expected = torch.autograd.grad(chain(x, ws).sum(), [x, *ws])
        torch.testing.assert_close(got, expected)
    assert cc.frame_count == 1 and bodies(cc) == (1, 3)


def test_a_marked_module_method_is_one_body_for_modules_outside_containers():
    torch.manual_seed(0)
    cc = check(run, with_model(TwoMarked()), grad=True)
    assert bodies(cc) == (1, 2)


SCALE = 1.0


@torch.compiler.nested_compile_region
def scaled(y):
    return y * SCALE


def rescaling(x):
    global SCALE
    a = scaled(x)
    SCALE = 3.0          # the frame writes what the region reads: the second call is traced again
    b = scaled(a)
    SCALE = 1.0
    return b


def test_a_region_reading_state_the_frame_changes_is_traced_again():
    cc = Counting("eager")
    f = kiln.compile(rescaling, backend=cc)
    x = torch.randn(3)
    torch.testing.assert_close(f(x), x * 3.0)
    assert bodies(cc) == (2, 2)


def test_marked_functions_are_inlined_with_reuse_off():
    config.reuse_layer_bodies = False
    gen = torch.Generator().manual_seed(3)
    x, ws = torch.randn(3, 4, generator=gen), [torch.randn(4, 4, generator=gen) for _ in range(3)]
    cc = Counting("eager")
    f = kiln.compile(chain, backend=cc, fullgraph=True)
    torch.testing.assert_close(f(x, ws), chain(x, ws))
    assert bodies(cc) == (0, 0) and cc.op_count == 9


def test_body_calls_inlined_for_graph_passes_that_cut_by_nodes():
    """The DDP bucket splitter cuts graphs by nodes: body calls are inlined first, and the
    inlined graph computes what the graph with body calls computes."""
    from kiln.backends import has_body_calls, inline_body_calls
    seen = []

    def inlining_backend(gm, example_inputs):
        flat = inline_body_calls(gm)
        seen.append((has_body_calls(gm), has_body_calls(flat)))
        return flat.forward

    model = stack_of()
    compiled = kiln.compile(model, backend=inlining_backend)
    for seed in (1, 2):
        torch.manual_seed(seed)
        x, mask = torch.randn(3, 6), torch.randn(3, 6)
        assert torch.allclose(compiled(x, mask), model(x, mask), rtol=0, atol=1e-6)
    assert seen == [(True, False)]
