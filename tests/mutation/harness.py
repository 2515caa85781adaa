"""Harness for mutation / aliasing scenarios: compiled must leave the world as eager does.

``check(fn, make_inputs)`` runs ``fn`` eagerly and compiled (each on its own fresh
inputs from ``make_inputs()``, built under the same seed) for every seed, and asserts
that afterwards

* the results and the inputs are equal, structurally (``kiln.comparison`` with ``RULES``):
  tensors bit for bit, with dtype, shape, ``requires_grad``; containers by contents;
  modules and user objects by their state and attributes;
* aliasing is the same: which tensor leaves of (inputs, result) share storage, which are
  views, and which are the very tensor objects passed in (or the same object as another);
* the outside state named by ``snapshot()`` (globals, counters, logs) is equal
  (``reset()`` puts it back before each run);
* printed output, grad mode and the torch RNG state (a draw after the call) are equal;
* the number of graphs is ``graphs`` (if given), counted by a backend wrapper that
  delegates to the named backend.
"""
from __future__ import annotations

import contextlib
import io

import torch

import kiln
from kiln import comparison
from kiln.backends import contract
from kiln.backends.registry import lookup
from kiln.comparison import Rules


class CountingBackend:
    """Counts graphs and delegates to a named backend."""

    def __init__(self, name: str = "eager"):
        self.name = name
        self.frame_count = 0
        self.graphs: list = []

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        self.graphs.append(gm)
        if self.name == "eager":
            return gm.forward
        return lookup(self.name)(gm, example_inputs)

    # it declares what the backend it hands graphs to declares (kiln/backends/contract.py)
    @property
    def runs_graph_as_is(self) -> bool:
        return self.name == "eager" or contract.runs_graph_as_is(lookup(self.name))

    @property
    def applies_input_mutations_last(self) -> bool:
        return contract.applies_input_mutations_last(lookup(self.name))


#: bit-for-bit: tensors with torch.equal (NaN is a difference), floats exactly; closures and
#: lambdas each run builds for itself are the same when they have the same code
RULES = Rules(exact=True, equal_nan=False, callables_by_name=True)


def assert_same(expected, actual, what="value"):
    comparison.assert_same(expected, actual, RULES, what)


def _tensor_objects(inputs):
    return [t for _, t in comparison.tensor_leaves(inputs, "inputs")]


def _run(fn, inputs, reset, snapshot):
    if reset is not None:
        reset()
    grad = torch.is_grad_enabled()
    buf = io.StringIO()
    torch.manual_seed(1234)
    try:
        with contextlib.redirect_stdout(buf):
            result = fn(*inputs)
        after = (torch.is_grad_enabled(), torch.rand(2))
    finally:
        torch.set_grad_enabled(grad)
    return result, buf.getvalue(), after, snapshot() if snapshot is not None else None


def check(fn, make_inputs, *, backend="eager", graphs=None, reset=None, snapshot=None, seeds=(0, 1),
          aliasing=True, post=None):
    """Compare eager and compiled ``fn``; returns the CountingBackend.

    ``post(result, inputs)`` runs after each call (e.g. an in-place op on an output or a
    backward) and its effects are compared too.
    """
    counter = CountingBackend(backend)
    compiled = kiln.compile(fn, backend=counter)
    for seed in seeds:
        torch.manual_seed(seed)
        eager_in = list(make_inputs())
        torch.manual_seed(seed)
        comp_in = list(make_inputs())
        e_before, c_before = _tensor_objects(eager_in), _tensor_objects(comp_in)
        e_res, e_out, e_after, e_snap = _run(fn, eager_in, reset, snapshot)
        c_res, c_out, c_after, c_snap = _run(compiled, comp_in, reset, snapshot)
        found = comparison.roots_aliasing_differences(("inputs", "result"), (eager_in, e_res), (comp_in, c_res),
                                                      e_before, c_before, storage=aliasing, views=aliasing)
        assert not found, f"seed {seed}: aliasing differs\n" + "\n".join(found)
        if post is not None:
            torch.manual_seed(99)
            post(e_res, eager_in)
            e_draw = torch.rand(2)
            torch.manual_seed(99)
            post(c_res, comp_in)
            assert torch.equal(e_draw, torch.rand(2)), "post() (e.g. backward) drew from the RNG differently"
        assert_same(e_res, c_res, "result")
        assert_same(eager_in, comp_in, "inputs")
        assert_same(e_snap, c_snap, "state")
        assert e_out == c_out, f"printed output differs:\n{e_out}\n---\n{c_out}"
        assert e_after[0] == c_after[0], "grad mode after the call differs"
        assert torch.equal(e_after[1], c_after[1]), "the RNG stream after the call differs"
    if graphs is not None:
        assert counter.frame_count == graphs, f"{counter.frame_count} graphs, expected {graphs}"
    return counter


def randn(*shape, requires_grad=False):
    return torch.randn(*shape).requires_grad_(requires_grad)
