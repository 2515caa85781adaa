"""When a compiled graph raises at run time: run Python instead, or say why not.

A compiled graph that raises must not give the user a different program.  Python is
always a correct answer (the graph is plain PyTorch, the frame is the user's code), so
Kiln re-runs the call as Python and tells eager's error (the user's) from a backend's.
One mechanism does it, for every graph, with the largest unit it can re-run:

* **In a frame** (the glue), the unit is the whole frame.  The glue applies a frame's
  Python side effects after its graph has run; if an op in the graph raises, eager would
  have applied the side effects before that op and raised there.  So the glue calls the
  graph inside ``try``; on an error it puts back the state the graph may have changed
  (grad mode, the random generators: ``RngSnapshot``) and runs the frame's own code as
  Python from its start, which applies exactly eager's side effects and raises eager's
  error (``GraphCall.failed``, or ``run_frame_as_python`` for a graph that is not a
  ``GraphCall``).
* **Alone** (a caller of ``backends.compile_graph`` with no frame around the graph), the
  unit is the graph, run eagerly on the same inputs (``GraphCall.__call__``).

If the Python run raises too, the error is the user's and is raised.  If it does not,
the graph raised where eager does not, a backend's fault.  On a graph's **first** call
(the backend's callable has never run on real inputs) that is the backend's failure
policy (``backends.policy``): one ``BackendFallbackWarning`` naming the backend, the
graph and the user's line, ``kiln.metrics.backend_fallbacks`` counts it, and the graph
runs eagerly from then on.  On a later call the result is eager's with a
``BackendFallbackWarning`` saying so, and the next call tries the compiled graph again.
With ``kiln.config.raise_on_backend_error`` a ``BackendError`` chained from the backend's
exception is raised instead (at a first call without re-running anything, so the inputs
are as the failed attempt left them).

Re-running is sound only if the failed attempt changed no input: re-running on an input
the compiled code already changed in place would apply the change twice.  Rather than
cloning inputs before every call, the inputs' version counters are read before the call
and compared after the error (every in-place ATen op bumps them, including AOTAutograd's
write-back).  On a first call every tensor input is watched (``versions``/``moved``), and
a change raises ``BackendError``; on every call the glue watches the inputs the trace
changes in place, puts them back from copies where it took them (``InputSnapshot``:
where the frame has Python side effects to lose, for inputs that do not require grad)
and otherwise re-raises.  A backend whose graphs change inputs only after every op ran
(AOTAutograd's, ``backends.contract.applies_input_mutations_last``) changed nothing
before an error, and bumps the versions of the inputs it will write before its graph
runs, so the first-call watch could not tell: its graphs are not ``GraphCall``s, and
their errors go straight to the frame's re-run.
"""
from __future__ import annotations

from typing import Callable

import torch

from ..config import config
from ..events import event
from ..exc import BackendError
from ..user_warnings import warn
from . import caches


#: how a run-time check in a graph says it failed (``capture/semantics/runtime_checks.py``): the
#: trace assumed a branch on tensor data went one way; a failure is no backend's fault
CHECK_FAILED = "kiln runtime check failed"


def is_failed_check(error: BaseException) -> bool:
    """Whether ``error`` is a graph's run-time check failing (Kiln's own ``_assert_async``, or
    the ``_assert_scalar`` of a fact the ShapeEnv was told about data-dependent numbers):
    the frame's Python run then gives the answer, whether it raises or not, with no warning."""
    text = str(error)
    return isinstance(error, RuntimeError) and (text.startswith(CHECK_FAILED)
                                                or text.startswith("Runtime assertion failed for expression"))


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


# names of the graphs (cache entries) that fell back to eager since the last time
# ``config.raise_on_backend_error`` was set: ``cache.py`` drops those entries when it is
# turned on, so the next call compiles again and raises
FALLEN_BACK: set = set()
caches.register("runtime.fallback.fallen_back", FALLEN_BACK.clear, FALLEN_BACK.__len__)


