"""``kiln.debug.bisect``: which graph, and which node in it, first makes the result wrong.

Where :func:`kiln.debug.minify` judges graphs one at a time on their recorded inputs,
bisection judges only the end-to-end result, so it also finds bugs that need the real
surroundings of a graph.  Every probe re-runs ``fn`` under Kiln from scratch with a
backend that sends some graphs (or some nodes) to the user's backend and everything
else to eager, and compares the result with eager (:func:`~kiln.debug.record.compare_runs`):
values against the float64 reference, which outputs share memory with which arguments
and with each other, and which arguments were changed in place (or, with
``accuracy=False``, it only asks whether the backend raised).

1. graphs: the smallest ``k`` such that compiling the first ``k`` graphs (capture order)
   with the backend and the rest eagerly fails (binary search); graph ``k`` (counting from
   1, as every message does) is the culprit.  It is then tried alone (every other graph
   eager), which the summary reports.
2. nodes: inside that graph, the smallest ``j`` such that compiling the first ``j`` call
   nodes with the backend and running the rest of the graph eagerly fails; node
   ``j-1`` is the culprit, then tried alone (prefix and suffix eager).  The graph is
   split with ``torch.fx.passes.split_module``; the compiled piece is compiled on its
   first call, with that call's real arguments.
3. stages, for ``backend="inductor"``: ``aot_eager``, then AOTAutograd with inductor's
   decompositions, then inductor; the first stage that fails end to end is the one that
   introduces the bug (capture, decompositions, or inductor's code generation).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.fx
from torch.fx.passes.split_module import split_module

from ..backends import boxed, declare_like, GradSpecialized, lookup, tuple_output_graph
from ..fx_ops import op_nodes
from .record import ArgTemplate, RecordingBackend, compare_runs, run_end_to_end

__all__ = ["BisectResult", "bisect", "aot_eager_inductor_decompositions"]


@dataclass
class BisectResult:
    """What :func:`bisect` found; ``graph_index`` is None when nothing fails.

    ``graph_index`` counts from 0 (an index into capture order); every message counts
    graphs from 1, as ``kiln explain`` and ``kiln report`` do (graph ``graph_index + 1``)."""

    summary: str
    graph_index: int | None = None
    op: str | None = None
    node: str | None = None
    graphs: int = 0
    graph_alone: bool | None = None
    node_alone: bool | None = None
    stage: str | None = None
    stages: list[tuple[str, bool]] = field(default_factory=list)
    runs: int = 0
    seconds: float = 0.0

    def __str__(self) -> str:
        return f"bisect: {self.summary}"


def _eager(gm, example_inputs):
    return gm.forward


class _Prober:
    """Runs ``fn`` end to end with a per-graph choice of backend and says whether it fails."""

    def __init__(self, fn: Callable, template: ArgTemplate, backend_fn: Callable, *, accuracy: bool,
                 training: bool, progress: Callable[[str], None]):
        self.fn, self.template, self.backend_fn = fn, template, backend_fn
        self.accuracy, self.training, self.progress = accuracy, training, progress
        self.runs = 0
        self.expected = run_end_to_end(fn, template, backend=None, training=training)
        self.reference = None
        if accuracy:
            try:
                self.reference = run_end_to_end(fn, template, backend=None, training=training, float64=True)
            except Exception:
                self.reference = None
        self.last_reason = ""

    def fails(self, choose: Callable[[int, torch.fx.GraphModule], Callable]) -> tuple[bool, RecordingBackend]:
        self.runs += 1
        recorder = RecordingBackend(_eager, choose=choose)
        # graphs run eagerly or (in pieces) by the backend: as they are if the backend does,
        # so the run splits into the graphs it has under the backend (backends/contract.py)
        declare_like(recorder, self.backend_fn, ["runs_graph_as_is"])
        try:
            actual = run_end_to_end(self.fn, self.template, backend=recorder, training=self.training)
        except Exception as e:
            self.last_reason = f"the run raised {type(e).__name__}: {e}"
            return True, recorder
        for record in recorder.graphs:
            error = record.compile_error or record.call_error
            if error is not None:
                self.last_reason = f"graph {record.index + 1}: the backend raised {type(error).__name__}: {error}"
                return True, recorder
        if not self.accuracy:
            return False, recorder
        found = compare_runs(self.expected, actual, self.reference)
        if not found.ok:
            self.last_reason = found.failures[0]
        return not found.ok, recorder


def bisect(fn: Callable, args: tuple, kwargs: dict | None = None, *, backend: Any, accuracy: bool = True,
           training: bool = False, progress: Callable[[str], None] | None = None) -> BisectResult:
    """Find the first graph and the node in it on which ``backend`` breaks ``fn``'s result."""
    start = time.monotonic()
    say = progress or (lambda msg: None)
    backend_fn = lookup(backend)
    template = ArgTemplate(tuple(args), dict(kwargs or {}))
    prober = _Prober(fn, template, backend_fn, accuracy=accuracy, training=training, progress=say)
    result = BisectResult("")
    if backend == "inductor":
        say("stages: aot_eager, aot_eager + inductor decompositions, inductor")
        result.stages, result.stage = _first_failing_stage(prober, [
            ("aot_eager", lookup("aot_eager")),
            ("aot_eager + inductor decompositions", aot_eager_inductor_decompositions),
            ("inductor", backend_fn)])
    say("running with every graph compiled by the backend")
    failing, recorder = prober.fails(lambda i, gm: backend_fn)
    n = result.graphs = len(recorder.graphs)
    if not failing:
        result.summary = f"nothing fails: {n} graph(s), the result matches eager" + (
            f" at every stage ({', '.join(name for name, _ in result.stages)})" if result.stages else "")
        result.runs, result.seconds = prober.runs, time.monotonic() - start
        return result
    whole_reason = prober.last_reason
    lo, hi = 1, n
    while lo < hi:
        mid = (lo + hi) // 2
        say(f"graphs 1..{mid} compiled, the rest eager")
        if prober.fails(lambda i, gm, mid=mid: backend_fn if i < mid else _eager)[0]:
            hi = mid
        else:
            lo = mid + 1
    g = hi - 1
    result.graph_index = g
    say(f"graph {g + 1} alone")
    result.graph_alone = prober.fails(lambda i, gm: backend_fn if i == g else _eager)[0]
    only_g = not result.graph_alone
    node_index, nodes = _bisect_nodes(prober, backend_fn, g, only_g, say)
    if node_index is not None:
        node = nodes[node_index]
        result.op, result.node = _target_name(node), _describe_node(node)
        say(f"node {node.name} alone")
        result.node_alone = prober.fails(_choose_range(backend_fn, g, node_index, node_index + 1, only_g))[0]
    result.runs, result.seconds = prober.runs, time.monotonic() - start
    result.summary = _summary(result, whole_reason)
    return result


