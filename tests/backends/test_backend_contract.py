"""The backend contract (``kiln/backends/contract.py``): a backend that declares nothing gets
the rules that are safe whatever it does with a graph.

A user's backend is usually a small function around another one: a counter in front of
``aot_eager``, a call of AOTAutograd with the user's own graph compilers, or a plain
``lambda gm, ex: gm.forward``.  None of them declares anything; each must give eager's
results (values, ``requires_grad``, leaves and their ``.grad``) on every call, with graph
counts that follow from the rules it gets.  Each test compares compiled against eager on
two inputs and counts the graphs the backend saw.
"""
from __future__ import annotations

import functools
from unittest import mock

import pytest
import torch

import kiln
from kiln.backends import contract, lookup
from kiln.testing import CompileCounter, assert_same_as_eager


class Counted:
    """A user's backend: counts the graphs it is given, then does what ``inner`` does.
    Declares nothing about itself."""

    def __init__(self, inner):
        self.inner, self.frame_count = inner, 0

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        return self.inner(gm, example_inputs)


def _aot_eager(gm, example_inputs):
    return lookup("aot_eager")(gm, example_inputs)


def _aot_autograd_style(gm, example_inputs):
    """The usual hand-made AOT backend: AOTAutograd with the user's own graph compilers."""
    from torch._functorch.aot_autograd import aot_module_simplified  # imported on use: slow import

    def run(g, _inputs):
        return g.forward
    return aot_module_simplified(gm, example_inputs, fw_compiler=run, bw_compiler=run)


def _as_is(gm, example_inputs):
    return gm.forward


USER_BACKENDS = {"aot_eager_wrapper": _aot_eager, "aot_autograd_style": _aot_autograd_style,
                 "gm_forward": _as_is, "gm_itself": lambda gm, ex: gm}


# -- what each backend declares -------------------------------------------------------

def test_builtin_backends_declare_what_they_do():
    assert contract.runs_graph_as_is(lookup("eager"))
    assert not contract.applies_input_mutations_last(lookup("eager"))
    for name in ("aot_eager", "aten"):
        assert not contract.runs_graph_as_is(lookup(name)), name
        assert contract.applies_input_mutations_last(lookup(name)), name


def test_undeclared_backends_get_the_safe_answers():
    for backend in [*USER_BACKENDS.values(), Counted(_as_is), mock.Mock()]:
        assert not contract.runs_graph_as_is(backend)
        assert not contract.applies_input_mutations_last(backend)
        assert not contract.caches_compiled_graphs(backend)


def test_a_declaration_copied_by_functools_wraps_is_not_the_wrappers_own():
    eager, aot = lookup("eager"), lookup("aot_eager")

    @functools.wraps(eager)
    def transforms(gm, example_inputs):
        return _aot_eager(gm, example_inputs)

    @functools.wraps(aot)
    def counts(gm, example_inputs):
        return aot(gm, example_inputs)
    assert transforms.runs_graph_as_is is True          # copied into the wrapper's __dict__
    assert not contract.runs_graph_as_is(transforms)
    assert not contract.applies_input_mutations_last(counts)
    del counts.__wrapped__                                # the wrapper's own, by choice
    assert contract.applies_input_mutations_last(counts)


def test_compile_counter_declares_as_is_only_while_it_returns_the_graph():
    class InFront(CompileCounter):
        def __call__(self, gm, example_inputs):
            super().__call__(gm, example_inputs)
            return _aot_eager(gm, example_inputs)

    assert contract.runs_graph_as_is(CompileCounter())
    assert not contract.runs_graph_as_is(InFront())
    declared = InFront()
    declared.runs_graph_as_is = True
    assert contract.runs_graph_as_is(declared)


def test_returned_as_is_recognises_the_graphs_own_forward():
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    own = gm.forward
    assert contract.returned_as_is(gm.forward, own)
    assert contract.returned_as_is(gm, own)
    assert not contract.returned_as_is(lambda x: x + 1, own)
    for node in gm.graph.nodes:           # a backend that rewrites the graph in place
        if node.op == "call_function":
            node.target = torch.sub
    gm.recompile()
    assert not contract.returned_as_is(gm.forward, own)
    assert not contract.returned_as_is(gm, own)


