"""When compiled code raises at run time: run Python instead, or say why not.

A compiled graph that raises must not give the user a different program.  Python is
always a correct answer (the graph is plain PyTorch, the frame is the user's code), so
Kiln re-runs as Python the smallest unit it can re-run soundly, and tells eager's
error (the user's) from a backend's:

* **The graph, on its first call** (``FirstCallFallback``: what ``backends.policy``
  wraps a backend's callable in).  If the compiled callable raises on its first call,
  the graph runs eagerly on the same inputs.  If that succeeds the backend was at
  fault: its result is returned, one ``BackendFallbackWarning`` says so, and the graph
  runs eagerly from then on.  If it raises too, the error is the user's and is raised,
  with a note naming the backend's error.  Later calls are not guarded: by then the
  compiled code has run once on real inputs.
* **The whole frame, on any call** (``run_frame_as_python``: the handler the glue puts
  around its graph call).  The glue applies a frame's Python side effects after its
  graph has run; if an op in the graph raises, eager would have applied the side
  effects before that op and raised there.  So the glue puts back the state the graph
  may have changed (grad mode, the random generators: ``RngSnapshot``) and runs the
  frame's own code as Python from its start, which applies exactly eager's side effects
  and raises eager's error.  If that does not raise, the graph raised where eager does
  not (a backend bug): the result is eager's and a ``BackendFallbackWarning`` says so.

Both re-runs are sound only if the failed attempt changed no input: re-running on an
input the compiled code already changed in place would apply the change twice.  Rather
than cloning inputs before every call, the inputs' version counters are read before the
call and compared after the error (``moved``; every in-place ATen op bumps them,
including AOTAutograd's write-back).  If one moved, the graph-level fallback raises
``BackendError``; the glue puts the inputs back from copies where it took them
(``InputSnapshot``: where the frame has Python side effects to lose, for inputs that do
not require grad) and otherwise re-raises.  A backend that applies input mutations only
after every op ran (AOTAutograd's, ``backends.contract.applies_input_mutations_last``)
changes no input before an error; its graphs are left to the frame-level fallback alone
(re-running such a graph eagerly would apply its mutations before the same error, and
the frame's Python run would apply them again).

With ``kiln.config.raise_on_backend_error`` a ``BackendError`` chained from the
backend's exception is raised instead of falling back (at a graph's first call without
running it eagerly, so the inputs are as the failed attempt left them).  Every fallback
of a named graph counts in ``kiln.metrics.backend_fallbacks`` and is traced.
"""
from __future__ import annotations

import warnings
from typing import Callable

import torch

from .. import trace
from ..config import config
from ..exc import BackendError
from ..metrics import metrics


class BackendFallbackWarning(UserWarning):
    """A backend failed on a graph and Kiln ran that graph eagerly instead."""


class Where:
    """The backend, graph and user location that every message names."""

    __slots__ = ("backend", "graph", "location")

    def __init__(self, backend: str, graph: str, location: str | None):
        self.backend, self.graph, self.location = backend, graph, location

    def __str__(self) -> str:
        at = f" (at {self.location})" if self.location else ""
        return f"backend {self.backend!r} on graph {self.graph!r}{at}"


