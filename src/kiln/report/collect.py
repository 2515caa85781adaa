"""Reading trace records (kiln.trace's JSON lines) into a model of what Kiln did.

Why a separate model: the HTML page, its timeline and the tests all ask the same
questions (which captures made which entry, which breaks count, how long capture
took), and answering them once here keeps the renderers free of record plumbing.

Records from several processes (files ``kiln-trace-<pid>.jsonl``) are merged; ids
that are only unique inside one process (captures, caches) are paired with the pid.
Times are put on one axis using each process's ``session`` wall-clock start.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field


@dataclass
class Break:
    """A graph break or an eager fallback, as ``kiln explain`` lists it."""
    index: int
    kind: str                    # "break" or "fallback"
    reason: str
    location: str | None
    source_line: str | None
    stack: list                  # [{file, line, location, source}], outermost call first
    frame: dict | None = None
    capture: "Capture | None" = None
    fix: str | None = None       # Kiln's own fix for this break (Unsupported.fix), before the hint table

    @property
    def file(self) -> str | None:
        return self.location.rpartition(":")[0] if self.location else None

    @property
    def line(self) -> int | None:
        tail = self.location.rpartition(":")[2] if self.location else ""
        return int(tail) if tail.isdigit() else None


@dataclass
class Capture:
    """One capture of a frame: what it made and how long it took."""
    key: tuple                   # (pid, capture id)
    frame: dict
    cache: tuple                 # (pid, FrameCache id)
    entry_index: int
    backend: str
    start: float                 # on the merged time axis, seconds
    nested: bool                 # started while another capture was running
    end: float | None = None
    wall_s: float | None = None
    backend_s: float = 0.0
    status: str = "unfinished"
    entry: str | None = None
    graph: dict | None = None
    guards: dict | None = None
    glue: dict | None = None
    breaks: list = field(default_factory=list)            # counted and uncounted break records
    fallback: dict | None = None
    recompile: dict | None = None                         # why this capture happened, if a recompile
    backend_compiles: list = field(default_factory=list)  # (start, seconds, record)


@dataclass
class Frame:
    """Every capture of one frame cache (one code object, backend and fullgraph)."""
    cache: tuple
    info: dict
    captures: list = field(default_factory=list)

    @property
    def title(self) -> str:
        return f"{self.info.get('qualname') or self.info.get('name')}"

    @property
    def location(self) -> str:
        return f"{self.info.get('file')}:{self.info.get('line')}"


@dataclass
class Report:
    """Everything the page shows, gathered from the records."""
    frames: list = field(default_factory=list)
    captures: list = field(default_factory=list)
    breaks: list = field(default_factory=list)            # counted breaks and fallbacks, in order
    recompiles: list = field(default_factory=list)
    recompile_limits: list = field(default_factory=list)
    backend_fallbacks: list = field(default_factory=list)
    extras: list = field(default_factory=list)            # measure, bench_result, accuracy, minifier...
    sessions: list = field(default_factory=list)
    title: str = "Kiln report"

    @property
    def graphs(self) -> list:
        return [c.graph for c in self.captures if c.graph is not None]

    @property
    def graph_breaks(self) -> list:
        return [b for b in self.breaks if b.kind == "break"]

    @property
    def fallbacks(self) -> list:
        return [b for b in self.breaks if b.kind == "fallback"]

    @property
    def capture_wall_s(self) -> float:
        """Wall time of the outermost captures (tracing, codegen and backend compile)."""
        return sum(c.wall_s or 0.0 for c in self.captures if not c.nested)

    @property
    def backend_s(self) -> float:
        """Time in backends' compile steps (part of the capture wall time)."""
        return sum(s for c in self.captures for _, s, _ in c.backend_compiles)

    def graph_names(self) -> list:
        return [c.entry for c in self.captures if c.graph is not None]


def trace_files(directory: str) -> list[str]:
    names = sorted(n for n in os.listdir(directory) if n.startswith("kiln-trace-") and n.endswith(".jsonl"))
    return [os.path.join(directory, n) for n in names]


