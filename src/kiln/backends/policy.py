"""What Kiln does when a backend fails: fall back to eager for that graph, or raise.

A backend failure must not take the user's program down: the captured graph is plain
PyTorch, so running it eagerly is always a correct answer.  ``compile_graph`` calls the
backend and returns something to run the graph with:

* If the backend raises while compiling (or returns something that is not callable),
  the graph runs eagerly from then on.
* If the compiled callable raises on its **first** call, the graph is re-run eagerly on
  the same inputs.  If eager succeeds, the backend was at fault: the eager result is
  returned and the graph runs eagerly from then on.  If eager raises too, the error is
  the user's, and the eager error is raised (what they would see without Kiln).
* Later calls are not guarded.  By then the compiled code has run once on real inputs,
  and a guard on every call would mean a try/except and a version-counter scan per
  call for a failure mode that in practice shows up at compile time or first call.
  (The AOTAutograd-based backends compile another variant the first time a graph is
  called in a new autograd situation, e.g. under ``no_grad`` after training; a failure
  there surfaces as their ``BackendError``, unhandled.)

Re-running after a failed first call is only sound if the failed attempt left the
inputs alone: running eagerly on an input the compiled code had already changed in
place would apply the change twice.  Rather than cloning every input before every first
call (which doubles memory when parameters are inputs), Kiln reads the inputs' version
counters before the call.  Every in-place ATen op bumps them, including the write-back
that AOTAutograd-based backends do, so if one moved, the failed attempt had mutated an
input and Kiln raises :class:`kiln.exc.BackendError` instead of falling back.  (A custom
backend that writes into inputs behind autograd's back is invisible to this check.)

Each fallback warns once, in one line, with :class:`BackendFallbackWarning` naming the
backend, the graph and the user's source location, and counts in
``kiln.metrics.backend_fallbacks``.  With ``kiln.config.raise_on_backend_error`` set, a
:class:`kiln.exc.BackendError` chained from the backend's exception is raised instead; at
the first call this happens without running the graph eagerly, so the inputs are left
as the failed attempt left them.  Time spent in the backend's compile step is added to
``kiln.metrics.backend_seconds``.
"""
from __future__ import annotations

import time
import warnings
from typing import Any, Callable, Sequence

import torch

from kiln import trace
from kiln.config import config
from kiln.exc import BackendError
from kiln.metrics import metrics

__all__ = ["BackendFallbackWarning", "compile_graph", "BACKEND_WRAPPERS"]

#: Functions ``wrap(backend_fn, backend_name, graph_name) -> backend_fn`` applied in order
#: to the backend before each graph is compiled.  This is how a higher layer (the
#: automatic repro writer in ``kiln.debug``) watches backends without this module
#: importing it; a wrapper that has nothing to do returns ``backend_fn`` unchanged.
BACKEND_WRAPPERS: list[Callable[[Callable, str, str], Callable]] = []


class BackendFallbackWarning(UserWarning):
    """A backend failed on a graph and Kiln ran that graph eagerly instead."""


def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], backend_fn: Callable, *,
                  backend_name: str, graph_name: str, user_location: str | None = None,
                  caller_reruns_frame: bool = False) -> Callable:
    """Compile ``gm`` with ``backend_fn`` under Kiln's failure policy (see the module docstring).

    Returns a callable taking the graph's inputs positionally.  ``caller_reruns_frame``:
    the backend applies input mutations only after every op ran and the caller handles
    any error of a call by running the whole frame as Python (Kiln's glue).  Then an error
    on the first call is passed on as is: re-running the graph eagerly here would apply
    its input mutations before the same error, and the frame's Python run would apply
    them again (and AOTAutograd bumps the version of an input it will write before its
    graph runs, so the version check could not tell either).
    """
    eager_forward = gm.forward  # bound now: a backend that rewrites gm cannot change it
    for wrap in BACKEND_WRAPPERS:
        backend_fn = wrap(backend_fn, backend_name, graph_name)
    where = _Where(backend_name, graph_name, user_location)
    start, error = time.perf_counter(), None
    try:
        compiled = backend_fn(gm, list(example_inputs))
        if not callable(compiled):
            raise TypeError(f"the backend returned a {type(compiled).__name__}, not a callable")
    except Exception as e:
        error = e
        return _fall_back(where, "while compiling", e, eager_forward)
    finally:
        metrics.backend_seconds += time.perf_counter() - start
        trace.backend_compile(graph_name, backend_name, time.perf_counter() - start, error)
    if compiled is gm and type(gm).forward is eager_forward.__func__:
        compiled = eager_forward    # the graph module itself, not rewritten: its own forward
    if compiled == eager_forward or caller_reruns_frame:
        return compiled
    return _FirstCallGuard(compiled, eager_forward, where)


class _Where:
    """The backend, graph and user location that every message names."""

    def __init__(self, backend: str, graph: str, location: str | None):
        self.backend, self.graph, self.location = backend, graph, location

    def __str__(self) -> str:
        at = f" (at {self.location})" if self.location else ""
        return f"backend {self.backend!r} on graph {self.graph!r}{at}"


class _FirstCallGuard:
    """Runs the compiled callable; on its first call, falls back to eager if it raises."""

    __slots__ = ("_target", "_compiled", "_eager", "_where")

    def __init__(self, compiled: Callable, eager: Callable, where: _Where):
        self._compiled, self._eager, self._where = compiled, eager, where
        self._target = self._first_call

    def __call__(self, *args):
        return self._target(*args)

    @property
    def compiled(self) -> Callable:
        """What runs the graph now: the backend's callable, or the eager graph after a fallback."""
        return self._eager if self._target is self._eager else self._compiled

    def _first_call(self, *args):
        versions = [a._version if isinstance(a, torch.Tensor) else None for a in args]
        try:
            out = self._compiled(*args)
        except Exception as e:
            mutated = [i for i, (a, v) in enumerate(zip(args, versions))
                       if v is not None and a._version != v]
            if mutated:
                raise BackendError(
                    f"{self._where} failed on its first call after changing input(s) {mutated} in place, "
                    f"so Kiln cannot re-run the graph eagerly without applying that change twice: "
                    f"{_describe(e)}") from e
            if config.raise_on_backend_error:
                raise BackendError(f"{self._where} failed on its first call: {_describe(e)}") from e
            try:
                out = self._eager(*args)
            except Exception as eager_error:
                # the graph fails eagerly as well: this is the user's error, not the backend's
                eager_error.add_note(f"(kiln: {self._where} also failed: {_describe(e)})")
                raise eager_error from None
            _warn(self._where, "on its first call", e)
            self._target = self._eager
            return out
        self._target = self._compiled
        return out


def _fall_back(where: _Where, when: str, error: Exception, eager_forward: Callable) -> Callable:
    if config.raise_on_backend_error:
        raise BackendError(f"{where} failed {when}: {_describe(error)}") from error
    _warn(where, when, error)
    return eager_forward


def _warn(where: _Where, when: str, error: Exception) -> None:
    metrics.backend_fallbacks += 1
    trace.backend_fallback(where.graph, where.backend, when, error)
    warnings.warn(
        f"kiln: {where} failed {when}; running that graph eagerly ({_describe(error)}). "
        f"Set kiln.config.raise_on_backend_error = True to raise instead.",
        BackendFallbackWarning, stacklevel=3)


def _describe(error: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message``, short enough for a one-line warning."""
    text = str(error).strip()
    line = text.splitlines()[0] if text else "(no message)"
    if len(line) > limit:
        line = line[: limit - 3] + "..."
    return f"{type(error).__name__}: {line}"
