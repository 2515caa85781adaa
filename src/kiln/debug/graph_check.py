"""Does one graph, compiled by a backend, behave like the same graph run eagerly?

This is the test every minification step and every repro script runs, so that a
repro's verdict is the minifier's verdict.  For a graph and an :class:`InputSet`:

1. eager: the graph's own code on freshly built inputs (float32 or whatever they were);
2. compiled: the backend compiles a private copy of the graph (backends may rewrite
   what they are given) and runs it on another fresh set of the same inputs;
3. reference: the graph again on float64 copies of the inputs, which measures eager's
   own rounding noise (:mod:`kiln.debug.accuracy`).  A graph that cannot run in float64
   (a dtype baked into one of its ops) is compared against eager directly.

Compared: every output, every input after the call (so in-place writes count), and with
``training=True`` the gradients reaching the inputs' leaves from a fixed random
cotangent on every floating output (the same cotangent in all three runs).  Each run
starts from the same random seed, so random ops (dropout) draw alike.

A failure is a crash (the backend raised, while compiling, running or in backward), an
accuracy failure, or (values right) an aliasing failure: an output that shares memory
with an input in eager but is a copy when compiled, or the reverse, which breaks a
caller that writes into the output in place (the second seed), or outputs that share
memory when compiled but not in eager; or a mutation failure: an input changed in place
in one run and not the other, or its version counter moved differently (autograd's
check for in-place changes).  These are :mod:`kiln.debug.aliasing`'s comparisons, the
ones ``check_same_behaviour`` makes.  If eager itself raises, the case is ``invalid``:
it is not a program, so it says nothing about the backend.
"""
from __future__ import annotations

import contextlib
import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.fx
import torch.utils._pytree as pytree

from .accuracy import AccuracyReport, compare
from .aliasing import mutation_differences, output_aliasing_differences, record_call
from .inputs import InputSet

__all__ = ["Failure", "Verdict", "check_graph", "copy_graph_module", "cotangent_loss", "seeded", "short_path"]


@dataclass(frozen=True)
class Failure:
    """What went wrong: ``kind`` is "crash", "accuracy", "aliasing" or "mutation";
    ``reason`` is one line."""

    kind: str
    reason: str
    exc_type: str | None = None

    def same_kind(self, other: "Failure | None") -> bool:
        """Is ``other`` the same failure for minimization: same kind, and for a crash the
        same exception type."""
        return other is not None and other.kind == self.kind and other.exc_type == self.exc_type


@dataclass(frozen=True)
class Verdict:
    failure: Failure | None = None
    #: eager raised: the case is not a valid program
    invalid: str | None = None
    report: AccuracyReport | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None and self.invalid is None


