"""The two AOT divergences another differential fuzzer reported (issue #24), reconstructed.

(a) a ``.grad`` that eager sets is missing after ``(leaf * (mod(x) + mod(x))).sum().backward()``
run inside the frame (which also calls ``x.numpy()``, loops over the rows of ``x``, reseeds and
applies dropout); (b) an output that requires grad in eager comes back with
``requires_grad=False``.

Both reproduced only under a backend that *wraps* AOTAutograd without declaring it (a user's
``def backend(gm, inputs): count(); return aot_eager(gm, inputs)``, the usual way to count
graphs), never under ``backend="aot_eager"``.  Cause (class AOT_UNDECLARED_FUNCTIONAL_BACKEND):
Kiln took a backend that declares nothing for one that runs graphs as they are, so a
``requires_grad=True`` factory (``torch.ones(4, requires_grad=True)``) was put in the graph
instead of made at a break (``values.tensor.makes_autograd_leaf``), and AOTAutograd turned it
into a constant: the leaf handed back was a non-leaf output of the compiled node (so
``leaf.grad`` stayed None after backward), and outputs computed only from it did not require
grad.  Fixed by the backend contract (``kiln/backends/contract.py``): only a backend that
declares ``runs_graph_as_is`` is trusted to, so the plain wrapper gets the rules of
``aot_eager`` (and the same graph counts).

Each test compares compiled against eager on two inputs and counts the graphs the backend saw.
"""
import functools

import pytest
import torch

import kiln
from kiln.backends.aot_eager import aot_eager
from kiln.testing import assert_same_as_eager

from tests.mutation.harness import CountingBackend

# aot_eager decomposes ops, so values may differ by an ulp or so from eager's
_same_as_eager = functools.partial(assert_same_as_eager, rtol=1.3e-6, atol=1e-5)


class PlainAOTWrapper:
    """A user's counting backend around aot_eager that declares nothing about itself."""

    def __init__(self):
        self.frame_count = 0

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        return aot_eager(gm, example_inputs)


def _backend(kind):
    if kind == "plain_aot_wrapper":
        return PlainAOTWrapper()
    return CountingBackend(kind)      # declares what the named backend declares


BACKENDS = ["eager", "aot_eager", "plain_aot_wrapper"]


def _grad_prog(x, mod):
    leaf = torch.ones(4, requires_grad=True)
    n = float(x.numpy().sum())
    acc = x.sum() * 0
    for row in x:
        acc = acc + row.sum()
    torch.manual_seed(3)
    d = torch.nn.functional.dropout(x, 0.5)
    (leaf * (mod(x) + mod(x))).sum().backward()
    return d + acc + n, leaf.grad, mod.weight.grad


def _rg_prog(x, mod):
    leaf = torch.ones(4, requires_grad=True)
    for row in x:
        leaf = leaf * 1.5
    torch.manual_seed(0)
    d = torch.nn.functional.dropout(x, 0.5)
    (leaf * (mod(x) + mod(x))).sum().backward()
    return d, leaf


def _run(prog, fn, call):
    torch.manual_seed(0)
    mod = torch.nn.Linear(4, 4)
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(call))
    torch.manual_seed(100 + call)
    out = fn(x, mod)
    return out, [p.grad for p in mod.parameters()], torch.rand(3)




@pytest.mark.parametrize("kind", BACKENDS)
# leaf_grad under eager: 3 graphs since numpy is traced (issue #32: `float(x.numpy().sum())`
# was a break of its own, 4 graphs); under AOT backends the leaf's break takes its place
@pytest.mark.parametrize("prog,graphs", [(_grad_prog, {"eager": 3, "aot": 3}), (_rg_prog, {"eager": 2, "aot": 2})],
                         ids=["leaf_grad", "output_rg"])
def test_frame_leaf_matches_eager(prog, graphs, kind):
    """(a) and (b) as reported; graph counts: a functional backend makes the leaf at a break."""
    backend = _backend(kind)
    kiln.reset()
    compiled = kiln.compile(prog, backend=backend)
    for call in range(2):
        _same_as_eager(_run(prog, prog, call), _run(prog, compiled, call))
    assert backend.frame_count == graphs["eager" if kind == "eager" else "aot"]


def _leaf_only(x):
    w = torch.zeros((), requires_grad=True)
    y = x.detach() * 2
    return y * w, w


@pytest.mark.parametrize("kind", BACKENDS)
def test_output_of_frame_leaf_requires_grad(kind):
    """(b) at its smallest: the only input that requires grad is the leaf made in the frame."""
    backend = _backend(kind)
    kiln.reset()
    compiled = kiln.compile(_leaf_only, backend=backend)
    for call in range(2):
        x = torch.randn(3, generator=torch.Generator().manual_seed(call))
        _same_as_eager(_leaf_only(x), compiled(x.clone()))
    assert backend.frame_count == 1


def test_fuzz_finding_passes_under_the_plain_wrapper():
    """The fuzz seed of the class (its repro, now deleted, is described in findings/README.md)."""
    from .gen import generate
    from .oracle import check_program

    d = check_program(generate(200019), "aot_wrapper")
    assert d is None, f"{d.aspect} on call {d.call}\n{d.detail}"
