"""What the C accelerator's guard plans skip or cache, changed exactly (issue #26).

The plans read attributes through a cache keyed by the object's type and its version tag
(``runtime/_guard_plan.c``: a data descriptor called directly, else the instance dict,
then the class), hand the tensors they checked to the glue, and run the generated
Python guard where the call's arguments do not bind the simple way.  Each test changes
one fact such a shortcut could miss, then checks the compiled result is eager's and the
change was seen.  The conftest runs every test under both guard paths (C and Python).
"""
from __future__ import annotations

import pytest
import torch

import kiln
from kiln.runtime import guard_plan
from kiln.testing import CompileCounter, Rules, assert_same


def same(expected, got):
    assert_same(expected, got, Rules(equal_nan=False))


class Net(torch.nn.Module):
    factor = 2.0          # a class attribute read through the instance

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.register_buffer("offset", torch.ones(3))

    def forward(self, x):
        y = self.lin(x) * self.factor + self.offset
        return y * 2 if self.training else y - 1


def _pair():
    torch.manual_seed(0)
    eager = Net().eval()
    torch.manual_seed(0)
    other = Net().eval()
    return eager, other


def _replace_weight(m):
    with torch.no_grad():
        m.lin.weight = torch.nn.Parameter(torch.full((3, 3), 0.5))


def _data_same_shape(m):
    m.lin.weight.data = torch.full((3, 3), -1.0)


def _data_new_shape(m):
    m.lin = torch.nn.Linear(3, 3)
    torch.manual_seed(3)
    m.lin.weight.data = torch.randn(3, 3).t()      # same shape, other strides


def _requires_grad(m):
    m.offset.requires_grad_()


def _add_hook(m):
    m.lin.register_forward_hook(lambda mod, args, out: out * 10)


def _global_hook(m):
    return torch.nn.modules.module.register_module_forward_hook(lambda mod, args, out: out + 100)


def _train(m):
    m.train()


def _class_attr(m):
    type(m).factor = 3.0


def _instance_shadows_class(m):
    m.factor = 5.0


def _class_property(m):
    type(m).factor = property(lambda self: 7.0)


def _submodule(m):
    m.lin = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())


def _buffer_replaced(m):
    m.offset = torch.zeros(3, dtype=torch.float64)


CHANGES = {
    "parameter replaced": _replace_weight, ".data = (same shape)": _data_same_shape,
    ".data = (other strides)": _data_new_shape, "requires_grad_ on a buffer": _requires_grad,
    "forward hook added": _add_hook, "global forward hook added": _global_hook, "train()": _train,
    "class attribute changed": _class_attr, "instance attribute shadows the class's": _instance_shadows_class,
    "class attribute becomes a property": _class_property, "submodule replaced": _submodule,
    "buffer replaced (other dtype)": _buffer_replaced,
}


@pytest.fixture(autouse=True)
def _restore_net():
    yield
    Net.factor = 2.0
    for h in list(torch.nn.modules.module._global_forward_hooks):
        torch.nn.modules.module._global_forward_hooks.pop(h)


@pytest.mark.parametrize("name", list(CHANGES))
def test_change_is_seen(name):
    change = CHANGES[name]
    counter = CompileCounter()
    eager, base = _pair()
    compiled = kiln.compile(base, backend=counter)
    xs = [torch.randn(2, 3, generator=torch.Generator().manual_seed(i)) for i in range(2)]
    for x in xs:
        same(eager(x), compiled(x))
    assert counter.frame_count == 1
    torch.manual_seed(5)
    change(eager)
    torch.manual_seed(5)
    change(base)
    for x in xs:
        same(eager(x), compiled(x))
    assert counter.frame_count >= 1
    assert kiln.metrics.frames_captured >= 1


SCALE = 2.0


def scaled(x, n=2, *, shift=1.0):
    return x * SCALE * n + shift


def test_global_and_argument_binding():
    """A global changing; defaults, keywords and a keyword-only argument bound by the plan
    as Python binds them (a call it cannot bind is the Python guard's)."""
    global SCALE
    counter = CompileCounter()
    f = kiln.compile(scaled, backend=counter)
    x = torch.randn(3)
    calls = [((x,), {}), ((x, 2), {}), ((x,), {"n": 2}), ((x,), {"shift": 1.0}), ((), {"x": x, "n": 2})]
    for args, kwargs in calls:
        same(scaled(*args, **kwargs), f(*args, **kwargs))
    assert counter.frame_count == 1
    SCALE = 3.0
    try:
        for args, kwargs in calls:
            same(scaled(*args, **kwargs), f(*args, **kwargs))
        assert counter.frame_count == 2
    finally:
        SCALE = 2.0
    with pytest.raises(TypeError):
        f(x, 2, n=3)
    with pytest.raises(TypeError):
        f(x, nope=1)


def test_plan_and_python_guard_decide_alike(guard_path):
    """The entry's guard is a Plan on the C path; it and the Python guard it was made from
    return the same thing for a passing and for each failing call."""
    counter = CompileCounter()
    f = kiln.compile(scaled, backend=counter)
    x = torch.randn(3)
    f(x)
    entry = f.entries[0]
    guard, python = entry.guard, guard_plan.python_guard_of(entry.guard)
    assert (guard is not python) == (guard_path == "C")
    shadowed = torch.randn(3)
    shadowed.stride = lambda: (5,)      # what x.stride() means for this one tensor
    parameter = torch.nn.Parameter(torch.randn(3))

    class Sub(torch.Tensor):
        pass

    cases = [(x,), (x.double(),), (torch.randn(6)[::2],), (torch.randn(4),), (x, 3), (x.requires_grad_(False),),
             ("a",), (shadowed,), (parameter,), (x.as_subclass(Sub),), (torch.randn(1, 3)[0],)]
    for args in cases:
        a, b = guard(scaled, *args), python(scaled, *args)
        assert type(a) is type(b)
        if isinstance(a, tuple):
            assert len(a) == len(b) and all(p is q for p, q in zip(a, b))
        else:
            assert a == b
