"""Shrinking one failing graph by delta debugging.

A candidate is a subset of the original graph's call nodes ("kept") plus the nodes
whose values it returns ("outputs").  :meth:`GraphCase.build` turns a candidate into a
runnable graph: a kept node whose argument was not kept gets that argument as a new
input, holding the value the original graph computed there (recorded once, by running
the original graph eagerly).  So every candidate is a real program on real values, and
"drop a node" and "turn an intermediate value into an input" are the same move.

The passes, each keeping a change only if the failure survives (same exception type for
a crash; an accuracy failure for an accuracy failure):

1. cut: the shortest prefix of the graph that fails when every value it computes is an
   output (binary search), i.e. the first node whose result goes wrong;
2. outputs: return only the last node of that prefix if that still fails, else as few
   outputs as delta debugging finds;
3. nodes: ddmin over the kept nodes, largest chunks first (turning whole runs of
   earlier nodes into inputs at once);
4. sizes: halve a size shared by the inputs and by the constants of the graph (e.g. the
   1024 of ``view(1, 1024, -1)``) while the graph still runs eagerly and still fails.

Every check compiles a fresh candidate with the backend, so the whole search is bounded
by ``deadline`` (a ``time.monotonic()`` value); past it the best graph so far stands.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import torch
import torch.fx

from ..fx_ops import OP_KINDS
from .graph_check import Failure, Verdict, check_graph
from .inputs import InputSet, StorageSpec, TensorInput, is_literal

__all__ = ["GraphCase", "Candidate", "shrink"]

CALL_OPS = OP_KINDS


@dataclass(frozen=True)
class Candidate:
    kept: tuple[int, ...]      # indices into GraphCase.nodes, in graph order
    outputs: tuple[int, ...]   # subset of kept


class GraphCase:
    """A failing graph, its inputs, and the value of every node on those inputs."""

    def __init__(self, gm: torch.fx.GraphModule, inputs: InputSet, *, training: bool):
        self.gm, self.inputs, self.training = gm, inputs, training
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.nodes = [n for n in gm.graph.nodes if n.op in CALL_OPS or n.op == "get_attr"]
        self.index = {n: i for i, n in enumerate(self.nodes)}
        out = next(n for n in gm.graph.nodes if n.op == "output")
        self.original_outputs = tuple(self.index[n] for n in _flat_nodes(out.args) if n in self.index)
        self.values = self._record_values()

    def _record_values(self) -> dict[int, Any]:
        """The value of each node, copied as it was right after the node ran."""
        values: dict[int, Any] = {}
        case = self

        class Recorder(torch.fx.Interpreter):
            def run_node(self, n):
                result = super().run_node(n)
                if n in case.index:
                    values[case.index[n]] = _frozen_copy(result)
                return result

        args, _ = self.inputs.build()
        grad_mode = torch.enable_grad if self.training else torch.no_grad
        with grad_mode():
            Recorder(self.gm).run(*args)
        return values

    def full(self) -> Candidate:
        return Candidate(tuple(range(len(self.nodes))), self.original_outputs)

    def promotable(self, i: int) -> bool:
        v = self.values.get(i)
        return isinstance(v, torch.Tensor) or is_literal(v)

    def build(self, cand: Candidate) -> tuple[torch.fx.GraphModule, InputSet] | None:
        """The graph and inputs for ``cand``; None if it needs a value that cannot be an input."""
        kept = set(cand.kept)
        graph = torch.fx.Graph()
        env: dict[torch.fx.Node, torch.fx.Node] = {}
        used_placeholders: list[int] = []
        promoted: list[int] = []
        needed_ph, needed_promoted = set(), set()
        for i in cand.kept:
            for a in self.nodes[i].all_input_nodes:
                if a.op == "placeholder":
                    needed_ph.add(a)
                elif self.index[a] not in kept:
                    needed_promoted.add(self.index[a])
        for k, ph in enumerate(self.placeholders):
            if ph in needed_ph:
                env[ph] = graph.placeholder(ph.name, type_expr=ph.type)
                used_placeholders.append(k)
        for i in sorted(needed_promoted):
            if not self.promotable(i):
                return None
            env[self.nodes[i]] = graph.placeholder(self.nodes[i].name)
            promoted.append(i)
        for i in cand.kept:
            node = self.nodes[i]
            env[node] = graph.node_copy(node, lambda n: env[n])
        graph.output(tuple(env[self.nodes[i]] for i in cand.outputs))
        graph.lint()
        gm = torch.fx.GraphModule(self.gm, graph, class_name="Repro")
        inputs = self.inputs.subset(used_placeholders)
        for i in promoted:
            inputs.add_value(self.values[i], self.nodes[i].name)
        return gm, inputs


def _flat_nodes(args: Any) -> list[torch.fx.Node]:
    out: list[torch.fx.Node] = []
    torch.fx.node.map_arg(args, lambda n: out.append(n) or n)
    return out


def _frozen_copy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        copy = value.detach().clone()
        copy.requires_grad_(value.requires_grad and (value.is_floating_point() or value.is_complex()))
        return copy
    return value


class Shrinker:
    """Runs the passes of the module docstring on one GraphCase."""

    def __init__(self, case: GraphCase, backend: Callable, failure: Failure, *, accuracy: bool,
                 deadline: float, progress: Callable[[str], None] | None = None):
        self.case, self.backend, self.failure = case, backend, failure
        self.accuracy, self.deadline = accuracy, deadline
        self.progress = progress or (lambda msg: None)
        self.checks = 0
        self.cache: dict[Candidate, bool] = {}
        self.timed_out = False

    def out_of_time(self) -> bool:
        if time.monotonic() > self.deadline:
            self.timed_out = True
        return self.timed_out

    def fails(self, cand: Candidate) -> bool:
        if not cand.kept or (not cand.outputs and not self._mutates(cand)):
            return False
        if cand in self.cache:
            return self.cache[cand]
        if self.out_of_time():
            return False
        built = self.case.build(cand)
        ok = False
        if built is not None:
            gm, inputs = built
            self.checks += 1
            verdict = check_graph(gm, inputs, self.backend, accuracy=self.accuracy, training=self.case.training)
            ok = self.failure.same_kind(verdict.failure)
        self.cache[cand] = ok
        return ok

    def _mutates(self, cand: Candidate) -> bool:
        return any(_is_inplace(self.case.nodes[i]) for i in cand.kept)

    # -------------------------------------------------------------- passes

    def run(self, cand: Candidate) -> Candidate:
        self.progress(f"graph of {len(cand.kept)} ops: cutting at the first wrong value")
        cand = self.cut_prefix(cand)
        self.progress(f"{len(cand.kept)} ops: fewer outputs")
        cand = self.fewer_outputs(cand)
        self.progress(f"{len(cand.kept)} ops: dropping nodes")
        cand = self.ddmin_nodes(cand)
        return cand

    def cut_prefix(self, cand: Candidate) -> Candidate:
        kept = list(cand.kept)

        def prefix(p: int) -> Candidate:
            nodes = tuple(kept[:p])
            outs = tuple(i for i in nodes if _returnable(self.case.values.get(i)))
            return Candidate(nodes, outs)

        if not self.fails(prefix(len(kept))):
            return cand
        lo, hi = 1, len(kept)        # prefix(hi) fails
        while lo < hi and not self.out_of_time():
            mid = (lo + hi) // 2
            if self.fails(prefix(mid)):
                hi = mid
            else:
                lo = mid + 1
        return prefix(hi) if self.fails(prefix(hi)) else prefix(len(kept))

    def fewer_outputs(self, cand: Candidate) -> Candidate:
        last = cand.kept[-1]
        if last in cand.outputs:
            one = self.dce(Candidate(cand.kept, (last,)))
            if one is not None:
                return one
        outs = self.ddmin(list(cand.outputs), lambda keep: Candidate(cand.kept, tuple(keep)))
        cand = Candidate(cand.kept, tuple(outs))
        return self.dce(cand) or cand

    def dce(self, cand: Candidate) -> Candidate | None:
        """``cand`` with only the ancestors of its outputs (and in-place ops), if that still fails;
        else ``cand`` itself if it fails, else None."""
        needed: set[int] = set()
        stack = list(cand.outputs)
        kept = set(cand.kept)
        while stack:
            i = stack.pop()
            if i in needed or i not in kept:
                continue
            needed.add(i)
            stack += [self.case.index[a] for a in self.case.nodes[i].all_input_nodes if a in self.case.index]
        slim = Candidate(tuple(i for i in cand.kept if i in needed), cand.outputs)
        if slim != cand and self.fails(slim):
            return slim
        return cand if self.fails(cand) else None

    def ddmin_nodes(self, cand: Candidate) -> Candidate:
        removable = [i for i in cand.kept if i not in cand.outputs]

        def make(keep: Sequence[int]) -> Candidate:
            keep_set = set(keep) | set(cand.outputs)
            return Candidate(tuple(i for i in cand.kept if i in keep_set), cand.outputs)

        kept = self.ddmin(removable, make)
        result = make(kept)
        # an output whose node can itself become an input is not needed (ddmin over outputs)
        if len(result.outputs) > 1:
            outs = self.ddmin(list(result.outputs), lambda keep: Candidate(
                tuple(i for i in result.kept if i in set(keep) or i not in result.outputs), tuple(keep)))
            result = Candidate(tuple(i for i in result.kept if i in set(outs) or i not in result.outputs),
                               tuple(outs))
        return result

    def ddmin(self, items: list[int], make: Callable[[Sequence[int]], Candidate]) -> list[int]:
        """Remove chunks of ``items`` (halving the chunk size) while ``make(rest)`` still fails."""
        chunk = max(len(items) // 2, 1)
        while items and not self.out_of_time():
            start, removed_any = 0, False
            while start < len(items) and not self.out_of_time():
                rest = items[:start] + items[start + chunk:]
                if self.fails(make(rest)):
                    items, removed_any = rest, True
                else:
                    start += chunk
            if chunk == 1 and not removed_any:
                break
            if not removed_any:
                chunk = max(chunk // 2, 1)
        return items


def _returnable(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def _is_inplace(node: torch.fx.Node) -> bool:
    """Does this node write into one of its arguments?"""
    if node.op == "call_method":
        return node.target.endswith("_") and not node.target.endswith("__")
    if node.op == "call_function":
        schema = getattr(node.target, "_schema", None)
        if schema is not None:
            return any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
        name = getattr(node.target, "__name__", "")
        return name.endswith("_") and not name.endswith("__")
    return False


def shrink_sizes(case: GraphCase, cand: Candidate, backend: Callable, failure: Failure, *, accuracy: bool,
                 deadline: float) -> tuple[torch.fx.GraphModule, InputSet, int]:
    """Pass 4: halve shared sizes while the failure survives (see the module docstring).
    Returns the graph, its inputs and the number of checks run."""
    built = case.build(cand)
    assert built is not None
    gm, inputs = built
    tried: set[int] = set()
    checks = 0
    while time.monotonic() < deadline:
        sizes = _candidate_sizes(inputs, tried)
        if not sizes:
            break
        size = sizes[0]
        tried.add(size)
        smaller = _halve(gm, inputs, size)
        if smaller is None:
            continue
        checks += 1
        verdict: Verdict = check_graph(smaller[0], smaller[1], backend, accuracy=accuracy, training=case.training)
        if failure.same_kind(verdict.failure):
            gm, inputs = smaller
            tried.discard(size // 2)   # the new size may be halved again
    return gm, inputs, checks


def _candidate_sizes(inputs: InputSet, tried: set[int]) -> list[int]:
    counts: dict[int, int] = {}
    for spec in inputs.inputs:
        if isinstance(spec, TensorInput):
            for s in spec.shape:
                if s >= 4 and s not in tried:
                    counts[s] = counts.get(s, 0) + 1
    return sorted(counts, key=lambda s: (-s, -counts[s]))


def _halve(gm: torch.fx.GraphModule, inputs: InputSet, size: int) -> tuple[torch.fx.GraphModule, InputSet] | None:
    """Every input dimension equal to ``size`` and every int constant equal to it become size // 2.

    Only inputs that own their storage alone and are contiguous are resized (their values
    are the leading slice of the old ones); a shared storage keeps its layout."""
    new_size = size // 2
    new = InputSet(list(inputs.storages), list(inputs.inputs), list(inputs.notes))
    owners: dict[int, int] = {}
    for spec in inputs.inputs:
        if isinstance(spec, TensorInput):
            owners[spec.storage] = owners.get(spec.storage, 0) + 1
    changed = False
    for k, spec in enumerate(new.inputs):
        if not isinstance(spec, TensorInput) or size not in spec.shape:
            continue
        storage = inputs.storages[spec.storage]
        if owners[spec.storage] != 1 or not spec.covers(storage) or storage.values is None:
            return None
        old = storage.values.view(spec.shape)
        for dim, s in enumerate(spec.shape):
            if s == size:
                old = old.narrow(dim, 0, new_size)
        values = old.contiguous()
        new.storages[spec.storage] = StorageSpec(storage.dtype, values.numel(), values.reshape(-1).clone(),
                                                 storage.seed)
        new.inputs[k] = replace(spec, shape=tuple(values.shape), stride=tuple(values.stride()))
        changed = True
    if not changed:
        return None
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in gm.graph.nodes:
        copy = graph.node_copy(node, lambda n: env[n])
        if node.op in CALL_OPS:
            copy.args = _replace_int(copy.args, size, new_size)
            copy.kwargs = _replace_int(copy.kwargs, size, new_size)
        env[node] = copy
    return torch.fx.GraphModule(gm, graph, class_name="Repro"), new


def _replace_int(value: Any, old: int, new: int) -> Any:
    if type(value) is int:
        return new if value == old else value
    if isinstance(value, tuple):
        return tuple(_replace_int(v, old, new) for v in value)
    if isinstance(value, list):
        return [_replace_int(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _replace_int(v, old, new) for k, v in value.items()}
    return value


def shrink(case: GraphCase, backend: Callable, failure: Failure, *, accuracy: bool, deadline: float,
           progress: Callable[[str], None] | None = None) -> tuple[torch.fx.GraphModule, InputSet, int, bool]:
    """All passes.  Returns the minimized graph, its inputs, the number of checks run and
    whether the deadline cut the search short."""
    shrinker = Shrinker(case, backend, failure, accuracy=accuracy, deadline=deadline, progress=progress)
    cand = shrinker.run(case.full())
    if progress:
        progress(f"{len(cand.kept)} ops: shrinking sizes")
    gm, inputs, size_checks = shrink_sizes(case, cand, backend, failure, accuracy=accuracy, deadline=deadline)
    timed_out = shrinker.timed_out or time.monotonic() >= deadline
    return gm, inputs, shrinker.checks + size_checks, timed_out
