"""``kiln.explain(fn)(*args)``: what Kiln did with a call, as a report.

The call runs compiled with a private counting backend (so its caches are its own),
and the report gathers what that produced: graphs with their op counts, every graph
break with its reason and the user's ``file:line`` and source line, and the guards
of each cache entry made.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .. import api, backends, cache
from ..backends import declare_like
from ..fx_ops import op_name, op_nodes
from ..metrics import metrics


@dataclass
class GraphInfo:
    name: str
    ops: int
    op_counts: dict
    code: str
    subgraphs: list = field(default_factory=list)   # (HOP node name, attribute, GraphInfo) per body


def _op_counts(gm) -> Counter:
    ops = Counter()
    for n in op_nodes(gm):
        ops[op_name(n)] += 1
    return ops


def _graph_info(name: str, gm) -> GraphInfo:
    """A graph and, nested under each higher-order operator call, the bodies it calls."""
    ops = _op_counts(gm)
    info = GraphInfo(name, sum(ops.values()), dict(ops), gm.code)
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        for a in n.args:
            if getattr(a, "op", None) == "get_attr":
                body = getattr(gm, a.target, None)
                if hasattr(body, "graph"):
                    info.subgraphs.append((n.name, a.target, _graph_info(a.target, body)))
    return info


def _subgraph_lines(info: GraphInfo, indent: str) -> list:
    lines = []
    for node_name, attr, sub in info.subgraphs:
        top = ", ".join(f"{k} x{v}" for k, v in Counter(sub.op_counts).most_common(6))
        lines.append(f"{indent}{node_name} -> {attr}: {sub.ops} ops ({top})")
        lines += _subgraph_lines(sub, indent + "  ")
    return lines


@dataclass
class EntryInfo:
    frame: str
    guards: int
    guard_source: str


@dataclass
class ExplainReport:
    graphs: list = field(default_factory=list)
    breaks: list = field(default_factory=list)      # BreakRecord
    entries: list = field(default_factory=list)
    recompiles: int = 0
    result: object = None

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def break_count(self) -> int:
        return len(self.breaks)

    @property
    def op_count(self) -> int:
        return sum(g.ops for g in self.graphs)

    def __str__(self) -> str:
        lines = [f"Graphs: {self.graph_count}   Graph breaks: {self.break_count}   Ops: {self.op_count}   "
                 f"Recompiles: {self.recompiles}   Cache entries: {len(self.entries)}"]
        if self.breaks:
            lines.append("")
            lines.append("Graph breaks:")
            for i, b in enumerate(self.breaks, 1):
                lines.append(f"  {i}. {b.reason}")
                lines.append(f"     at {b.location or '?'}")
                if b.source_line:
                    lines.append(f"       {b.source_line.strip()}")
                if getattr(b, "fix", None):
                    lines.append(f"     fix: {b.fix}")
            reasons = Counter(b.reason for b in self.breaks)
            if len(reasons) < len(self.breaks):
                lines.append("")
                lines.append("Break reasons:")
                for reason, n in reasons.most_common():
                    lines.append(f"  {n} x {reason}")
        if self.graphs:
            lines.append("")
            lines.append("Graphs:")
            for g in self.graphs:
                top = ", ".join(f"{k} x{v}" for k, v in Counter(g.op_counts).most_common(6))
                lines.append(f"  {g.name}: {g.ops} ops ({top})")
                lines += _subgraph_lines(g, "      ")
        if self.entries:
            lines.append("")
            lines.append("Guards per cache entry:")
            for e in self.entries:
                lines.append(f"  {e.frame}: {e.guards} guards")
        return "\n".join(lines)


class _Recorder:
    """A counting backend that remembers the graphs it saw."""

    def __init__(self, inner):
        self.inner = inner
        self.graphs: list = []
        declare_like(self, inner)     # the graphs get the rules they get under ``inner``

    def __call__(self, gm, example_inputs):
        self.graphs.append(_graph_info(f"graph {len(self.graphs) + 1}", gm))
        return self.inner(gm, example_inputs)


def explain(fn, backend="eager"):
    """Returns a callable: call it with ``fn``'s arguments to get an ExplainReport."""
    def run(*args, **kwargs) -> ExplainReport:
        recorder = _Recorder(backends.lookup(backend))
        compiled = api.compile(fn, backend=recorder)
        breaks_before, recompiles_before = len(metrics.breaks), metrics.recompiles
        report = ExplainReport()
        report.result = compiled(*args, **kwargs)
        report.graphs = list(recorder.graphs)
        report.breaks = list(metrics.breaks[breaks_before:])
        report.recompiles = metrics.recompiles - recompiles_before
        for key, frame_cache in list(cache._CACHES.items()):
            if key[1] == id(recorder):
                # the user's name for the frame (``FrameCache.name``): a continuation's says
                # where it resumes (``f, from line 40``), a wrapper's names the function it wraps
                for e in frame_cache.entries:
                    report.entries.append(EntryInfo(frame_cache.name, e.guard_count, e.guard_source))
        return report

    return run
