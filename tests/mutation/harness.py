"""Harness for mutation / aliasing scenarios: compiled must leave the world as eager does.

``check(fn, make_inputs)`` runs ``fn`` eagerly and compiled (each on its own fresh
inputs from ``make_inputs()``, built under the same seed) for every seed, and asserts
that afterwards

* the results and the inputs are equal, structurally: tensors by value, dtype, shape,
  ``requires_grad``; containers by contents; user objects by their attributes;
* aliasing is the same: which tensor leaves of (inputs, result) share storage
  (``untyped_storage().data_ptr()``), and which result tensors are views;
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
from kiln.backends import contract
from kiln.backends.registry import lookup


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


def leaves(obj, path="", out=None, seen=None):
    """(path, leaf) pairs of a structure: tensors, containers, objects' attributes."""
    out = [] if out is None else out
    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        out.append((path, obj))
        return out
    if isinstance(obj, (int, float, str, bool, type(None), bytes, type)) or callable(obj) and not hasattr(obj, "__dict__"):
        out.append((path, obj))
        return out
    if id(obj) in seen:
        out.append((path, ("<cycle>", type(obj).__name__)))
        return out
    seen.add(id(obj))
    out.append((path, ("<type>", type(obj).__name__)))
    if isinstance(obj, dict):
        for k, v in obj.items():
            leaves(v, f"{path}[{k!r}]", out, seen)
    elif isinstance(obj, (list, tuple)):
        out.append((path + ".len", len(obj)))
        for i, v in enumerate(obj):
            leaves(v, f"{path}[{i}]", out, seen)
    elif isinstance(obj, (set, frozenset)):
        out.append((path, ("<set>", sorted(map(repr, obj)))))
    elif isinstance(obj, torch.nn.Module):
        for k, v in obj.state_dict(keep_vars=True).items():
            leaves(v, f"{path}.{k}", out, seen)
        for k, v in vars(obj).items():
            if not k.startswith("_") and k != "training":
                leaves(v, f"{path}.{k}", out, seen)
    else:
        d = getattr(obj, "__dict__", None)
        if d is not None:
            out.append((path + ".__dict__", sorted(d)))
            for k in sorted(d):
                leaves(d[k], f"{path}.{k}", out, seen)
        for k in getattr(type(obj), "__slots__", ()):
            leaves(getattr(obj, k, "<unset>"), f"{path}.{k}", out, seen)
        if hasattr(obj, "__iter__") and d is None and not getattr(type(obj), "__slots__", ()):
            for i, v in enumerate(list(obj)):
                leaves(v, f"{path}[{i}]", out, seen)
    return out


def assert_same(expected, actual, what="value"):
    e, a = leaves(expected, what), leaves(actual, what)
    assert [p for p, _ in e] == [p for p, _ in a], f"{what}: structure differs\n{e}\n{a}"
    for (path, x), (_, y) in zip(e, a):
        if isinstance(x, torch.Tensor):
            assert isinstance(y, torch.Tensor), f"{path}: {type(y).__name__}, expected a tensor"
            assert (x.shape, x.dtype, x.requires_grad) == (y.shape, y.dtype, y.requires_grad), \
                f"{path}: {x.shape}/{x.dtype}/{x.requires_grad} vs {y.shape}/{y.dtype}/{y.requires_grad}"
            assert torch.equal(x.detach(), y.detach()), f"{path}: values differ\n{x}\n{y}"
        elif isinstance(x, float) and x != x:
            assert y != y, f"{path}: {x!r} vs {y!r}"
        else:
            assert x == y, f"{path}: {x!r} vs {y!r}"


def alias_pattern(*roots):
    """Which tensor leaves share storage, as pairs of paths, plus which are views."""
    ts = [(p, t) for i, r in enumerate(roots) for p, t in leaves(r, f"#{i}") if isinstance(t, torch.Tensor)]
    pairs = set()
    for i, (p, t) in enumerate(ts):
        for q, u in ts[i + 1:]:
            if t.untyped_storage().data_ptr() == u.untyped_storage().data_ptr() and t.numel() and u.numel():
                pairs.add((p, q))
    views = {p for p, t in ts if t._is_view()}
    return pairs, views


def _tensor_objects(inputs):
    return [t for _, t in leaves(inputs, "in") if isinstance(t, torch.Tensor)]


def identity_pattern(before, inputs, result):
    """For every tensor leaf of (inputs, result) after the call: the index of the input
    tensor object it *is* (``is``, not just equal or aliased), or None."""
    index = {id(t): i for i, t in enumerate(before)}
    return [(p, index.get(id(t))) for p, t in leaves((inputs, result), "") if isinstance(t, torch.Tensor)]


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
        assert identity_pattern(e_before, eager_in, e_res) == identity_pattern(c_before, comp_in, c_res), \
            f"seed {seed}: which tensors are the very objects passed in differs"
        if aliasing:
            assert alias_pattern(eager_in, e_res) == alias_pattern(comp_in, c_res), \
                f"seed {seed}: aliasing differs\n{alias_pattern(eager_in, e_res)}\n{alias_pattern(comp_in, c_res)}"
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
