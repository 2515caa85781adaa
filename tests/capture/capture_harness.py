"""A tiny harness for table-driven capture tests.

Each ``Case`` is a small program plus the graph and op counts Kiln should produce
for it.  ``run_case`` compiles the program with ``fullgraph=True`` and a fresh
``CompileCounter``, runs eager and compiled on two input sets (same shapes,
different values; every run gets its own deep copy of the inputs so in-place ops
cannot leak between runs) and compares results, input mutations and output
aliasing structurally.

Counts follow Kiln's design: every recorded op is a ``call_function`` /
``call_method`` node (including the ``getitem`` nodes that unpack a multi-output
op and the ``_set_grad_enabled`` switches of grad-mode blocks); metadata reads,
Python arithmetic and container work cost nothing; a frame with no op and no new
tensor output makes no graph at all.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import math
import re
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
import torch

import kiln
from kiln.testing import CompileCounter


class Rand:
    """Deterministic input factory: ``seed`` picks the values, the shapes are the caller's."""

    def __init__(self, seed: int):
        self.seed = seed
        self.g = torch.Generator().manual_seed(1234 + 7919 * seed)

    def randn(self, *shape, dtype=torch.float32, requires_grad=False):
        t = torch.randn(*shape, generator=self.g, dtype=dtype)
        return t.requires_grad_(requires_grad)

    def rand(self, *shape, dtype=torch.float32):
        return torch.rand(*shape, generator=self.g, dtype=dtype)

    def randint(self, low, high, *shape, dtype=torch.int64):
        return torch.randint(low, high, shape, generator=self.g, dtype=dtype)

    def positive(self, *shape):
        return torch.rand(*shape, generator=self.g) + 0.5

    def randbool(self, *shape):
        return torch.rand(*shape, generator=self.g) > 0.5


@dataclass
class Inputs:
    args: tuple
    kwargs: dict = field(default_factory=dict)


def I(*args, **kwargs) -> Inputs:  # noqa: E743 - short on purpose: used in every table row
    return Inputs(args, kwargs)


@dataclass
class Case:
    name: str
    fn: Callable
    inputs: Callable[[Rand], Any]     # Rand -> Inputs | tuple of positional args
    graphs: int
    ops: int
    atol: float | None = None
    rtol: float | None = None
    check_alias: bool = True          # outputs alias each other / the inputs as in eager
    setup: Callable | None = None     # resets outside state before every run
    state: Callable | None = None     # snapshot of outside state compared after every run
    grad_mode: bool = True            # grad mode the program is called under
    recompiles: int = 0               # extra graphs the second input set is expected to cause
    reference: Callable | None = None  # what eager should be compared against (default: fn itself)

    def __repr__(self):
        return self.name


def _as_inputs(x) -> Inputs:
    if isinstance(x, Inputs):
        return x
    if isinstance(x, tuple):
        return Inputs(x)
    return Inputs((x,))


# ------------------------------------------------------------------------------------
# Structural comparison


def _tensors_in(obj, out, seen):
    if id(obj) in seen:
        return
    if isinstance(obj, torch.Tensor):
        out.append(obj)
        return
    if isinstance(obj, (str, bytes, int, float, complex, bool, type(None))):
        return
    seen.add(id(obj))
    if isinstance(obj, dict):
        for v in obj.values():
            _tensors_in(v, out, seen)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for v in obj:
            _tensors_in(v, out, seen)
    elif isinstance(obj, torch.nn.Module):
        for v in obj.state_dict(keep_vars=True).values():
            _tensors_in(v, out, seen)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            _tensors_in(getattr(obj, f.name), out, seen)
    elif _is_user_instance(obj):
        for v in vars(obj).values():
            _tensors_in(v, out, seen)


def assert_same(expected, actual, path="result", atol=None, rtol=None):
    """``actual`` equals ``expected`` structurally: same types, containers, values."""
    te, ta = type(expected), type(actual)
    assert te is ta, f"{path}: type {ta.__name__} != expected {te.__name__} ({actual!r} vs {expected!r})"
    if isinstance(expected, torch.Tensor):
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.requires_grad == expected.requires_grad, \
            f"{path}: requires_grad {actual.requires_grad} != {expected.requires_grad}"
        torch.testing.assert_close(actual.detach(), expected.detach(), atol=atol, rtol=rtol, equal_nan=True,
                                   msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, f"{path}[{i}]", atol, rtol)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for k in expected:
            assert_same(expected[k], actual[k], f"{path}[{k!r}]", atol, rtol)
    elif isinstance(expected, (set, frozenset)):
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"
    elif isinstance(expected, float):
        assert actual == expected or (math.isnan(actual) and math.isnan(expected)) \
            or math.isclose(actual, expected, rel_tol=1e-6, abs_tol=1e-9), f"{path}: {actual!r} != {expected!r}"
    elif isinstance(expected, torch.nn.Module):
        assert_same(expected.state_dict(keep_vars=True), actual.state_dict(keep_vars=True), f"{path}.state",
                    atol, rtol)
        assert_same(_plain_attrs(expected), _plain_attrs(actual), f"{path}.__dict__", atol, rtol)
    elif dataclasses.is_dataclass(expected) and not isinstance(expected, type):
        for f in dataclasses.fields(expected):
            assert_same(getattr(expected, f.name), getattr(actual, f.name), f"{path}.{f.name}", atol, rtol)
    elif _is_user_instance(expected):
        assert_same(_plain_attrs(expected), _plain_attrs(actual), f"{path}.__dict__", atol, rtol)
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _is_user_instance(obj) -> bool:
    return hasattr(obj, "__dict__") and not isinstance(obj, (type, types.FunctionType, types.MethodType,
                                                             types.ModuleType, functools.partial)) \
        and type(obj).__module__ not in ("builtins", "torch", "kiln.api")


