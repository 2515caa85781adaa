"""Running a user's function end to end, eagerly and under Kiln, and keeping every graph.

:class:`RecordingBackend` wraps the user's backend.  Kiln hands it each captured graph in
capture order; it keeps a copy of the graph (the backend may rewrite what it is given)
and returns a wrapper that snapshots the *real* arguments of the graph's first call
(:class:`kiln.debug.inputs.InputSet`, so aliasing between them is kept) before running
the backend's callable.  Exceptions from the backend, at compile time or on that first
call, are recorded and re-raised, so Kiln's own failure policy still applies.

:func:`run_end_to_end` runs ``fn(*args, **kwargs)`` once on fresh copies of the
arguments (aliasing between them kept, and each as the view or plain tensor it was) and
of the module when ``fn`` is one, and returns what the comparison needs: outputs,
arguments after the call, which outputs share memory with which tensor arguments and
with each other and which arguments the call changed (:func:`kiln.debug.aliasing.record_call`)
and, when training, the gradients of the parameters and arguments after a backward pass
from a fixed cotangent.  :func:`compare_runs` compares two such runs on all of it.
"""
from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.fx
import torch.utils._pytree as pytree

from .. import api
from ..backends import declare_like
from ..fx_ops import count_ops
from ..comparison import parts as children
from .accuracy import AccuracyReport, compare, fp64_copy
from .aliasing import CallRecord, mutation_differences, output_aliasing_differences, record_call
from .graph_check import copy_graph_module, cotangent_loss, seeded
from .inputs import InputSet

__all__ = ["GraphRecord", "RecordingBackend", "run_end_to_end", "ArgTemplate", "RunComparison", "compare_runs"]


@dataclass
class GraphRecord:
    index: int
    gm: torch.fx.GraphModule
    example: InputSet
    runtime: InputSet | None = None
    compile_error: BaseException | None = None
    call_error: BaseException | None = None

    @property
    def inputs(self) -> InputSet:
        """The inputs of the first call if there was one, else those it was compiled with."""
        return self.runtime if self.runtime is not None else self.example

    @property
    def ops(self) -> int:
        return count_ops(self.gm)


class RecordingBackend:
    """See the module docstring.  ``graphs`` lists a GraphRecord per captured graph."""

    def __init__(self, inner: Callable, choose: Callable[[int, torch.fx.GraphModule], Callable] | None = None):
        self.inner = inner
        #: optional: graph index -> the backend to use for it (bisection compiles some eagerly)
        self.choose = choose
        self.graphs: list[GraphRecord] = []
        self.__name__ = getattr(inner, "__name__", type(inner).__name__)
        if choose is None:      # the graphs get the rules they get under ``inner``
            declare_like(self, inner)     # (with ``choose``, the caller declares for the mix)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        record = GraphRecord(len(self.graphs), copy_graph_module(gm), InputSet.snapshot(example_inputs, names))
        self.graphs.append(record)
        backend = self.choose(record.index, gm) if self.choose is not None else self.inner
        try:
            compiled = backend(gm, example_inputs)
        except Exception as e:
            record.compile_error = e
            raise
        return _RecordingCall(compiled, record, names)


class _RecordingCall:
    def __init__(self, compiled: Callable, record: GraphRecord, names: list[str]):
        self.compiled, self.record, self.names = compiled, record, names

    def __call__(self, *args):
        if self.record.runtime is None:
            self.record.runtime = InputSet.snapshot(args, self.names)
            try:
                return self.compiled(*args)
            except Exception as e:
                self.record.call_error = e
                raise
        return self.compiled(*args)


class ArgTemplate:
    """The user's arguments, rebuilt fresh (aliasing kept) for every run."""

    def __init__(self, args: tuple, kwargs: dict):
        leaves, self.spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
        self.tensor_positions = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
        self.others = leaves
        self.tensors = InputSet.snapshot([leaves[i] for i in self.tensor_positions])

    def build(self, *, float64: bool = False) -> tuple[tuple, dict, list[torch.Tensor]]:
        tensors, leaves = self.tensors.build(float64=float64)
        flat = list(self.others)
        for pos, t in zip(self.tensor_positions, tensors):
            flat[pos] = t
        args, kwargs = pytree.tree_unflatten(flat, self.spec)
        return args, kwargs, leaves


