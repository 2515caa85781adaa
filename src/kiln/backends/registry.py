"""The name -> backend table.  Built-in backends register themselves lazily so that
importing Kiln does not import aot_autograd or inductor."""
from __future__ import annotations

import importlib
from typing import Callable

_BACKENDS: dict[str, Callable] = {}
# name -> "module:function" for built-ins, imported on first lookup
_LAZY: dict[str, str] = {
    "eager": "kiln.backends.eager:eager",
    "aot_eager": "kiln.backends.aot_eager:aot_eager",
    "aten": "kiln.backends.aten:aten",
    "inductor": "kiln.backends.inductor:inductor",
}


def register(name: str, fn: Callable | None = None):
    """Register ``fn`` under ``name``; usable as ``@register("name")`` too."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"backend name must be a non-empty str, got {name!r}")

    def _do(f):
        if not callable(f):
            raise TypeError(f"backend {name!r} must be callable, got {type(f).__name__}")
        _BACKENDS[name] = f
        return f

    return _do(fn) if fn is not None else _do


def list_backends() -> list[str]:
    return sorted(set(_BACKENDS) | set(_LAZY))


def lookup(backend) -> Callable:
    """Resolve a backend name or callable; unknown names list the known ones."""
    if callable(backend):
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a name (str) or a callable (gm, example_inputs) -> callable, "
                        f"got {type(backend).__name__}")
    if backend in _BACKENDS:
        return _BACKENDS[backend]
    if backend in _LAZY:
        mod, _, attr = _LAZY[backend].partition(":")
        fn = getattr(importlib.import_module(mod), attr)
        _BACKENDS[backend] = fn
        return fn
    raise ValueError(f"unknown backend {backend!r}; known backends: {', '.join(list_backends())}")
