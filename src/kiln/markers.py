"""Marks that user code and Kiln's own wrappers put on functions, read while tracing.

They live at the bottom of the package because both ends need them: the public API
creates them (``kiln.graph_break``, ``kiln.disable``, compiled-function wrappers) and
the capture layer, far below the API, recognises them.
"""
from __future__ import annotations

import functools

#: ``CompiledFunctionBase._kiln_self`` when the wrapper is not bound to an object
UNBOUND = object()


class CompiledFunctionBase:
    """What every Kiln-compiled function wrapper is, as the capture layer sees it.

    ``kiln.api.CompiledFunction`` subclasses this.  When traced code calls such a
    wrapper, Kiln inlines ``_kiln_fn`` (bound to ``_kiln_self`` unless that is
    ``UNBOUND``) instead of treating the wrapper as an opaque object.
    """

    _kiln_fn = None
    _kiln_self = UNBOUND


def graph_break() -> None:
    """Force a graph break here (a no-op when not compiling)."""


def disable(fn=None, *, recursive: bool = True):
    """Mark ``fn`` so Kiln never traces it (calls to it run as plain Python)."""
    if fn is None:
        return lambda f: disable(f, recursive=recursive)
    try:
        fn._kiln_disable = True
        return fn
    except (AttributeError, TypeError):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)
        wrapper._kiln_disable = True
        return wrapper


def is_disabled(fn) -> bool:
    """Marked with ``kiln.disable`` or ``torch.compiler.disable``."""
    return bool(getattr(fn, "_kiln_disable", False) or getattr(fn, "_torchdynamo_disable", False))