def warn_fallback(where: Where, when: str, error: Exception) -> None:
    """Report (``kiln.events``) and warn (one line) that ``where``'s graph runs eagerly after ``error``."""
    event("backend_fallback", graph=where.graph, backend_name=where.backend, when=when, error=error)
    FALLEN_BACK.add(where.graph)
    warn(f"kiln: {where} failed {when}; running that graph eagerly ({describe(error)}). "
         f"Set kiln.config.raise_on_backend_error = True to raise instead.", BackendFallbackWarning)


def versions(tensors) -> tuple:
    """The version counter of each tensor (None for anything else), read before a call."""
    return tuple(t._version if isinstance(t, torch.Tensor) else None for t in tensors)


def moved(tensors, before: tuple) -> list:
    """The positions of ``tensors`` whose version moved since ``before = versions(tensors)``:
    the failed call changed them in place, so it cannot be re-run."""
    return [i for i, (t, v) in enumerate(zip(tensors, before)) if v is not None and t._version != v]


class GraphCall:
    """A backend's compiled graph as Kiln calls it, with the error fallback of its first
    call (see the module docstring).

    The glue calls ``run`` (on the first call, ``_first_run``; afterwards the backend's
    callable itself, or the eager graph after a fallback: one attribute read per call)
    inside its ``try`` and hands an error to ``failed`` with the frame to re-run.  Called
    directly (``compile_graph``'s callers outside a frame), it re-runs the graph alone."""

    __slots__ = ("run", "_compiled", "_eager", "_where", "_failed_first")

    def __init__(self, compiled: Callable, eager: Callable, where: Where):
        self._compiled, self._eager, self._where = compiled, eager, where
        self._failed_first = None     # the error of a first call that may fall back
        self.run = self._first_run

    @property
    def compiled(self) -> Callable:
        """What runs the graph now: the backend's callable, or the eager graph after a fallback."""
        return self._eager if self.run is self._eager else self._compiled

    def __call__(self, *args):
        try:
            return self.run(*args)
        except Exception as e:
            if e is not self._failed_first:
                raise             # a later call's error, or the policy's BackendError
            return self.failed(e, None, None, lambda: self._eager(*args))

    def _first_run(self, *args):
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
            if config.raise_on_backend_error and not is_failed_check(e):
                raise BackendError(f"{self._where} failed on its first call: {describe(e)}") from e
            self._failed_first = e
            raise
        self.run = self._compiled
        return out

    def failed(self, error: Exception, grad_mode: bool | None, rng: "RngSnapshot | None", rerun: Callable):
        """``error`` ended a call: re-run it as Python (``rerun``: the graph eagerly, or the
        frame), after putting back grad mode and the generators if given.  An error of the
        first call that Python does not raise is the backend's: it warns naming the backend
        and the graph runs eagerly from then on; one that Python raises too is the user's."""
        if error is not self._failed_first or is_failed_check(error):
            self._failed_first = None
            return run_frame_as_python(error, grad_mode, rng, rerun)
        self._failed_first = None
        _put_back(grad_mode, rng)
        try:
            out = rerun()
        except Exception as eager_error:
            # Python fails as well: this is the user's error, not the backend's
            eager_error.add_note(f"(kiln: {self._where} also failed: {describe(error)})")
            raise eager_error from None
        warn_fallback(self._where, "on its first call", error)
        self.run = self._eager
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
    """The glue's handler for a graph that raised ``error`` (past its first call, or of a
    graph without a first-call fallback): see the module docstring."""
    if isinstance(error, BackendError):
        raise error       # the failure policy chose to raise (config.raise_on_backend_error)
    _put_back(grad_mode, rng)
    result = call()        # raises eager's error, with eager's side effects before it
    if is_failed_check(error):
        return result      # the branch the check guarded went the other way, and an except caught it
    message = (f"kiln: a compiled graph raised {type(error).__name__}: {error}, but the frame ran as "
               f"Python without error; its result is eager's")
    if config.raise_on_backend_error:
        raise BackendError(message) from error
    warn(message, BackendFallbackWarning)
    return result


def _put_back(grad_mode: bool | None, rng: RngSnapshot | None) -> None:
    """Grad mode and the generators as they were before the failed call (None: leave it)."""
    if grad_mode is not None:
        torch._C._set_grad_enabled(grad_mode)
    if rng is not None:
        rng.restore()
