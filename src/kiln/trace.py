"""The structured trace: one JSON line per thing Kiln does, for ``kiln report``.

Why a file of records rather than richer logs: a report (or any other tool) can be
built after the fact, from a benchmark worker or a user's run, without Kiln having
to know who reads it.  With ``kiln.config.trace_dir`` (or ``KILN_TRACE_DIR``) set,
every process appends to ``<dir>/kiln-trace-<pid>.jsonl``.

Every record has ``kind``, ``t`` (seconds since the trace started in this process,
from ``time.perf_counter``) and ``span`` (the id of the capture in progress, or
None), plus fields of its kind; see docs/report.md for the list.

Two promises to the code that calls in here:

* when the trace is off, each call costs one function call and one attribute check
  (``config.trace_dir``), and nothing is computed for the record;
* writing a record never changes what Kiln computes and never raises into Kiln or
  user code: an error while writing turns the trace off with one warning (until
  ``trace_dir`` is set to another directory).

This module imports only the standard library and :mod:`kiln.config`, so every
layer of Kiln may call it.  Capture code hands it Kiln objects (fx nodes, tracers,
Unsupported errors) and it reads them by attribute, without importing their modules.
"""
from __future__ import annotations

import functools
import json
import linecache
import os
import sys
import time
import warnings

from .config import config
from .fx_ops import op_name, op_nodes

SCHEMA_VERSION = 1

_T0 = time.perf_counter()


class _State:
    """The open trace file and the stack of captures in progress."""

    def __init__(self):
        self.dir: str | None = None
        self.file = None
        self.path: str | None = None
        self.spans: list[dict] = []
        self.next_span = 1
        self.broken: str | None = None     # the trace_dir that failed; setting another one retries


_state = _State()


def _safe(fn):
    """Skip ``fn`` when the trace is off; swallow and report any error it raises."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not config.trace_dir or _state.broken == config.trace_dir:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # the trace must never take Kiln or the user's program down
            _state.broken = config.trace_dir
            warnings.warn(f"kiln: the trace could not be written and is now off ({type(e).__name__}: {e})",
                          RuntimeWarning, stacklevel=2)
            return None

    return wrapper


def active() -> bool:
    """Whether records are being written (``config.trace_dir`` is set)."""
    return bool(config.trace_dir) and _state.broken != config.trace_dir


def _open() -> None:
    directory = os.path.abspath(os.fspath(config.trace_dir))
    if _state.file is not None:
        _state.file.close()
    os.makedirs(directory, exist_ok=True)
    _state.dir = config.trace_dir
    _state.path = os.path.join(directory, f"kiln-trace-{os.getpid()}.jsonl")
    _state.file = open(_state.path, "a", encoding="utf-8")
    _write("session", {"schema": SCHEMA_VERSION, "pid": os.getpid(), "argv": list(sys.argv),
                       "wall_time": time.time(), "cwd": os.getcwd(), "python": sys.version.split()[0]})


def _write(kind: str, fields: dict) -> None:
    span = _state.spans[-1]["id"] if _state.spans else None
    record = {"kind": kind, "t": round(time.perf_counter() - _T0, 6), "span": span, **fields}
    _state.file.write(json.dumps(record, default=repr) + "\n")
    _state.file.flush()


def _record(kind: str, fields: dict) -> None:
    if _state.file is None or _state.dir != config.trace_dir:
        _open()
    _write(kind, fields)


@_safe
def emit(kind: str, **fields) -> None:
    """Write one record of ``kind`` (for tools such as the accuracy checker and minifier)."""
    _record(kind, fields)


def close() -> None:
    """Close the trace file (a later record opens it again, appending)."""
    if _state.file is not None:
        _state.file.close()
    _state.file, _state.dir = None, None


# -- what capture code calls ------------------------------------------------------------

def frame_of(code, name: str | None = None) -> dict:
    """Where a code object lives: name, file and first line; ``qualname`` is the user's name
    for the frame (``name``: ``FrameCache.name``, which names a decorator's wrapper after
    the function it wraps), else the code's."""
    return {"name": code.co_name, "qualname": name or getattr(code, "co_qualname", code.co_name),
            "file": code.co_filename, "line": code.co_firstlineno}


@_safe
def capture_start(code, cache, entry_index: int, backend_name: str) -> None:
    """A capture of ``code`` begins; records until ``capture_end`` belong to it."""
    span = {"id": _state.next_span, "t0": time.perf_counter(), "backend_s": 0.0, "entry": None, "status": None}
    _state.next_span += 1
    _record("capture_start", {"capture": span["id"], "frame": frame_of(code, getattr(cache, "name", None)),
                              "cache": id(cache),
                              "entry_index": entry_index, "backend": backend_name})
    _state.spans.append(span)


@_safe
def capture_end() -> None:
    """The capture begun last is over: its wall time, the backend's share, its outcome."""
    if not _state.spans:
        return
    span = _state.spans[-1]
    wall = time.perf_counter() - span["t0"]
    status = "compiled" if span["entry"] else (span["status"] or "raised")
    _record("capture_end", {"capture": span["id"], "status": status, "entry": span["entry"],
                            "wall_s": wall, "backend_s": span["backend_s"]})
    _state.spans.pop()


