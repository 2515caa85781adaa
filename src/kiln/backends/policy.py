"""What Kiln does when a backend fails: fall back to eager for that graph, or raise.

A backend failure must not take the user's program down: the captured graph is plain
PyTorch, so running it eagerly is always a correct answer.  ``compile_graph`` calls the
backend and returns something to run the graph with:

* If the backend raises while compiling (or returns something that is not callable),
  the graph runs eagerly from then on.
* If the compiled callable raises on its **first** call, the call is re-run as Python
  (the whole frame when the glue calls the graph, else the graph eagerly on the same
  inputs: ``kiln.runtime.fallback.GraphCall``, which also says how a changed input is
  detected).  If that succeeds, the backend was at fault: the eager result is returned
  and the graph runs eagerly from then on.  If it raises too, the error is the user's,
  and the eager error is raised (what they would see without Kiln).
* Later calls are not the failure policy's: by then the compiled code has run once on
  real inputs.  An error there is re-run by the glue's frame-level fallback (same
  module).  (The AOTAutograd-based backends compile another variant the first time a
  graph is called in a new autograd situation, e.g. under ``no_grad`` after training; a
  failure there surfaces as their ``BackendError``, which is raised.)

Each fallback warns once, in one line, with :class:`BackendFallbackWarning` naming the
backend, the graph and the user's source location, and counts in
``kiln.metrics.backend_fallbacks``.  With ``kiln.config.raise_on_backend_error`` set, a
:class:`kiln.exc.BackendError` chained from the backend's exception is raised instead; at
the first call this happens without running the graph eagerly, so the inputs are left
as the failed attempt left them.  Time spent in the backend's compile step is added to
``kiln.metrics.backend_seconds``.  What runs at call time is in ``kiln.runtime.fallback``;
this module is the compile-time half.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import torch

from kiln.config import config
from kiln.events import event
from kiln.exc import BackendError
from kiln.runtime import BackendFallbackWarning, GraphCall, Where, describe, warn_fallback

__all__ = ["BackendFallbackWarning", "compile_graph", "BACKEND_WRAPPERS"]

#: Functions ``wrap(backend_fn, backend_name, graph_name) -> backend_fn`` applied in order
#: to the backend before each graph is compiled.  This is how a higher layer (the
#: automatic repro writer in ``kiln.debug``) watches backends without this module
#: importing it; a wrapper that has nothing to do returns ``backend_fn`` unchanged.
BACKEND_WRAPPERS: list[Callable[[Callable, str, str], Callable]] = []


def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], backend_fn: Callable, *,
                  backend_name: str, graph_name: str, user_location: str | None = None,
                  inputs_change_last: bool = False) -> Callable:
    """Compile ``gm`` with ``backend_fn`` under Kiln's failure policy (see the module docstring).

    Returns a callable taking the graph's inputs positionally: a ``GraphCall`` (whose
    ``run``/``failed`` the glue uses), or the graph's own forward.  ``inputs_change_last``:
    the backend's graphs change inputs in place only after every op ran
    (``backends.contract.applies_input_mutations_last``).  Their first call has no
    fallback of its own: re-running such a graph eagerly would apply its input mutations
    before the same error (and AOTAutograd bumps the version of an input it will write
    before its graph runs, so the version check could not tell); an error reaches the
    caller as it is, and the glue re-runs the frame as Python (``runtime.fallback``).
    """
    eager_forward = gm.forward  # bound now: a backend that rewrites gm cannot change it
    for wrap in BACKEND_WRAPPERS:
        backend_fn = wrap(backend_fn, backend_name, graph_name)
    where = Where(backend_name, graph_name, user_location)
    start, error = time.perf_counter(), None
    try:
        compiled = backend_fn(gm, list(example_inputs))
        if not callable(compiled):
            raise TypeError(f"the backend returned a {type(compiled).__name__}, not a callable")
    except Exception as e:
        error = e
        return _fall_back(where, "while compiling", e, eager_forward)
    finally:
        event("backend_compile", graph=graph_name, backend_name=backend_name, seconds=time.perf_counter() - start,
              error=error)
    if compiled is gm and type(gm).forward is eager_forward.__func__:
        compiled = eager_forward    # the graph module itself, not rewritten: its own forward
    if compiled == eager_forward or inputs_change_last:
        return compiled
    return GraphCall(compiled, eager_forward, where)


def _fall_back(where: Where, when: str, error: Exception, eager_forward: Callable) -> Callable:
    if config.raise_on_backend_error:
        raise BackendError(f"{where} failed {when}: {describe(error)}") from error
    warn_fallback(where, when, error)
    return eager_forward
