"""Functions wrapped in ``functools.lru_cache`` / ``functools.cache``.

Eager runs such a function's body at most once per distinct arguments for the life of
the process (while the entry stays cached); every later call returns the object it
returned then.  Kiln keeps exactly that: a call whose arguments are all real, hashable
objects (constants, modules, classes, loggers) calls the real wrapper at trace time, so
the body runs when eager would first run it, the cache holds what eager's would, and
the result is a constant of the graph.  Tracing the body instead would run it again on
every call (``logger.warning_once`` would log each time) and cannot see the cache.

Calls with arguments that are not real objects (tensors, values made in the frame)
break: the cache decides by their hash, which the trace cannot know.
"""
from __future__ import annotations

import functools

import torch

from ...exc import Unsupported
from .base import Value, const

_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, type)


def is_immutable(obj) -> bool:
    if isinstance(obj, (tuple, frozenset)):
        return all(is_immutable(o) for o in obj)
    return isinstance(obj, _IMMUTABLE)


class CachedFunctionValue(Value):
    """A ``functools._lru_cache_wrapper``; ``realize`` turns an argument Value into the
    real object it stands for (``callables.realize``, passed in to keep the layers)."""

    def __init__(self, fn, source, realize):
        self.fn, self.source, self.realize = fn, source, realize

    def real_object(self):
        return self.fn

    def describe(self):
        return f"cached function {getattr(self.fn, '__qualname__', self.fn)}"

    def call(self, tx, args, kwargs):
        try:
            real_args = [self._real(a, tx) for a in args]
            real_kwargs = {k: self._real(v, tx) for k, v in kwargs.items()}
        except Unsupported:
            raise Unsupported(f"{self.describe()} called with arguments that are not real objects")
        if any(isinstance(a, torch.Tensor) for a in [*real_args, *real_kwargs.values()]):
            raise Unsupported(f"{self.describe()} called with a tensor")
        try:
            hash((tuple(real_args), tuple(real_kwargs.items())))
        except TypeError:
            raise Unsupported(f"{self.describe()} called with unhashable arguments (eager raises)")
        try:
            result = self.fn(*real_args, **real_kwargs)
        except Exception as e:
            raise Unsupported(f"{self.describe()} raised {type(e).__name__}: {e}") from e
        if is_immutable(result):
            return const(result)
        # the cached object itself: the same one every later call returns
        return tx.wrap(result, None)

    def _real(self, v, tx):
        """Constants (tuples of them too, made in the frame) or the real object ``v`` is."""
        try:
            return v.as_constant()
        except Unsupported:
            return self.realize(v, tx)

    def reconstruct(self, cg):
        return cg.source_expr(self.source) if self.source is not None else cg.ref(self.fn)


def is_cached_function(obj) -> bool:
    return isinstance(obj, functools._lru_cache_wrapper)