def _tensor_meta(t) -> dict:
    try:
        return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "device": str(t.device),
                "requires_grad": bool(t.requires_grad)}
    except Exception:
        return {"type": type(t).__name__}


def describe_value(v, limit: int = 120) -> str:
    """A short text for an argument value: metadata for tensors, a clipped repr otherwise."""
    if hasattr(v, "shape") and hasattr(v, "dtype"):
        m = _tensor_meta(v)
        if "shape" in m:
            return f"Tensor({m['dtype']}, shape={tuple(m['shape'])}, {m['device']})"
    try:
        text = repr(v)
    except Exception:
        text = f"<{type(v).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


@_safe
def graph(name: str, gm, inputs, op_count: int) -> None:
    """The graph of entry ``name``: its code, op counts, where its ops came from, its inputs.

    ``inputs`` is a callable returning ``[(source expression, example tensor)]``, so
    nothing is computed when the trace is off.
    """
    ops: dict = {}
    lines: dict = {}
    for n in op_nodes(gm):
        target = op_name(n)
        ops[target] = ops.get(target, 0) + 1
        for file, line in n.meta.get("kiln_origin", ()):
            per_file = lines.setdefault(file, {})
            per_file[line] = per_file.get(line, 0) + 1
    _record("graph", {"entry": name, "code": gm.code, "op_count": op_count, "op_counts": ops,
                      "inputs": [{"source": src, **_tensor_meta(t)} for src, t in inputs()],
                      "lines": {f: {str(k): v for k, v in d.items()} for f, d in lines.items()}})


@_safe
def entry(name: str, guard_source: str, glue_source: str, guard_count: int) -> None:
    """A cache entry was made: its guard function and glue, as the Python Kiln runs."""
    if _state.spans:
        _state.spans[-1]["entry"] = name
    _record("guards", {"entry": name, "source": guard_source, "count": guard_count})
    _record("glue", {"entry": name, "source": glue_source})


def _stack_of(error) -> list:
    stack = []
    for location, text in error.user_stack or []:
        file, _, line = (location or "?").rpartition(":")
        stack.append({"file": file, "line": int(line) if line.isdigit() else None,
                      "location": location, "source": (text or "").strip() or None})
    return stack


@_safe
def graph_break(error, counted: bool) -> None:
    """A graph break: the Unsupported that caused it, with the inlined-call stack.

    ``counted`` says whether ``kiln.metrics.breaks`` counts it (a break inside a callee
    that is compiled as its own frame is counted there instead).
    """
    _record("break", {"reason": error.reason, "location": error.location,
                      "source_line": (error.source_line or "").strip() or None,
                      "stack": _stack_of(error), "depth": error.depth, "counted": counted,
                      "fix": getattr(error, "fix", None)})


@_safe
def fallback(code, reason: str, location, source_line, name: str | None = None) -> None:
    """A frame will run eagerly (counted in ``kiln.metrics.breaks`` as well)."""
    if _state.spans:
        _state.spans[-1]["status"] = "eager fallback"
    _record("fallback", {"frame": frame_of(code, name), "reason": reason, "location": location,
                         "source_line": (source_line or "").strip() or None})


@_safe
def recompile(code, failing: str, args, kwargs, params, name: str | None = None) -> None:
    """``code`` is captured again: the guard of the newest entry that failed, and this call's values."""
    names = list(params)
    values = {}
    for i, a in enumerate(args):
        values[names[i] if i < len(names) else f"arg{i}"] = describe_value(a)
    for k, v in kwargs.items():
        values[k] = describe_value(v)
    _record("recompile", {"frame": frame_of(code, name), "failed_guard": failing, "new_values": values})


@_safe
def recompile_limit(code, message: str, name: str | None = None) -> None:
    _record("recompile_limit", {"frame": frame_of(code, name), "message": message})


@_safe
def backend_compile(graph_name: str, backend_name: str, seconds: float, error) -> None:
    """The backend's compile step for one graph: how long, and whether it failed."""
    for span in _state.spans:
        span["backend_s"] += seconds
    _record("backend_compile", {"entry": graph_name, "backend": backend_name, "seconds": seconds,
                                "error": None if error is None else f"{type(error).__name__}: {error}"[:500]})


@_safe
def backend_fallback(graph_name: str, backend_name: str, when: str, error) -> None:
    _record("backend_fallback", {"entry": graph_name, "backend": backend_name, "when": when,
                                 "error": f"{type(error).__name__}: {error}"[:500]})


def note_origin(node, tracer) -> None:
    """Remember which user lines (the inlined-call stack) produced an fx node.

    The report colours each of those lines by the graph the node went into.
    """
    if not (config.trace_dir or config.record_stack_traces):
        return
    try:
        origin, names, t = [], [], tracer
        while t is not None:
            ins = t.current
            origin.append((t.code.co_filename, ins.lineno if ins is not None else t.code.co_firstlineno))
            names.append(t.code.co_name)
            t = t.parent
        node.meta["kiln_origin"] = tuple(origin)
        if config.record_stack_traces:   # Python's traceback format, outermost first, as torch's tools read it
            node.meta["stack_trace"] = "".join(
                f'  File "{file}", line {line}, in {name}\n    {linecache.getline(file, line).strip()}\n'
                for (file, line), name in reversed(list(zip(origin, names))))
    except Exception:  # only the report's colours and stack traces depend on this
        pass

