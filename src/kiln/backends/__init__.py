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
