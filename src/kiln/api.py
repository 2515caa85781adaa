"""The user-facing entry points: ``compile``, ``reset``, ``disable``, ``graph_break``.

``compile`` wraps a function or module; nothing is traced until the first call.
A compiled module is an instance of a per-module subclass of the module's own class
that shares the original's ``__dict__``: parameters, buffers, ``state_dict`` keys,
``train()``/``eval()``, attributes and ``repr`` are the original module's, and only
``forward`` is the compiled one.
"""
from __future__ import annotations

import functools
import types

import torch

from . import backends as _backends
from .cache import cache_for, closure_key, reset_caches
from .metrics import metrics

_NOTHING = object()


class CompiledFunction:
    """A function whose calls go through Kiln's cache."""

    def __init__(self, fn, backend, backend_name: str, fullgraph: bool, bound_self=_NOTHING):
        self._kiln_fn = fn
        self._kiln_self = bound_self
        self._kiln_backend_name = backend_name
        self._kiln_fullgraph = fullgraph
        self._kiln_variant = closure_key(fn)
        self._kiln_cache = cache_for(fn.__code__, backend, backend_name, fullgraph, self._kiln_variant)
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        if self._kiln_self is not _NOTHING:
            args = (self._kiln_self, *args)
        cache = self._kiln_cache
        if cache.stale:
            cache = self._kiln_cache = cache_for(self._kiln_fn.__code__, cache.backend, cache.backend_name,
                                                 cache.fullgraph, self._kiln_variant)
        return cache.call(self._kiln_fn, args, kwargs)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __repr__(self):
        return f"<kiln compiled {self._kiln_fn.__qualname__} backend={self._kiln_backend_name!r}>"

    @property
    def entries(self):
        return list(self._kiln_cache.entries)


def _validate(backend, fullgraph):
    if not isinstance(fullgraph, bool):
        raise TypeError(f"kiln.compile: fullgraph must be a bool, got {type(fullgraph).__name__}")
    fn = _backends.lookup(backend)
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", type(backend).__name__)
    return fn, name


def compile(fn=None, *, backend="eager", fullgraph=False, **options):  # noqa: A001 - mirrors torch.compile
    """Compile ``fn`` (a function, method or ``nn.Module``) with Kiln.

    Usable as ``kiln.compile(f)``, ``@kiln.compile`` and ``@kiln.compile(backend=...)``.
    """
    if options:
        raise TypeError(f"kiln.compile() got unexpected option(s) {sorted(options)}; "
                        f"supported: backend, fullgraph")
    backend_fn, backend_name = _validate(backend, fullgraph)
    if fn is None:
        return lambda f: compile(f, backend=backend, fullgraph=fullgraph)
    return _compile_callable(fn, backend_fn, backend_name, fullgraph)


def _compile_callable(fn, backend_fn, backend_name, fullgraph):
    if isinstance(fn, CompiledFunction):
        fn = fn._kiln_fn if fn._kiln_self is _NOTHING else types.MethodType(fn._kiln_fn, fn._kiln_self)
    if isinstance(fn, torch.nn.Module):
        return _compile_module(fn, backend_fn, backend_name, fullgraph)
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, (types.FunctionType, CompiledFunction)):
        func = fn.__func__._kiln_fn if isinstance(fn.__func__, CompiledFunction) else fn.__func__
        return CompiledFunction(func, backend_fn, backend_name, fullgraph, bound_self=fn.__self__)
    if isinstance(fn, types.FunctionType):
        return CompiledFunction(fn, backend_fn, backend_name, fullgraph)
    if isinstance(fn, functools.partial):
        inner = _compile_callable(fn.func, backend_fn, backend_name, fullgraph)
        return functools.partial(inner, *fn.args, **fn.keywords)
    if not callable(fn):
        raise TypeError(f"kiln.compile expects a function, method or nn.Module, got {type(fn).__name__}")
    call = getattr(type(fn), "__call__", None)
    if isinstance(call, types.FunctionType):
        return CompiledFunction(call, backend_fn, backend_name, fullgraph, bound_self=fn)
    raise TypeError(f"kiln.compile cannot compile {fn!r}: it is not Python code (a builtin or C function)")


def _compile_module(mod: torch.nn.Module, backend_fn, backend_name, fullgraph):
    if getattr(type(mod), "_kiln_orig_mod", None) is not None:
        mod = type(mod)._kiln_orig_mod
    cls = type(mod)
    forward = mod.__dict__.get("forward", cls.forward)
    if isinstance(forward, types.MethodType):
        forward = forward.__func__
    if not isinstance(forward, types.FunctionType):
        raise TypeError(f"kiln.compile: {cls.__name__}.forward is not a Python function")
    compiled_forward = CompiledFunction(forward, backend_fn, backend_name, fullgraph)
    sub = type(cls.__name__, (cls,), {
        "forward": compiled_forward,
        "_kiln_orig_mod": mod,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__reduce_ex__": lambda self, protocol: mod.__reduce_ex__(protocol),
    })
    wrapper = sub.__new__(sub)
    object.__setattr__(wrapper, "__dict__", mod.__dict__)
    return wrapper


def has_hooks(mod: torch.nn.Module) -> bool:
    """Whether calling ``mod`` runs hooks (its own or global): then it must be called as a
    module, not by its compiled forward."""
    g = torch.nn.modules.module
    return bool(mod._forward_hooks or mod._forward_pre_hooks or mod._backward_hooks
                or getattr(mod, "_backward_pre_hooks", None) or g._global_forward_hooks
                or g._global_forward_pre_hooks or g._global_backward_hooks or g._global_backward_pre_hooks)


def compile_callee(obj, backend, backend_name):
    """The compiled version of a callee at a graph break (plain callables pass through)."""
    if isinstance(obj, CompiledFunction):
        return obj
    if isinstance(obj, torch.nn.Module):
        forward = obj.__dict__.get("forward", type(obj).forward)
        if has_hooks(obj) or not isinstance(forward, types.FunctionType):
            return obj
        return CompiledFunction(forward, backend, backend_name, False, bound_self=obj)
    if isinstance(obj, types.MethodType) and isinstance(obj.__func__, types.FunctionType):
        return CompiledFunction(obj.__func__, backend, backend_name, False, bound_self=obj.__self__)
    if isinstance(obj, types.FunctionType) and not getattr(obj, "_kiln_disable", False) \
            and not getattr(obj, "_torchdynamo_disable", False):
        return CompiledFunction(obj, backend, backend_name, False)
    return obj


def reset() -> None:
    """Forget every compiled entry and zero the metrics."""
    from .capture.graph_break import _CalleeCompiler
    reset_caches()
    _CalleeCompiler._memo.clear()
    metrics.reset()


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


def graph_break() -> None:
    """Force a graph break here (a no-op when not compiling)."""
