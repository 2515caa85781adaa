"""One soundness test per guard kind (issue #13): call a compiled function, change exactly
one fact its entry depended on, call again, and check the result is eager's (value,
dtype, requires_grad) and that the change was seen (a new entry was captured).

Each case is ``(run, change)``: ``run()`` calls the function under test given the state
and returns its result; ``change()`` changes one fact.  The same case is run once with
the plain function and once with the compiled one, from fresh state each time.
"""
from __future__ import annotations

import sys
import types

import pytest
import torch

import kiln
from kiln.testing import CompileCounter, Rules, assert_same

BACKENDS = ["eager", "aot_eager"]


def same(expected, got):
    """Same types and structure; tensors' dtype, shape, requires_grad and values (default tolerance)."""
    assert_same(expected, got, Rules(equal_nan=False))


# -- the functions under test and the fact each case changes ---------------------------------

class Scaled:
    scale = 2.0


class ScaledMore(Scaled):
    scale = 5.0


def by_type(x, obj):
    return x * obj.scale


def relu_act(t):
    return t.relu()


def tanh_act(t):
    return t.tanh()


ACT = relu_act


def by_identity(x):
    return ACT(x) + 1


def by_constant(x, n):
    for _ in range(n):
        x = x * 2
    return x


def by_metadata(x):
    return x.sum(0) * 2


def by_stride(x):
    return x * 2 if x.is_contiguous() else x + 2


def by_inference(x):
    return x * 2 if x.is_inference() else x + 2


OTHER = types.ModuleType("kiln_guard_kinds_other")
OTHER.FACTOR = 3.0
OTHER.MODE = "double"
sys.modules[OTHER.__name__] = OTHER


def by_other_module_global(x):
    return x * OTHER.FACTOR if OTHER.MODE == "double" else x - OTHER.FACTOR


class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.gain = 2.0
        self.shift = False

    def forward(self, x):
        y = torch.nn.functional.dropout(self.lin(x), 0.5, self.training) * self.gain
        return y - 1 if self.shift else y


class Bag:
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __bool__(self):
        return True


def by_dunder(x, bag):
    return x * len(bag) if bag else x


class State:
    """What the cases change, made fresh for each side of the comparison."""

    def __init__(self):
        self.x = torch.arange(6.0).reshape(2, 3)
        self.obj = Scaled()
        self.n = 2
        self.bag = Bag([1, 2])
        self.gate = Gate().eval()


def _set_global(name, value):
    globals()[name] = value


CASES = {
    "type": (lambda s, f: f(s.x, s.obj), lambda s: setattr(s, "obj", ScaledMore())),
    "identity (global function)": (lambda s, f: f(s.x), lambda s: _set_global("ACT", tanh_act)),
    "constant (int argument)": (lambda s, f: f(s.x, s.n), lambda s: setattr(s, "n", 3)),
    "dtype": (lambda s, f: f(s.x), lambda s: setattr(s, "x", s.x.double())),
    "shape": (lambda s, f: f(s.x), lambda s: setattr(s, "x", torch.arange(12.0).reshape(4, 3))),
    "stride": (lambda s, f: f(s.x), lambda s: setattr(s, "x", torch.arange(6.0).reshape(3, 2).t())),
    "requires_grad": (lambda s, f: f(s.x), lambda s: s.x.requires_grad_()),
    "is_inference": (lambda s, f: f(s.x), lambda s: setattr(s, "x", _inference(s.x))),
    "global of another module": (lambda s, f: f(s.x), lambda s: setattr(OTHER, "MODE", "shift")),
    "module attribute": (lambda s, f: f(s.x), lambda s: setattr(s.gate, "shift", True)),
    "module training flag": (lambda s, f: f(s.x), lambda s: s.gate.train()),
    "dunder replaced on the class": (lambda s, f: f(s.x, s.bag),
                                     lambda s: setattr(Bag, "__len__", lambda self: 7)),
}

# Python floats read from a module or a global are baked in until a capture sees them
# change (then they are 0-d tensor inputs: tests/capture/test_number_inputs.py):
# changing one is one more entry, with eager's result
BAKED_NUMBERS = {
    "float global of another module": (lambda s, f: f(s.x), lambda s: setattr(OTHER, "FACTOR", 7.0)),
    "float module attribute": (lambda s, f: f(s.x), lambda s: setattr(s.gate, "gain", 4.0)),
}
CASES.update(BAKED_NUMBERS)

FUNCTIONS = {
    "float global of another module": by_other_module_global,
    "type": by_type, "identity (global function)": by_identity, "constant (int argument)": by_constant,
    "dtype": by_metadata, "shape": by_metadata, "stride": by_stride, "requires_grad": by_metadata,
    "is_inference": by_inference, "global of another module": by_other_module_global,
    "dunder replaced on the class": by_dunder,
}


def _inference(x):
    with torch.inference_mode():
        return x.clone()


def _restore():
    _set_global("ACT", relu_act)
    OTHER.FACTOR, OTHER.MODE = 3.0, "double"
    Bag.__len__ = lambda self: len(self.items)


def _run_case(name, fn_for, counter):
    run, change = CASES[name]
    _restore()
    torch.manual_seed(1)
    state = State()
    fn = fn_for(state)
    torch.manual_seed(0)
    first = run(state, fn)
    change(state)
    torch.manual_seed(0)
    second = run(state, fn)
    _restore()
    return first, second


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_changing_one_fact_gives_eager_result(name, backend):
    counter = CompileCounter()
    module_case = "module" in name and "another module" not in name
    dynamic = False if name in ("shape", "constant (int argument)") else None

    def plain(state):
        return state.gate if module_case else FUNCTIONS[name]

    def compiled(state):
        target = state.gate if module_case else FUNCTIONS[name]
        return kiln.compile(target, backend=counter if backend == "eager" else backend, dynamic=dynamic)

    expected = _run_case(name, plain, counter)
    kiln.reset()
    got = _run_case(name, compiled, counter)
    same(expected[0], got[0])
    same(expected[1], got[1])
    entries = 2
    assert kiln.metrics.frames_captured == entries, f"changing the {name}: {kiln.metrics.frames_captured} entries"
    if backend == "eager":
        assert counter.frame_count == entries