# -- what the rules make of it ----------------------------------------------------------

def _frame_leaf(x):
    w = torch.zeros((), requires_grad=True)
    y = x.detach() * 2
    return y * w + x.sin(), w


def _leaf_grad(x, mod):
    leaf = torch.ones(4, requires_grad=True)
    (leaf * (mod(x) + mod(x))).sum().backward()
    return leaf.grad, mod.weight.grad, x.cos()


def _some_outputs_backward(x, y):
    t1 = x * 2 + y
    root = y.sum()
    root.backward()
    return t1, y.grad, x.grad




def _inputs(prog, call):
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(call))
    if prog is _frame_leaf:
        return (x,)
    if prog is _leaf_grad:
        torch.manual_seed(0)
        return x, torch.nn.Linear(4, 4)
    return x.requires_grad_(), torch.randn(3, 4, generator=torch.Generator().manual_seed(9)).requires_grad_()


# graphs the backend sees.  Backends that may functionalize (aot_eager and every undeclared
# one) make each requires_grad=True factory at a break and run the graph before
# `root.backward()` op by op (t1 needs a gradient no root gives it): it is not handed over.
# A backend declared to run graphs as they are (eager) gets the factory in its graph.
GRAPHS = {"_frame_leaf": {"as_is": 1, "safe": 1}, "_leaf_grad": {"as_is": 2, "safe": 2},
          "_some_outputs_backward": {"as_is": 1, "safe": 0}}


def _check(prog, backend, expected):
    kiln.reset()
    compiled = kiln.compile(prog, backend=backend)
    for call in range(2):
        assert_same_as_eager(prog(*_inputs(prog, call)), compiled(*_inputs(prog, call)))
    assert backend.frame_count == expected


PROGS = [_frame_leaf, _leaf_grad, _some_outputs_backward]


@pytest.mark.parametrize("prog", PROGS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("user", list(USER_BACKENDS))
def test_undeclared_user_backend_matches_eager(user, prog):
    _check(prog, Counted(USER_BACKENDS[user]), GRAPHS[prog.__name__]["safe"])


@pytest.mark.parametrize("prog", PROGS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("name", ["eager", "aot_eager"])
def test_builtin_backends_keep_their_counts(name, prog):
    """The same programs under the built-ins, counted by a counter that declares what the
    built-in declares: ``eager`` runs graphs as they are, ``aot_eager`` gets the safe rules,
    the counts an undeclared wrapper around it gets too."""
    counter = Counted(lookup(name))
    counter.runs_graph_as_is = name == "eager"
    counter.applies_input_mutations_last = name == "aot_eager"
    _check(prog, counter, GRAPHS[prog.__name__]["as_is" if name == "eager" else "safe"])


def test_compile_counter_counts_as_before():
    """CompileCounter declares it runs graphs as they are: the frame's leaf stays in its graph."""
    cc = CompileCounter()
    kiln.reset()
    compiled = kiln.compile(_frame_leaf, backend=cc, fullgraph=True)
    for call in range(2):
        assert_same_as_eager(_frame_leaf(*_inputs(_frame_leaf, call)), compiled(*_inputs(_frame_leaf, call)))
    assert cc.frame_count == 1


def test_kilns_own_recorders_declare_what_their_backend_declares():
    """kiln.explain, the minifier's recorder and the bench's see the graphs of a real run."""
    from kiln.bench.overhead import GraphRecorder
    from kiln.debug.explain import _Recorder
    from kiln.debug.record import RecordingBackend

    for wrap in (RecordingBackend, _Recorder, GraphRecorder):
        assert contract.runs_graph_as_is(wrap(lookup("eager"))), wrap
        assert not contract.runs_graph_as_is(wrap(lookup("aot_eager"))), wrap
        assert contract.applies_input_mutations_last(wrap(lookup("aot_eager"))), wrap
        assert not contract.runs_graph_as_is(wrap(_as_is)), wrap          # undeclared stays so
        assert not contract.applies_input_mutations_last(wrap(_aot_eager)), wrap
    assert contract.runs_graph_as_is(GraphRecorder())                     # it returns gm.forward
    assert not contract.runs_graph_as_is(RecordingBackend(lookup("eager"), choose=lambda i, gm: _aot_eager))
