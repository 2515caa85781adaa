"""kiln.debug.bisect on planted backend bugs: the right graph among several separated by
graph breaks, and the right node in it."""
import pytest
import torch

import kiln
from kiln.debug import bisect
from kiln.debug.bisect import _first_failing_stage, _Prober
from kiln.debug.record import ArgTemplate
from tests.debug import planted_backends as planted

pytestmark = pytest.mark.filterwarnings("ignore")


def five_graphs(x, w):
    x = torch.tanh(x @ w) + 1           # graph 1 (graph_index 0)
    kiln.graph_break()
    x = torch.sigmoid(x) * x            # graph 2
    kiln.graph_break()
    x = x.relu() + x.sin()              # graph 3: the first cos
    y = x.cos() * 2
    x = (y - x).exp()
    kiln.graph_break()
    x = x.sum(0) + torch.cos(x).mean()  # graph 4: cos again
    kiln.graph_break()
    return x * 3                        # graph 5


def args():
    torch.manual_seed(0)
    return torch.randn(4, 4), torch.randn(4, 4)


def test_bisect_finds_graph_and_op():
    result = bisect(five_graphs, args(), backend=planted.cos_miscompiled)
    assert result.graphs == 5
    assert result.graph_index == 2
    assert result.op == "cos"
    assert result.graph_alone and result.node_alone
    assert "graph 3 of 5" in result.summary and "cos" in result.summary


def test_bisect_crash_without_accuracy():
    def f(x, w):
        x = torch.tanh(x @ w)
        kiln.graph_break()
        x = x * 2
        kiln.graph_break()
        x = x.exp() + 1
        kiln.graph_break()
        return torch.sigmoid(x).sum() + x.mean()

    result = bisect(f, args(), backend=planted.crashes_on_sigmoid, accuracy=False)
    assert result.graphs == 4
    assert result.graph_index == 3
    assert result.op == "sigmoid"


def test_bisect_gradient_only_bug():
    def f(x, w):
        x = torch.tanh(x @ w)
        kiln.graph_break()
        x = x * 2 + 1
        kiln.graph_break()
        x = torch.nn.functional.gelu(x)
        kiln.graph_break()
        return x.sum(-1)

    x, w = args()
    w.requires_grad_(True)
    assert bisect(f, (x, w), backend=planted.gelu_backward_miscompiled).graph_index is None
    result = bisect(f, (x, w), backend=planted.gelu_backward_miscompiled, training=True)
    assert result.graph_index == 2 and result.op == "gelu"


def test_bisect_nothing_fails():
    result = bisect(five_graphs, args(), backend="aot_eager")
    assert result.graph_index is None and result.summary.startswith("nothing fails")


def test_first_failing_stage():
    prober = _Prober(five_graphs, ArgTemplate(args(), {}), planted.cos_miscompiled, accuracy=True, training=False,
                     progress=lambda msg: None)
    stages, first = _first_failing_stage(prober, [("aot_eager", kiln.backends.lookup("aot_eager")),
                                                  ("planted", planted.cos_miscompiled),
                                                  ("never reached", planted.crashes_on_sigmoid)])
    assert first == "planted"
    assert stages == [("aot_eager", False), ("planted", True)]


@pytest.mark.slow
def test_bisect_inductor_stages_nothing_fails():
    def f(x, w):
        x = torch.tanh(x @ w) + 1
        kiln.graph_break()
        return torch.nn.functional.gelu(x).sum()

    result = bisect(f, args(), backend="inductor")
    assert result.graph_index is None
    assert [name for name, _ in result.stages] == ["aot_eager", "aot_eager + inductor decompositions", "inductor"]
    assert not any(failing for _, failing in result.stages)


def test_bisect_second_seed_output_aliasing():
    from tests.debug.test_minify import SeedModel
    torch.manual_seed(1)
    result = bisect(SeedModel(), (torch.randn(1024, 16),), backend=planted.returns_copies, training=True)
    assert result.graphs == 3 and result.graph_index == 1
    assert result.op == "view"      # Kiln drops the no-op contiguous(): the view is what is returned