def _bisect_nodes(prober: _Prober, backend_fn: Callable, g: int, others_compiled: bool,
                  say: Callable[[str], None]) -> tuple[int | None, list[torch.fx.Node]]:
    _, recorder = prober.fails(lambda i, gm: backend_fn if i == g or (others_compiled and i < g) else _eager)
    if g >= len(recorder.graphs):
        return None, []
    nodes = _call_nodes(recorder.graphs[g].gm)
    if not nodes:
        return None, nodes
    lo, hi = 1, len(nodes)
    while lo < hi:
        mid = (lo + hi) // 2
        say(f"graph {g + 1}: first {mid} of {len(nodes)} nodes compiled, the rest eager")
        if prober.fails(_choose_range(backend_fn, g, 0, mid, others_compiled))[0]:
            hi = mid
        else:
            lo = mid + 1
    return hi - 1, nodes


def _choose_range(backend_fn: Callable, g: int, lo: int, hi: int, others_compiled: bool):
    """Graph ``g``: call nodes ``lo..hi-1`` by the backend, the rest eagerly; graphs before
    ``g`` by the backend when ``others_compiled`` (the culprit failed only with them)."""

    def choose(i: int, gm: torch.fx.GraphModule) -> Callable:
        if i == g:
            return lambda gm, example_inputs: _partly_compiled(gm, backend_fn, lo, hi)
        return backend_fn if others_compiled and i < g else _eager

    return choose


