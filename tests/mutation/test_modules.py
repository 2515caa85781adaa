"""nn.Module state changed inside the frame: submodule lists, buffers and parameters
registered in forward, train/eval switches, requires_grad_ on parameters."""
import collections

import pytest
import torch

import kiln

from .harness import check, randn

pytestmark = pytest.mark.filterwarnings("ignore")


def _names(m):
    return sorted(n for n, _ in m.named_parameters()), sorted(n for n, _ in m.named_buffers()), \
        sorted(n for n, _ in m.named_modules())


def test_module_list_append_in_forward():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2)])

        def forward(self, x):
            self.layers.append(torch.nn.Identity())
            return self.layers[0](x)
    check(lambda m, x: (m(x), _names(m)), lambda: (M(), randn(2)))


def test_register_buffer_in_forward():
    class M(torch.nn.Module):
        def forward(self, x):
            self.register_buffer("made", x * 2)
            return x + 1
    check(lambda m, x: (m(x), m.made, _names(m)), lambda: (M(), randn(2)))


def test_new_parameter_in_forward():
    class M(torch.nn.Module):
        def forward(self, x):
            self.newp = torch.nn.Parameter(torch.ones(2))
            return x + 1
    check(lambda m, x: (m(x), _names(m)), lambda: (M(), randn(2)))


def test_train_eval_switch_inside_frame():
    def f(m, x):
        m.train(False)
        y = m(x)
        return y, m.training
    check(f, lambda: (torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)), randn(4)))


def test_requires_grad_off_inside_frame():
    def f(m, x):
        m.requires_grad_(False)
        return m(x), m.weight.requires_grad
    check(f, lambda: (torch.nn.Linear(2, 2), randn(2)))


def test_ordered_dict_move_to_end():
    def f(d, x):
        d.move_to_end("a")
        return x + 1, list(d)
    check(f, lambda: (collections.OrderedDict(a=1, b=2), randn(2)))


def test_defaultdict_missing_key_inserts():
    def f(d, x):
        d["new"].append(x)
        return x
    check(f, lambda: (collections.defaultdict(list), randn(2)))


def test_submodule_attribute_counter():
    class Inner(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hits = 0
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, x):
            self.hits += 1
            return self.lin(x)
    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Inner()
            self.b = Inner()

        def forward(self, x):
            return self.b(self.a(x)) + self.a(x)
    check(lambda m, x: (m(x), m.a.hits, m.b.hits), lambda: (Outer(), randn(2)), graphs=1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "aten"])
def test_buffer_rebound_and_counter_under_backends(backend):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("steps", torch.tensor(0))
            self.register_buffer("ema", torch.zeros(3))
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            self.steps = self.steps + 1
            self.ema = 0.9 * self.ema + 0.1 * x.detach().mean(0)
            return self.lin(x).relu()
    def f(m, x):
        out = m(x)
        return out, dict(m.named_buffers())
    check(f, lambda: (M(), randn(2, 3, requires_grad=True)), backend=backend,
          post=lambda r, i: r[0].sum().backward())
