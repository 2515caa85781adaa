"""Backends: ``(gm, example_inputs) -> callable``, looked up by name or passed directly.

``list()`` names the registered backends, ``register(name, fn)`` adds one, and
``lookup(name_or_callable)`` resolves what a user passed to ``kiln.compile``.
"""
from __future__ import annotations

from .registry import list_backends as list, lookup, register  # noqa: A001

__all__ = ["list", "lookup", "register"]
