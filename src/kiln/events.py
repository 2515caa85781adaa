"""One call per thing Kiln does at compile time, feeding every place it is reported.

Each event (a capture starting and ending, a graph, an entry's guards and glue, a graph
break, an eager fallback, a recompile, the recompile limit, a backend's compile step
and its fallback, a DDP split, a graph run op by op) is reported to up to three sinks:
the counters of ``kiln.metrics`` (the bench, ``kiln explain``), the structured trace
(``kiln.trace``, read by ``kiln report``) and the printed logs (``KILN_LOGS``).  The
site where it happens calls ``event(kind, **fields)`` once; ``KINDS`` says, per kind,
what each sink gets, so a new sink or a new kind is one row here, not an edit at
every site.

A field that costs something to compute (a failing guard's description, a graph's
input list) is passed as ``later(fn)``: it is computed once, and only when a sink
that is on reads it.  Warnings are not a sink: a warning's stack level points at the
user's code from the site that warns, so the sites keep them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import trace
from .config import config
from .metrics import BreakRecord, Metrics, metrics


class later:
    """A field computed when a sink first reads it (see the module docstring)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], object]):
        self.fn = fn


class Fields(dict):
    """An event's fields; ``later`` values are computed on first read, once."""

    def __getitem__(self, name):
        value = super().__getitem__(name)
        if isinstance(value, later):
            value = value.fn()
            self[name] = value
        return value


@dataclass(frozen=True)
class Kind:
    """What one kind of event gives each sink.

    ``count(metrics, fields)``: its change to the counters; ``record(fields)``: its trace
    record(s) (called only while the trace is on); ``logs``: ``(log kind, text(fields))``
    pairs, each printed with ``[kiln]`` while that kind is in ``config.logs``."""

    count: Callable[[Metrics, Fields], None] | None = None
    record: Callable[[Fields], None] | None = None
    logs: tuple = ()


def event(kind: str, **fields) -> None:
    """Report one ``kind`` event (a row of ``KINDS``) to metrics, the trace and the logs."""
    row = KINDS[kind]
    values = Fields(fields)
    if row.count is not None:
        row.count(metrics, values)
    if row.record is not None and trace.active():
        row.record(values)
    for log_kind, text in row.logs:
        if config.log_enabled(log_kind):
            print(f"[kiln] {text(values)}")


# -- what each kind gives each sink ------------------------------------------------------

def _count_graph(m: Metrics, f: Fields) -> None:
    m.graphs += 1
    m.ops += f["op_count"]


def _graph_text(f: Fields) -> str:
    name, gm = f["name"], f["gm"]
    lines = [f"graph {name}:\n{gm.code}"]
    for sub_name, sub in gm.named_modules():   # bodies of higher-order operators, nested
        if sub_name and hasattr(sub, "code"):
            lines.append(f"graph {name}.{sub_name}:\n{sub.code}")
    return "\n[kiln] ".join(lines)


def _count_break(m: Metrics, f: Fields) -> None:
    if f["counted"]:
        error = f["error"]
        m.breaks.append(BreakRecord(error.reason, error.location, error.source_line, getattr(error, "fix", None)))


def _break_text(f: Fields) -> str:
    error = f["error"]
    where = f" at {error.location}" if error.location else ""
    line = f"\n    {error.source_line.strip()}" if error.source_line else ""
    nested = "" if f["counted"] else " (counted in the callee's own frame)"
    return f"graph break{nested}{where}: {error.reason}{line}"


def _fallback_text(f: Fields) -> str:
    where = f" at {f['location']}" if f["location"] else ""
    return f"{f.get('frame_name') or f['code'].co_name} runs eagerly{where}: {f['reason']}"


def _count_fallback(m: Metrics, f: Fields) -> None:
    m.eager_fallbacks += 1
    m.breaks.append(BreakRecord(f["reason"], f["location"], f["source_line"]))


def _count_recompile(m: Metrics, f: Fields) -> None:
    m.recompiles += 1


def _count_capture_end(m: Metrics, f: Fields) -> None:
    if f["seconds"] is not None:         # the capture made an entry
        m.capture_seconds += f["seconds"]


def _count_backend_compile(m: Metrics, f: Fields) -> None:
    m.backend_seconds += f["seconds"]


def _count_backend_fallback(m: Metrics, f: Fields) -> None:
    m.backend_fallbacks += 1