def copy_graph_module(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A GraphModule over a copy of ``gm``'s graph (submodules and attributes shared)."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in gm.graph.nodes:
        env[node] = graph.node_copy(node, lambda n: env[n])
    return torch.fx.GraphModule(gm, graph, class_name=type(gm).__name__)


@contextlib.contextmanager
def seeded(seed: int = 0):
    """Every run starts from the same generator state, so a graph with dropout draws the
    same mask eagerly and compiled; the caller's generator state is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def cotangent_loss(outputs: Any) -> torch.Tensor | None:
    """A scalar whose gradient sends a fixed pseudo-random cotangent into every floating
    output that requires grad (None if there is none).  Random rather than ones so that
    an error cannot hide in a sum; fixed so that all runs get the same one."""
    total = None
    for i, t in enumerate(pytree.tree_leaves(outputs)):
        if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point():
            g = torch.Generator().manual_seed(1000 + i)
            cot = torch.randn(t.shape, generator=g, dtype=torch.float64).to(t.dtype)
            term = (t * cot).sum()
            total = term if total is None else total + term
    return total


def check_graph(gm: torch.fx.GraphModule, inputs: InputSet, backend: Callable, *,
                accuracy: bool = True, training: bool = False, independent: bool = False) -> Verdict:
    """Compile ``gm`` with ``backend`` and compare it with eager (see the module docstring)."""
    grad_mode = torch.enable_grad if training else torch.no_grad
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with grad_mode():
                expected = _run(gm, inputs, training, float64=False, independent=independent)
        except Exception as e:
            return Verdict(invalid=f"eager raised {type(e).__name__}: {_first_line(e)}")
        try:
            with grad_mode():
                example, _ = inputs.build(independent=independent)
                compiled_fn = _unboxed(backend(copy_graph_module(gm), example))
        except Exception as e:
            return Verdict(Failure("crash", f"the backend raised {type(e).__name__} while compiling: "
                                            f"{_first_line(e)}", _root_type(e)))
        try:
            with grad_mode():
                actual = _run(compiled_fn, inputs, training, float64=False, independent=independent)
        except Exception as e:
            return Verdict(Failure("crash", f"the compiled graph raised {type(e).__name__}: {_first_line(e)}",
                                   _root_type(e)))
        if not accuracy:
            return Verdict()
        reference = None
        try:
            with grad_mode():
                reference = _run(gm, inputs, training, float64=True, independent=independent)
        except Exception:
            reference = None  # a dtype baked into the graph: compare with eager directly
    expected_call, actual_call = expected.pop("call"), actual.pop("call")
    if reference is not None:
        reference.pop("call")
    report = compare(expected, actual, reference, name="result")
    if not report.ok:
        return Verdict(Failure("accuracy", _reason(report)), report=report)
    # outputs that share memory with other outputs in eager only are left out: Kiln's glue
    # rebuilds such a view on the other output itself (``Codegen.realias_outputs``)
    for kind, problems in (("aliasing", output_aliasing_differences(expected_call, actual_call,
                                                                    lost_output_pairs=False)),
                           ("mutation", mutation_differences(expected_call, actual_call))):
        if problems:
            return Verdict(Failure(kind, _in_user_terms(problems[0], inputs)), report=report)
    return Verdict(report=report)


def _in_user_terms(text: str, inputs: InputSet) -> str:
    """``output[0] shares memory with input[1]...`` as ``output 0 shares memory with h...``:
    inputs by the graph's names for them."""
    names = [spec.name or f"input {i}" for i, spec in enumerate(inputs.inputs)]
    text = re.sub(r"\binput\[(\d+)\]", lambda m: names[int(m.group(1))] if int(m.group(1)) < len(names)
                  else m.group(0), text)
    return re.sub(r"\boutput\[(\d+)\]", r"output \1", text)


def _unboxed(fn: Callable) -> Callable:
    """Inner compilers of AOTAutograd return callables taking one list (``_boxed_call``)."""
    if getattr(fn, "_boxed_call", False):
        return lambda *args: fn(list(args))
    return fn


def _run(fn: Callable, inputs: InputSet, training: bool, *, float64: bool, independent: bool) -> dict:
    args, leaves = inputs.build(float64=float64, independent=independent)
    with seeded():
        call = record_call(fn, args)
    out = call.outputs
    result = {"output": _as_list(out),
              "input": [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args],
              "call": call}
    if training:
        names = inputs.leaf_names(independent=independent)
        loss = cotangent_loss(out)
        if loss is not None and leaves:
            grads = list(torch.autograd.grad(loss, leaves, allow_unused=True))
        else:  # nothing to differentiate: every gradient is missing (compared as such)
            grads = [None] * len(leaves)
        result["grad"] = dict(zip(names, grads))
    return result


def _as_list(out: Any) -> list:
    if isinstance(out, (tuple, list)):
        return [o.detach() if isinstance(o, torch.Tensor) else o for o in out]
    return [out.detach() if isinstance(out, torch.Tensor) else out]


def _reason(report: AccuracyReport) -> str:
    """The one failure a human should see first: a structural mismatch, else the worst value."""
    if report.mismatches:
        return short_path(report.mismatches[0])
    worst = max((e for e in report.entries if not e.ok), key=lambda e: e.ratio)
    return short_path(f"{worst.name}: error {worst.err:.3g} vs eager noise {worst.noise:.3g}")


def short_path(text: str) -> str:
    """``result.output[0]...`` reads better as ``output 0...``."""
    return _PATH.sub(lambda m: f"{m.group(1)} {m.group(2)}" if m.group(1) else f"grad of {m.group(4)}", text)


_PATH = re.compile(r"result\.(output|input)\[(\d+)\]|result\.(grad)(?:\.|\[)([^\]:\s]+)\]?")


def _root_type(e: BaseException) -> str:
    """The exception type that names the problem: Kiln's BackendError wraps the backend's own."""
    while type(e).__name__ == "BackendError" and e.__cause__ is not None:
        e = e.__cause__
    return type(e).__name__


def _first_line(e: BaseException, limit: int = 300) -> str:
    text = str(e).strip()
    line = text.splitlines()[0] if text else "(no message)"
    return line if len(line) <= limit else line[: limit - 3] + "..."