def run_end_to_end(fn: Callable, template: ArgTemplate, *, backend: Callable | None, training: bool,
                   float64: bool = False) -> dict:
    """One run of ``fn`` (eager when ``backend`` is None, else under ``kiln.compile``)."""
    target = fn
    if isinstance(fn, torch.nn.Module):
        target = fp64_copy(fn) if float64 else copy.deepcopy(fn)
    if backend is not None:
        api.reset()
        target = api.compile(target, backend=backend)
    args, kwargs, leaves = template.build(float64=float64)
    grad_mode = torch.enable_grad if training else torch.no_grad
    with warnings.catch_warnings(), grad_mode():
        warnings.simplefilter("ignore")
        tensors = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        with seeded():
            call = record_call(lambda *_: target(*args, **kwargs), tensors)
        out = call.outputs
        result: dict[str, Any] = {"output": out, "args": tensors}
        if training:
            loss = cotangent_loss(out)
            params = dict(target.named_parameters()) if isinstance(target, torch.nn.Module) else {}
            wrt = [p for p in params.values() if p.requires_grad] + leaves
            if loss is not None and wrt:
                grads = torch.autograd.grad(loss, wrt, allow_unused=True)
                names = [n for n, p in params.items() if p.requires_grad] + [f"arg{i}" for i in range(len(leaves))]
                result["grad"] = dict(zip(names, grads))
    result["args"] = [a.detach() for a in result["args"]]
    result["output"] = comparable(result["output"])
    result[_CALL] = call
    return result


_CALL = "call"   # the CallRecord of a run: compared by compare_runs, not as a value


@dataclass
class RunComparison:
    """How a compiled run differs from eager's: values (against the float64 reference),
    aliasing (outputs sharing memory with arguments or each other) and mutation (which
    arguments changed in place, version counters included)."""

    values: AccuracyReport
    aliasing: list[str]
    mutation: list[str]

    @property
    def ok(self) -> bool:
        return self.values.ok and not self.aliasing and not self.mutation

    @property
    def failures(self) -> list[str]:
        return self.values.failures + self.aliasing + self.mutation


def compare_runs(expected: dict, actual: dict, reference: dict | None) -> RunComparison:
    """Compare two :func:`run_end_to_end` results (``reference``: the float64 run, or None)."""
    def values(run):
        return None if run is None else {k: v for k, v in run.items() if k != _CALL}

    report = compare(values(expected), values(actual), values(reference), name="result")
    eager, compiled = expected.get(_CALL), actual.get(_CALL)
    if not isinstance(eager, CallRecord) or not isinstance(compiled, CallRecord):
        return RunComparison(report, [], [])
    return RunComparison(report, output_aliasing_differences(eager, compiled), mutation_differences(eager, compiled))


def comparable(obj: Any, depth: int = 0) -> Any:
    """``obj`` with opaque objects opened up, for comparing two runs.

    Objects that compare by identity (no ``__eq__`` of their own, e.g. transformers'
    ``DynamicCache``) are never equal across two runs, which would report every such model
    as wrong.  They are replaced by their type name and their attributes (so the tensors a
    cache holds are still compared), to a limited depth."""
    if obj is None or isinstance(obj, (torch.Tensor, bool, int, float, complex, str, bytes, torch.dtype)):
        return obj
    kids = children(obj)
    if kids is not None:
        if isinstance(obj, (tuple, list)) and not hasattr(obj, "_fields"):
            return type(obj)(comparable(v, depth + 1) for v in obj)
        return {k: comparable(v, depth + 1) for k, v in kids}
    if type(obj).__eq__ is not object.__eq__:
        return obj
    attributes = getattr(obj, "__dict__", None)
    if not attributes or depth >= 6:
        return f"<{type(obj).__qualname__}>"
    return {"type": f"<{type(obj).__qualname__}>",
            **{k: comparable(v, depth + 1) for k, v in attributes.items() if not k.startswith("__")}}