def _count_ddp_split(m: Metrics, f: Fields) -> None:
    m.ddp_split_graphs += 1
    m.ddp_stages += f["stages"]


KINDS: dict[str, Kind] = {
    # cache.py: a capture of ``code`` begins / is over (``seconds`` None: it made no entry)
    "capture_start": Kind(record=lambda f: trace.capture_start(f["code"], f["cache"], f["entry_index"],
                                                               f["backend_name"])),
    "capture_end": Kind(count=_count_capture_end, record=lambda f: trace.capture_end()),
    # compile_frame: the graph of entry ``name`` (``inputs``: later [(source, example)])
    "graph": Kind(count=_count_graph,
                  record=lambda f: trace.graph(f["name"], f["gm"], lambda: f["inputs"], f["op_count"]),
                  logs=(("graph", _graph_text),)),
    # compile_frame: an entry made, with its guard and glue sources
    "entry": Kind(count=lambda m, f: setattr(m, "frames_captured", m.frames_captured + 1),
                  record=lambda f: trace.entry(f["name"], f["guard_source"], f["glue_source"], f["guard_count"]),
                  logs=(("guards", lambda f: f"guards {f['name']}:\n{f['guard_source']}"),
                        ("code", lambda f: f"glue {f['name']}:\n{f['glue_source']}"))),
    # compile_frame: a graph break (``error``: the Unsupported; ``counted``: in metrics.breaks)
    "break": Kind(count=_count_break, record=lambda f: trace.graph_break(f["error"], f["counted"]),
                  logs=(("breaks", _break_text),)),
    # compile_frame: a graph runs op by op instead of going to the backend
    "op_by_op": Kind(record=lambda f: trace.emit("op_by_op", reason=f["reason"])),
    # cache.py: the frame runs eagerly from now on (``frame_name``, in this and the recompile
    # kinds: the user's name for the frame, FrameCache.name)
    "fallback": Kind(count=_count_fallback,
                     record=lambda f: trace.fallback(f["code"], f["reason"], f["location"], f["source_line"],
                                                     f.get("frame_name")),
                     logs=(("breaks", _fallback_text),)),
    # cache.py: ``code`` is captured again (``failing``: later, the newest entry's failing guard)
    "recompile": Kind(count=_count_recompile,
                      record=lambda f: trace.recompile(f["code"], f["failing"], f["args"], f["kwargs"], f["params"],
                                                       f.get("frame_name")),
                      logs=(("recompiles", lambda f: f"recompiling {f.get('frame_name') or f['code'].co_name}: {f['failing']}"),)),
    "recompile_limit": Kind(record=lambda f: trace.recompile_limit(f["code"], f["message"], f.get("frame_name"))),
    # backends/policy.py: the backend's compile step for one graph
    "backend_compile": Kind(count=_count_backend_compile,
                            record=lambda f: trace.backend_compile(f["graph"], f["backend_name"], f["seconds"],
                                                                   f["error"])),
    # runtime/fallback.py: a graph runs eagerly after its backend failed
    "backend_fallback": Kind(count=_count_backend_fallback,
                             record=lambda f: trace.backend_fallback(f["graph"], f["backend_name"], f["when"],
                                                                     f["error"])),
    # backends/ddp_split.py: a graph cut into ``stages`` at DDP bucket boundaries; a stage compiled
    "ddp_split": Kind(count=_count_ddp_split),
    "ddp_stage_compile": Kind(count=_count_backend_compile),
    # persistent.py: an entry written to the persistent cache (``frame``, ``path``), one not
    # written (``reason``), one loaded in place of a capture
    "cache_write": Kind(record=lambda f: trace.emit("cache_write", frame=f["frame"], path=f["path"]),
                        logs=(("cache", lambda f: f"cache: wrote {f['frame']} to {f['path']}"),)),
    "cache_skip": Kind(count=lambda m, f: setattr(m, "cache_skipped", m.cache_skipped + 1),
                       record=lambda f: trace.emit("cache_skip", frame=f["frame"], reason=f["reason"]),
                       logs=(("cache", lambda f: f"cache: not writing {f['frame']}: {f['reason']}"),)),
    "cache_load": Kind(count=lambda m, f: setattr(m, "entries_loaded", m.entries_loaded + 1),
                       record=lambda f: trace.emit("cache_load", frame=f["frame"], path=f["path"]),
                       logs=(("cache", lambda f: f"cache: loaded {f['frame']} from {f['path']}"),)),
}
