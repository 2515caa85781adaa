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
_SIZES: dict[str, Callable[[], int]] = {}


def register(name: str, clear: Callable[[], None], size: Callable[[], int] | None = None) -> None:
    """Have ``reset_all()`` call ``clear()``.  ``name`` (``"module.what"``) says whose cache
    it is; registering a name again replaces it (a module imported twice).  ``size()``, if
    given, counts the cache's entries (``sizes()``)."""
    _CLEARS[name] = clear
    if size is not None:
        _SIZES[name] = size


def register_dict(name: str, cache: dict) -> dict:
    """Register a plain dict (or any sized object with ``clear()``) as a cache; returns it,
    so that ``_CACHE = caches.register_dict("module.cache", {})`` declares and registers at
    once."""
    register(name, cache.clear, cache.__len__)
    return cache


def register_lru(name: str, fn):
    """Register a ``functools.lru_cache`` function; returns it (usable as a decorator
    below ``@functools.lru_cache``)."""
    register(name, fn.cache_clear, lambda: fn.cache_info().currsize)
    return fn


def sizes() -> dict[str, int]:
    """The number of entries of each cache that can count them, by name."""
    return {name: size() for name, size in _SIZES.items()}


def registered() -> list[str]:
    """The registered caches' names, in the order ``reset_all()`` clears them."""
    return list(_CLEARS)


def reset_all() -> None:
    """Empty every registered cache."""
    for clear in list(_CLEARS.values()):
        clear()
