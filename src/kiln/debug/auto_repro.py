"""Automatic repro scripts during a normal run (``KILN_REPRO`` / ``kiln.config.repro_after``).

With ``repro_after = "capture"`` every backend Kiln calls is wrapped (through
``kiln.backends.policy.BACKEND_WRAPPERS``): if it raises while compiling a captured
graph, or on that graph's first call, the graph is minified (:func:`kiln.debug.minify.
minify_graph`) and a repro is written to ``kiln.config.repro_dir`` (default
``./kiln_repros``), with a :class:`ReproWrittenWarning` naming the file; then the error
continues as usual (Kiln's fallback policy still applies).  With ``repro_level =
"accuracy"`` the first call is also checked against eager on a snapshot of its real
inputs (aliasing kept), and a graph that is wrong gets a repro too.

With ``repro_after = "aot"`` the same happens one level down, on the forward and backward
graphs that ``aot_eager``, ``aten`` and ``inductor`` hand to their inner compilers
(``kiln.backends._aot.INNER_COMPILER_WRAPPERS``).  Those compilers only ever see fake
tensors, so the repro's inputs have the recorded layout and seeded random values, and the
accuracy check runs at compile time on those.  Inductor's inner compiler cannot run
outside inductor's own set-up, so its graphs are checked, minified and replayed with the
whole ``inductor`` backend.

The lower layers only hold lists of wrappers; :func:`install` (run when ``kiln.debug``
is imported) registers the two wrappers here.  Each reads the config when a graph is
compiled, so setting ``kiln.config.repro_after`` takes effect for the next capture.
While a repro is being made, the wrappers step aside (the minifier compiles many graphs
with the same backend).
"""
from __future__ import annotations

import os
import threading
import warnings
from typing import Callable

import torch
import torch.fx
from torch._guards import tracing
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..backends import _aot, lookup, policy
from ..config import config
from .graph_check import Failure, check_graph, copy_graph_module
from .inputs import InputSet
from .minify import minify_graph

__all__ = ["ReproWrittenWarning", "install", "written"]

#: paths of the repros written in this process, oldest first
written: list[str] = []

_busy = threading.local()


class ReproWrittenWarning(UserWarning):
    """Kiln wrote a repro script for a failing graph."""


def install() -> None:
    """Register the wrappers with the backend layer (idempotent)."""
    if _wrap_backend not in policy.BACKEND_WRAPPERS:
        policy.BACKEND_WRAPPERS.append(_wrap_backend)
    if _wrap_inner_compiler not in _aot.INNER_COMPILER_WRAPPERS:
        _aot.INNER_COMPILER_WRAPPERS.append(_wrap_inner_compiler)


def _idle() -> bool:
    return not getattr(_busy, "on", False)


# ------------------------------------------------------------------ capture level

def _wrap_backend(backend_fn: Callable, backend_name: str, graph_name: str) -> Callable:
    if config.repro_after != "capture" or not _idle():
        return backend_fn

    def compile_and_watch(gm: torch.fx.GraphModule, example_inputs):
        names = _placeholder_names(gm)
        original = copy_graph_module(gm)
        try:
            compiled = backend_fn(gm, example_inputs)
        except Exception:
            _make_repro(original, InputSet.snapshot(example_inputs, names), backend_fn, graph_name, crash=True)
            raise
        return _FirstCallWatch(compiled, original, names, backend_fn, graph_name)

    compile_and_watch.__name__ = getattr(backend_fn, "__name__", backend_name)
    return compile_and_watch


