"""Backends: ``(gm, example_inputs) -> callable``, looked up by name or passed directly.

``list()`` names the registered backends, ``register(name, fn)`` adds one, and
``lookup(name_or_callable)`` resolves what a user passed to ``kiln.compile``.
``compile_graph`` applies Kiln's failure policy (fall back to eager, or raise
``BackendError``) around any backend.  The built-in backends (``eager``, ``aot_eager``,
``aten``, ``inductor``) are imported on first lookup.
"""
from __future__ import annotations

from .policy import BackendFallbackWarning, compile_graph
from .registry import list_backends as list, lookup, register  # noqa: A001

__all__ = ["list", "lookup", "register", "compile_graph", "BackendFallbackWarning"]

# --- the package's face: what the layers above import from it ---
from ._aot import GradSpecialized, boxed, tuple_output_graph  # noqa: F401
from .body_calls import call_body, has_body_calls, inline_body_calls, with_invoke_subgraph  # noqa: F401
from .contract import (  # noqa: F401
    applies_input_mutations_last,
    caches_compiled_graphs,
    declare_like,
    options_hook,
    returned_as_is,
    runs_graph_as_is,
)
from .ddp_split import BucketLayout, BucketSplittingBackend  # noqa: F401
from .random_draws import DrawWatcher, draws_random_numbers, redrawn_by_trace  # noqa: F401
from .registry import list_backends  # noqa: F401
# --- end of the face ---