def describe(error: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message``, short enough for a one-line warning."""
    text = str(error).strip()
    line = text.splitlines()[0] if text else "(no message)"
    if len(line) > limit:
        line = line[: limit - 3] + "..."
    return f"{type(error).__name__}: {line}"


def warn_fallback(where: Where, when: str, error: Exception) -> None:
    """Count, trace and warn (one line) that ``where``'s graph runs eagerly after ``error``."""
    metrics.backend_fallbacks += 1
    trace.backend_fallback(where.graph, where.backend, when, error)
    warnings.warn(
        f"kiln: {where} failed {when}; running that graph eagerly ({describe(error)}). "
        f"Set kiln.config.raise_on_backend_error = True to raise instead.",
        BackendFallbackWarning, stacklevel=3)


def versions(tensors) -> tuple:
    """The version counter of each tensor (None for anything else), read before a call."""
    return tuple(t._version if isinstance(t, torch.Tensor) else None for t in tensors)


def moved(tensors, before: tuple) -> list:
    """The positions of ``tensors`` whose version moved since ``before = versions(tensors)``:
    the failed call changed them in place, so it cannot be re-run."""
    return [i for i, (t, v) in enumerate(zip(tensors, before)) if v is not None and t._version != v]


class FirstCallFallback:
    """Runs a backend's compiled callable; on its first call, falls back to the eager graph
    if it raises (see the module docstring)."""

    __slots__ = ("_target", "_compiled", "_eager", "_where")

    def __init__(self, compiled: Callable, eager: Callable, where: Where):
        self._compiled, self._eager, self._where = compiled, eager, where
        self._target = self._first_call

    def __call__(self, *args):
        return self._target(*args)

    @property
    def compiled(self) -> Callable:
        """What runs the graph now: the backend's callable, or the eager graph after a fallback."""
        return self._eager if self._target is self._eager else self._compiled

    def _first_call(self, *args):
        before = versions(args)
        try:
            out = self._compiled(*args)
        except Exception as e:
            changed = moved(args, before)
            if changed:
                raise BackendError(
                    f"{self._where} failed on its first call after changing input(s) {changed} in place, "
                    f"so Kiln cannot re-run the graph eagerly without applying that change twice: "
                    f"{describe(e)}") from e
            if config.raise_on_backend_error:
                raise BackendError(f"{self._where} failed on its first call: {describe(e)}") from e
            try:
                out = self._eager(*args)
            except Exception as eager_error:
                # the graph fails eagerly as well: this is the user's error, not the backend's
                eager_error.add_note(f"(kiln: {self._where} also failed: {describe(e)})")
                raise eager_error from None
            warn_fallback(self._where, "on its first call", e)
            self._target = self._eager
            return out
        self._target = self._compiled
        return out


class RngSnapshot:
    """The state of the CPU generator (and the current CUDA one, if CUDA is in use)."""

    __slots__ = ("cpu", "cuda")

    def __init__(self):
        self.cpu = torch.random.get_rng_state()
        self.cuda = torch.cuda.get_rng_state() if torch.cuda.is_available() and torch.cuda.is_initialized() else None

    def restore(self):
        torch.random.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda)


class InputSnapshot:
    """Copies of the inputs a graph run op by op changes in place, taken before the call
    when the frame also has Python side effects to replay, so that if the graph raises
    after changing them they are put back and the frame can still run as Python (which
    applies eager's side effects before the error).  Not for inputs that require grad:
    putting the values back would not undo the autograd history of the change."""

    __slots__ = ("tensors", "copies")

    def __init__(self, *tensors):
        self.tensors = tensors
        self.copies = None if any(t.requires_grad for t in tensors) else [t.clone() for t in tensors]

    def restore(self) -> bool:
        """Put the inputs back; False when there is nothing to put them back from."""
        if self.copies is None:
            return False
        with torch.no_grad():
            for t, c in zip(self.tensors, self.copies):
                t.copy_(c)
        return True


def run_frame_as_python(error: Exception, grad_mode: bool, rng: RngSnapshot | None, call):
    """The glue's handler for a graph that raised ``error``: see the module docstring."""
    if isinstance(error, BackendError):
        raise error       # the failure policy chose to raise (config.raise_on_backend_error)
    torch._C._set_grad_enabled(grad_mode)
    if rng is not None:
        rng.restore()
    result = call()        # raises eager's error, with eager's side effects before it
    message = (f"kiln: a compiled graph raised {type(error).__name__}: {error}, but the frame ran as "
               f"Python without error; its result is eager's")
    if config.raise_on_backend_error:
        raise BackendError(message) from error
    warnings.warn(message, BackendFallbackWarning, stacklevel=3)
    return result