def read_records(path: str) -> list[dict]:
    """The records of one file; a torn last line (a killed process) is skipped."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def load(directory: str) -> Report:
    """The Report for every trace file in ``directory``."""
    files = trace_files(directory)
    if not files:
        raise FileNotFoundError(f"no kiln-trace-*.jsonl files in {directory} "
                                f"(run with KILN_TRACE_DIR={directory} or kiln.config.trace_dir)")
    return build([session for p in files for session in split_sessions(read_records(p))])


def split_sessions(records: list[dict]) -> list[list[dict]]:
    """A file's records per session: a later process with the same pid appends its own."""
    sessions: list = []
    for r in records:
        if r.get("kind") == "session" or not sessions:
            sessions.append([])
        sessions[-1].append(r)
    return sessions


def build(per_process: list[list[dict]]) -> Report:
    """A Report from the records of each process (one list per process session)."""
    report = Report()
    starts = []
    for records in per_process:
        session = next((r for r in records if r["kind"] == "session"), None)
        starts.append((session or {}).get("wall_time", 0.0) - (session or {}).get("t", 0.0))
    base = min(starts) if starts else 0.0
    for records, start in zip(per_process, starts):
        _Builder(report, offset=start - base).feed(records)
    report.captures.sort(key=lambda c: c.start)
    frames: dict = {}
    for c in report.captures:
        frame = frames.get(c.cache)
        if frame is None:
            frame = frames[c.cache] = Frame(c.cache, c.frame)
            report.frames.append(frame)
        frame.captures.append(c)
    for i, b in enumerate(report.breaks, 1):
        b.index = i
    return report


class _Builder:
    """Feeds one process's records into the report, pairing them with their capture."""

    def __init__(self, report: Report, offset: float):
        self.report, self.offset = report, offset
        self.pid = None
        self.open: dict = {}             # capture id -> Capture
        self.last_recompile = None

    def feed(self, records: list[dict]) -> None:
        for r in records:
            handler = getattr(self, "on_" + r.get("kind", ""), None)
            if handler is not None:
                handler(r)
            elif r.get("kind") != "session":
                self.report.extras.append(r)

    def _capture_of(self, r) -> Capture | None:
        return self.open.get(r.get("span"))

    def on_session(self, r):
        self.pid = r.get("pid")
        self.report.sessions.append(r)

    def on_capture_start(self, r):
        c = Capture(key=(self.pid, r["capture"]), frame=r["frame"], cache=(self.pid, r["cache"]),
                    entry_index=r.get("entry_index", 0), backend=r.get("backend", "?"),
                    start=r["t"] + self.offset, nested=r.get("span") is not None)
        if self.last_recompile is not None and self.last_recompile["frame"] == r["frame"]:
            c.recompile = self.last_recompile
        self.last_recompile = None
        self.open[r["capture"]] = c
        self.report.captures.append(c)

    def on_capture_end(self, r):
        c = self.open.pop(r["capture"], None)
        if c is None:
            return
        c.end, c.wall_s, c.status, c.entry = r["t"] + self.offset, r.get("wall_s"), r.get("status"), r.get("entry")
        c.backend_s = r.get("backend_s", 0.0)

    def on_graph(self, r):
        c = self._capture_of(r)
        if c is not None:
            c.graph = r

    def on_guards(self, r):
        c = self._capture_of(r)
        if c is not None:
            c.guards = r

    def on_glue(self, r):
        c = self._capture_of(r)
        if c is not None:
            c.glue = r

    def on_break(self, r):
        c = self._capture_of(r)
        if c is not None:
            c.breaks.append(r)
        if r.get("counted", True):
            self.report.breaks.append(Break(0, "break", r["reason"], r.get("location"), r.get("source_line"),
                                            r.get("stack") or [], c.frame if c else None, c, r.get("fix")))

    def on_fallback(self, r):
        c = self._capture_of(r)
        if c is not None:
            c.fallback = r
        stack = [{"file": r["location"].rpartition(":")[0], "line": None, "location": r["location"],
                  "source": r.get("source_line")}] if r.get("location") else []
        self.report.breaks.append(Break(0, "fallback", r["reason"], r.get("location"), r.get("source_line"),
                                        stack, r.get("frame"), c))

    def on_recompile(self, r):
        self.last_recompile = r
        self.report.recompiles.append(r)

    def on_recompile_limit(self, r):
        self.report.recompile_limits.append(r)

    def on_backend_compile(self, r):
        c = self._capture_of(r)
        if c is not None:
            c.backend_compiles.append((r["t"] + self.offset - r["seconds"], r["seconds"], r))

    def on_backend_fallback(self, r):
        self.report.backend_fallbacks.append(r)