def _plain_attrs(obj) -> dict:
    """Public instance attributes (a module's tensors and submodules are compared via state_dict)."""
    skip = (torch.nn.Module, torch.Tensor) if isinstance(obj, torch.nn.Module) else ()
    return {k: v for k, v in vars(obj).items()
            if not k.startswith("_") and not isinstance(v, skip) and not isinstance(v, types.FunctionType)}


def _alias_signature(result, inputs) -> list:
    """For each output tensor: which earlier output it is, which input it is, and
    which input's storage it shares (views)."""
    outs, ins = [], []
    _tensors_in(result, outs, set())
    _tensors_in(inputs, ins, set())
    sig = []
    for i, t in enumerate(outs):
        same_out = next((j for j in range(i) if outs[j] is t), None)
        same_in = next((j for j, x in enumerate(ins) if x is t), None)
        ptr = t.untyped_storage().data_ptr() if t.numel() else None
        shares = next((j for j, x in enumerate(ins) if ptr is not None and x.numel()
                       and x.untyped_storage().data_ptr() == ptr), None)
        sig.append((same_out, same_in, shares))
    return sig


# ------------------------------------------------------------------------------------
# Running


def _call(fn, inputs: Inputs, grad_mode: bool):
    with torch.set_grad_enabled(grad_mode):
        try:
            return ("ok", fn(*inputs.args, **inputs.kwargs))
        except kiln.KilnError:
            raise
        except Exception as e:  # the program raising is behaviour to compare too
            return ("raise", e)


def run_case(case: Case):
    kiln.reset()
    counter = CompileCounter()
    target = copy.deepcopy(case.fn) if isinstance(case.fn, torch.nn.Module) else case.fn
    compiled = kiln.compile(target, backend=counter, fullgraph=True)
    for run in range(2):
        base = _as_inputs(case.inputs(Rand(run)))
        eager_in, compiled_in = copy.deepcopy(base), copy.deepcopy(base)
        if case.setup:
            case.setup()
        expected = _call(case.reference or case.fn, eager_in, case.grad_mode)
        eager_state = case.state() if case.state else None
        if case.setup:
            case.setup()
        actual = _call(compiled, compiled_in, case.grad_mode)
        compiled_state = case.state() if case.state else None
        assert expected[0] == actual[0], f"eager {expected[0]}s ({expected[1]!r}) but compiled {actual[0]}s ({actual[1]!r})"
        if expected[0] == "raise":
            assert type(actual[1]) is type(expected[1]) and str(actual[1]) == str(expected[1])
        else:
            assert_same(expected[1], actual[1], "result", case.atol, case.rtol)
        assert_same(eager_in, compiled_in, "inputs after the call", case.atol, case.rtol)
        if case.state:
            assert_same(eager_state, compiled_state, "outside state", case.atol, case.rtol)
        if isinstance(case.fn, torch.nn.Module):
            assert_same(case.fn, target, "module after the call", case.atol, case.rtol)
        if case.check_alias and expected[0] == "ok":
            assert _alias_signature(actual[1], compiled_in) == _alias_signature(expected[1], eager_in), \
                "outputs alias each other or the inputs differently from eager"
        if run == 0:
            assert (counter.frame_count, counter.op_count) == (case.graphs, case.ops), \
                f"expected {case.graphs} graph(s) / {case.ops} op(s), got {counter.frame_count} / " \
                f"{counter.op_count}:\n" + "\n".join(g.code for g in counter.graphs)
            first = (counter.frame_count, counter.op_count)
    if case.recompiles == 0:
        assert (counter.frame_count, counter.op_count) == first, \
            f"the second input set recompiled: {counter!r} after {first}"
    else:
        assert counter.frame_count == first[0] + case.recompiles, \
            f"expected {case.recompiles} recompile(s) on the second input set: {counter!r} after {first}"


def parametrize(cases):
    names = [c.name for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"duplicate case names {dup}"
    return pytest.mark.parametrize("case", cases, ids=names)


# ------------------------------------------------------------------------------------
# Negative cases: fullgraph=True must refuse, naming the construct and the user's line


@dataclass
class Refusal:
    name: str
    fn: Callable
    inputs: Callable[[Rand], Any]
    match: str                       # regex the message must contain (names the construct)
    marker: str = "# <-- refused"    # the source line the location must point at
    where: Callable | None = None    # the function holding the marker (default: fn)

    def __repr__(self):
        return self.name


def line_of(fn, marker: str) -> tuple[str, int]:
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    target = inspect.unwrap(target)
    lines, start = inspect.getsourcelines(target)
    for i, text in enumerate(lines):
        if marker in text:
            return inspect.getsourcefile(target), start + i
    raise AssertionError(f"marker {marker!r} not found in {target}")


def run_refusal(case: Refusal):
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(case.fn, backend=counter, fullgraph=True)
    inputs = _as_inputs(case.inputs(Rand(0)))
    with pytest.raises(kiln.Unsupported) as info:
        compiled(*inputs.args, **inputs.kwargs)
    msg = str(info.value)
    assert re.search(case.match, msg), f"message does not name the construct ({case.match!r}):\n{msg}"
    path, line = line_of(case.where or case.fn, case.marker)
    assert f"{path}:{line}" in msg, f"message does not point at {path}:{line}:\n{msg}"
    assert counter.frame_count == 0
