"""The process-wide caches, and the one ``reset_all()`` that empties them.

Kiln keeps caches at module level in several layers (compiled entries per code object,
decoded bytecode, generated continuations' probes, compiled callees, ...).
``kiln.reset()`` must forget all of them, but it sits at the top of the layer order and
should not know every lower module's private dicts.  So each owner registers its cache
here when its module is imported (``register(name, clear)``), and ``reset_all()`` calls
every ``clear`` in registration order (lower modules first, as imports run).

This module imports nothing, so every layer of Kiln may register with it.  What is not a
cache is not registered: state that must outlive a reset (the original module behind a
compiled module, a generated code object's origin) stays with its owner.
"""
from __future__ import annotations

from typing import Callable

_CLEARS: dict[str, Callable[[], None]] = {}


def register(name: str, clear: Callable[[], None]) -> None:
    """Have ``reset_all()`` call ``clear()``.  ``name`` (``"module.what"``) says whose cache
    it is; registering a name again replaces its ``clear`` (a module imported twice)."""
    _CLEARS[name] = clear


def register_dict(name: str, cache: dict) -> dict:
    """Register a plain dict (or any object with ``clear()``) as a cache; returns it, so that
    ``_CACHE = caches.register_dict("module.cache", {})`` declares and registers at once."""
    register(name, cache.clear)
    return cache


def registered() -> list[str]:
    """The registered caches' names, in the order ``reset_all()`` clears them."""
    return list(_CLEARS)


def reset_all() -> None:
    """Empty every registered cache."""
    for clear in list(_CLEARS.values()):
        clear()