class _FirstCallWatch:
    """Runs the compiled graph; on its first call, makes a repro if it raises or (at the
    accuracy level) if it disagrees with eager on a snapshot of the same inputs."""

    def __init__(self, compiled: Callable, gm: torch.fx.GraphModule, names: list[str], backend_fn: Callable,
                 graph_name: str):
        self.compiled, self.gm, self.names = compiled, gm, names
        self.backend_fn, self.graph_name = backend_fn, graph_name
        self.first = True

    def __call__(self, *args):
        if not self.first:
            return self.compiled(*args)
        self.first = False
        inputs = InputSet.snapshot(args, self.names)
        try:
            out = self.compiled(*args)
        except Exception:
            _make_repro(self.gm, inputs, self.backend_fn, self.graph_name, crash=True)
            raise
        if config.repro_level == "accuracy":
            _make_repro(self.gm, inputs, self.backend_fn, self.graph_name, crash=False,
                        training=torch.is_grad_enabled() and any(getattr(a, "requires_grad", False) for a in args))
        return out


# ------------------------------------------------------------------ aot level

def _wrap_inner_compiler(compiler: Callable, backend_name: str, which: str) -> Callable:
    if config.repro_after != "aot" or not _idle():
        return compiler

    # inductor's compile_fx_inner only works inside compile_fx's own set-up; its graphs are
    # checked and minified with the whole inductor backend, which lowers an ATen graph the
    # same way (a crash that does not come back that way is reported, not written)
    checker = lookup("inductor") if backend_name == "inductor" else compiler

    def compile_and_watch(gm: torch.fx.GraphModule, example_inputs, *args, **kwargs):
        names = _placeholder_names(gm)
        original = copy_graph_module(gm)
        inputs = InputSet.snapshot(list(example_inputs), names)
        label = f"{backend_name} {which} graph"
        try:
            compiled = compiler(gm, example_inputs, *args, **kwargs)
        except Exception:
            _make_repro(original, inputs, checker, label, crash=True)
            raise
        if config.repro_level == "accuracy":
            _make_repro(original, inputs, checker, label, crash=False)
        return compiled

    compile_and_watch.__name__ = getattr(compiler, "__name__", "inner_compiler")
    return compile_and_watch


# ------------------------------------------------------------------ the common part

def _make_repro(gm: torch.fx.GraphModule, inputs: InputSet, backend_fn: Callable, graph_name: str, *,
                crash: bool, training: bool = False) -> str | None:
    """Check the graph alone; if it fails, minify it and write a repro.  Never raises."""
    if not _idle():
        return None
    _busy.on = True
    try:
        with _outside_fake_mode(), tracing(None):   # a clean slate: no fake mode, no tracing context
            verdict = check_graph(gm, inputs, backend_fn, accuracy=not crash, training=training)
            failure: Failure | None = verdict.failure
            if failure is None:
                if crash:
                    warnings.warn(f"kiln: {graph_name} failed in the run but not when checked alone; "
                                  f"no repro written", ReproWrittenWarning, stacklevel=2)
                return None
            result = minify_graph(gm, inputs, failure, backend=backend_fn, accuracy=not crash, training=training,
                                  out_dir=config.repro_dir or os.path.join(os.getcwd(), "kiln_repros"),
                                  graph_index=len(written), title=f"{graph_name} (written automatically, "
                                                                  f"repro_after={config.repro_after!r})",
                                  time_limit=60.0, file_stem="repro_" + "".join(
                                      c if c.isalnum() else "_" for c in graph_name))
        written.append(result.path)
        warnings.warn(f"kiln: {graph_name} fails ({result.reason}); minified repro ({result.ops} op(s)) "
                      f"written to {result.path}", ReproWrittenWarning, stacklevel=2)
        return result.path
    except Exception as e:  # the repro writer must never take the user's run down
        warnings.warn(f"kiln: could not write a repro for {graph_name}: {type(e).__name__}: {e}",
                      ReproWrittenWarning, stacklevel=2)
        return None
    finally:
        _busy.on = False


def _outside_fake_mode():
    """AOTAutograd may call inner compilers with a fake mode active; checks need real tensors."""
    return unset_fake_temporarily()


def _placeholder_names(gm: torch.fx.GraphModule) -> list[str]:
    return [n.name for n in gm.graph.nodes if n.op == "placeholder"]