def _partly_compiled(gm: torch.fx.GraphModule, backend_fn: Callable, lo: int, hi: int) -> Callable:
    nodes = _call_nodes(gm)
    order = {n: k for k, n in enumerate(nodes)}
    if lo == 0 and hi >= len(nodes):
        return backend_fn(gm, [])  # pragma: no cover - whole graph: handled by graph-level probes

    def partition(node: torch.fx.Node) -> int:
        k = order.get(node, 0)
        return 0 if k < lo else 1 if k < hi else 2

    split = split_module(gm, gm, partition, keep_original_order=True)
    compiled_name = "submod_1"
    if hasattr(split, compiled_name):
        setattr(split, compiled_name, _CompileOnFirstCall(getattr(split, compiled_name), backend_fn))
    return split.forward


class _CompileOnFirstCall(torch.nn.Module):
    """A piece of a split graph, compiled by the backend with the real arguments of its
    first call.  ``split_module`` pieces may return a bare value; backends are given what
    Kiln gives them, a graph returning a flat tuple, and the piece's result is rebuilt."""

    def __init__(self, gm: torch.fx.GraphModule, backend_fn: Callable):
        super().__init__()
        self.piece, self.rebuild = tuple_output_graph(gm)
        self.backend_fn, self.compiled = backend_fn, None

    def forward(self, *args):
        if self.compiled is None:
            self.compiled = self.backend_fn(self.piece, list(args))
        return self.rebuild(self.compiled(*args))


def _first_failing_stage(prober: _Prober, stages: list[tuple[str, Callable]]) -> tuple[list[tuple[str, bool]], str | None]:
    seen: list[tuple[str, bool]] = []
    for name, stage_fn in stages:
        failing = prober.fails(lambda i, gm, f=stage_fn: f)[0]
        seen.append((name, failing))
        if failing:
            return seen, name
    return seen, None


def aot_eager_inductor_decompositions(gm: torch.fx.GraphModule, example_inputs):
    """``aot_eager`` with inductor's decomposition table: the graphs inductor would lower,
    run by eager kernels.  Wrong here but right under plain ``aot_eager``: a decomposition."""
    # function-level imports: AOTAutograd and inductor cost seconds; only this stage needs them
    from torch._functorch import config as functorch_config  # cost (see above)
    from torch._functorch.aot_autograd import aot_module_simplified  # cost (see above)
    from torch._inductor.decomposition import select_decomp_table  # cost (see above)

    def compile_flat(flat_gm, inputs):
        with functorch_config.patch(force_non_lazy_backward_lowering=True):
            return aot_module_simplified(flat_gm, inputs, fw_compiler=_as_is, bw_compiler=_as_is,
                                         decompositions=select_decomp_table(),
                                         keep_inference_input_mutations=True)

    return GradSpecialized(gm, example_inputs, compile_flat, "aot_eager + inductor decompositions")


def _as_is(gm, example_inputs):
    return boxed(gm.forward)


def _call_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return op_nodes(gm)


def _target_name(node: torch.fx.Node) -> str:
    if isinstance(node.target, str):
        return node.target
    return getattr(node.target, "__name__", str(node.target))


def _describe_node(node: torch.fx.Node) -> str:
    """``cos = cos(x)``: the node as a line of the graph's code would read."""
    args = [str(a) for a in node.args] + [f"{k}={v}" for k, v in node.kwargs.items()]
    return f"{node.name} = {_target_name(node)}({', '.join(args)})"


def _summary(r: BisectResult, reason: str) -> str:
    parts = [f"graph {r.graph_index + 1} of {r.graphs} first breaks the result"
             + ("" if r.graph_alone else " (only together with the graphs before it)")]
    if r.op is not None:
        parts.append(f"node `{r.node}` ({r.op})" + ("" if r.node_alone else
                                                   ", with the nodes before it compiled too"))
    if r.stage is not None:
        parts.append(f"first stage that fails: {r.stage}")
    elif r.stages:
        parts.append("no stage fails on its own")
    parts.append(f"failure with every graph compiled: {reason}")
    return "; ".join(parts)
