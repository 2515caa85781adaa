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


# -- dynamic dimensions ------------------------------------------------------------------
# Marks live on the tensor object; the next capture that reads the tensor honours them
# (see capture/basics/dynamism.py).  torch._dynamo's own marks (``_dynamo_dynamic_indices``,
# set by ``torch._dynamo.mark_dynamic``) are honoured too, so code written for
# torch.compile keeps working.

def _dims(t, attr: str) -> dict:
    d = getattr(t, attr, None)
    if d is None:
        d = {}
        setattr(t, attr, d)
    return d


def _check_dim(t, dim) -> int:
    if not hasattr(t, "dim"):
        raise TypeError(f"expected a tensor, got {type(t).__name__}")
    if not isinstance(dim, int) or not -t.dim() <= dim < max(t.dim(), 1):
        raise IndexError(f"dimension {dim!r} is out of range for a {t.dim()}-d tensor")
    return dim % t.dim() if t.dim() else 0


def mark_dynamic(t, dim, min: int | None = None, max: int | None = None) -> None:  # noqa: A002
    """Make ``t``'s dimension ``dim`` symbolic on the next capture that reads ``t``; an
    error if the traced code then specialises it.  ``min``/``max`` bound its range."""
    for d in ([dim] if isinstance(dim, int) else list(dim)):
        _dims(t, "_kiln_dynamic_dims")[_check_dim(t, d)] = (min, max)
        _dims(t, "_kiln_static_dims").pop(d, None)


def maybe_mark_dynamic(t, dim) -> None:
    """Like :func:`mark_dynamic`, but specialising the dimension is allowed."""
    for d in ([dim] if isinstance(dim, int) else list(dim)):
        _dims(t, "_kiln_maybe_dynamic_dims")[_check_dim(t, d)] = True


def mark_static(t, dim) -> None:
    """Keep ``t``'s dimension ``dim`` static, whatever the policy says."""
    for d in ([dim] if isinstance(dim, int) else list(dim)):
        d = _check_dim(t, d)
        _dims(t, "_kiln_static_dims")[d] = True
        _dims(t, "_kiln_dynamic_dims").pop(d, None)
        _dims(t, "_kiln_maybe_dynamic_dims").pop(d, None)


def dynamic_marks(t) -> tuple[dict, tuple, tuple]:
    """(dims marked dynamic -> (min, max), dims maybe-dynamic, dims static) of ``t``."""
    marked = dict(getattr(t, "_kiln_dynamic_dims", None) or {})
    for d in getattr(t, "_dynamo_dynamic_indices", None) or ():
        marked.setdefault(d, (None, None))
    maybe = tuple(getattr(t, "_kiln_maybe_dynamic_dims", None) or ())
    static = tuple(getattr(t, "_kiln_static_dims", None) or ())
    return marked, maybe, static
