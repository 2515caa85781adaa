"""The user-facing entry points: ``compile`` and ``reset`` (``disable`` and ``graph_break``
are re-exported from ``markers``, where the capture layer can see them).

``compile`` wraps a function or module; nothing is traced until the first call.
A compiled module is an instance of a per-module subclass of the module's own class
that shares the original's ``__dict__``: parameters, buffers, ``state_dict`` keys,
``train()``/``eval()``, attributes and ``repr`` are the original module's, and only
``forward`` is the compiled one.  Classes made at run time (FSDP2's ``fully_shard``,
``parametrize``) are subclassed the same way; see ``_compile_module``.

Every backend is handed graphs through ``backends.ddp_split.BucketSplittingBackend``,
which splits the graphs compiled inside a DistributedDataParallel forward at bucket
boundaries (the layout comes from ``distributed.ddp``) and passes the others through.
"""
from __future__ import annotations

import functools
import types
import weakref

import torch

from . import backends as _backends
from .backends import BucketSplittingBackend, options_hook
from .cache import cache_for, closure_key, guard_rejected_arguments
from .compile_settings import TORCH_COMPILE_MODES, CompileSettings, freeze_options
from .config import config
from .distributed.ddp import active_bucket_layout
from .distributed.module_state import share_module_state
from .markers import UNBOUND, CompiledFunctionBase, disable, graph_break, is_disabled  # noqa: F401 - re-exported
from .metrics import metrics
from .persistent import settings_key
from .persistent_recipes import register_made_kind
from .runtime import caches, has_hooks


class Compiler:
    """One ``kiln.compile`` call's settings, and how Kiln compiles further frames under them.

    The capture layer receives this object (see ``capture.frames.graph_break.FrameCompiler``)
    so that a graph break's continuations and the callee of a breaking call become
    compiled frames of their own without capture importing this module.
    """

    def __init__(self, settings: CompileSettings):
        self.settings = settings
        self.graph_backend = _graph_backend(settings)   # what graphs are compiled with
        self._nested = None

    def compile_function(self, fn) -> "CompiledFunction":
        """A continuation: a new function over generated code, compiled as its own frame."""
        return CompiledFunction(fn, self.nested())

    def compile_callee(self, obj):
        """The compiled version of a callee at a graph break (plain callables pass through)."""
        if isinstance(obj, CompiledFunction):
            return obj
        if isinstance(obj, torch.nn.Module):
            forward = obj.__dict__.get("forward", type(obj).forward)
            if has_hooks(obj) or not isinstance(forward, types.FunctionType):
                return obj
            return CompiledFunction(forward, self.nested(), bound_self=obj)
        if isinstance(obj, types.MethodType) and isinstance(obj.__func__, types.FunctionType):
            return CompiledFunction(obj.__func__, self.nested(), bound_self=obj.__self__)
        if isinstance(obj, types.FunctionType) and not is_disabled(obj):
            return CompiledFunction(obj, self.nested())
        return obj

    def nested(self) -> "Compiler":
        """The compiler of the frames a break makes (``CompileSettings.for_nested_frames``)."""
        if self._nested is None:
            nested = self.settings.for_nested_frames()
            self._nested = self if nested is self.settings else Compiler(nested)
        return self._nested


# (backend, mode, options) -> the backend graphs are compiled with (keeps the backend alive)
_GRAPH_BACKENDS: dict = caches.register_dict("api.graph_backends", {})


def _graph_backend(settings: CompileSettings):
    """The backend under the settings' mode and options (its ``with_options``, checked by
    ``_settings``), behind the DDP bucket splitter (``backends/ddp_split.py``), which
    splits graphs compiled inside a DistributedDataParallel forward and passes others
    through.

    One per backend and mode/options, shared by every ``kiln.compile`` asking for the
    same; keeping the user's backend alive here keeps its ``id`` in cache keys
    (``CompileSettings.key``) from being reused.
    """
    def build():
        backend = settings.backend
        if settings.asks_backend:
            backend = options_hook(backend)(settings.mode, settings.options_dict())
        return BucketSplittingBackend(backend, active_bucket_layout)

    try:
        key = (settings.backend, settings.mode, settings.options_key())
        wrapped = _GRAPH_BACKENDS.get(key)
    except TypeError:          # an unhashable callable: a splitter of its own
        return build()
    if wrapped is None:
        wrapped = _GRAPH_BACKENDS[key] = build()
    return wrapped


class CompiledFunction(CompiledFunctionBase):
    """A function whose calls go through Kiln's cache."""

    def __init__(self, fn, compiler: Compiler, bound_self=UNBOUND):
        self._kiln_fn = fn
        self._kiln_self = bound_self
        self._kiln_compiler = compiler
        self._kiln_variant = closure_key(fn)
        self._kiln_cache = cache_for(fn.__code__, compiler, self._kiln_variant, fn)
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        # The hot path of every call, in this one Python frame (no further layer): try
        # each entry's guard, run the glue of the first that passes; the rest (a miss, a
        # stance, the recompile limit) is ``FrameCache.miss``.
        fn = self._kiln_fn
        if self._kiln_self is not UNBOUND:
            args = (self._kiln_self, *args)
        cache = self._kiln_cache
        if cache.stale:
            cache = self._kiln_cache = cache_for(fn.__code__, self._kiln_compiler, self._kiln_variant, fn)
        if config.stance == "force_eager":
            return fn(*args, **kwargs)
        try:
            for e in cache.entries:
                handed = e.guard(fn, *args, **kwargs)
                if handed is not False:
                    return e.run(handed, fn, *args, **kwargs)
        except TypeError as error:
            if not guard_rejected_arguments(error, CompiledFunction.__call__.__code__):
                raise
        else:
            return cache.miss(fn, args, kwargs)
        # the arguments do not fit the frame's signature (guards never raise otherwise):
        # the call runs as Python, outside the except (no chained guard error), which
        # raises eager's TypeError naming the user's function with its own counts
        return fn(*args, **kwargs)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __repr__(self):
        return f"<kiln compiled {self._kiln_fn.__qualname__} backend={self._kiln_compiler.settings.backend_name!r}>"

    @property
    def entries(self):
        return list(self._kiln_cache.entries)


def _settings(backend, fullgraph, dynamic, mode, options) -> CompileSettings:
    """``kiln.compile``'s arguments as one checked settings object.

    ``mode`` and ``options`` have torch.compile's meaning, which only a backend with a
    notion of them gives (``backends.contract.options_hook``: inductor's); the others
    refuse them here, naming what was passed and where they apply, as does the backend
    for a mode or option it does not know."""
    fn = _backends.lookup(backend)
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", type(backend).__name__)
    settings = CompileSettings(fn, name, fullgraph, dynamic, mode, freeze_options(options))
    if mode is not None and options:
        raise ValueError(f"kiln.compile: give mode ({mode!r}) or options ({options!r}), not both "
                         f"(torch.compile refuses both at once too)")
    if settings.asks_backend:
        hook = options_hook(fn)
        if hook is None:
            asked = ", ".join(([f"mode={mode!r}"] if settings.mode not in (None, "default") else [])
                              + ([f"options={options!r}"] if options else []))
            raise ValueError(f"kiln.compile: backend {name!r} has no notion of mode or options (got {asked}); "
                             f"modes ({', '.join(map(repr, TORCH_COMPILE_MODES))}) and options (inductor "
                             f"config) are inductor's: use backend='inductor', or leave them out")
        hook(mode, settings.options_dict())     # raises ValueError naming what it does not accept
    return settings


def compile(fn=None, *, backend="eager", fullgraph=False, dynamic=None, mode=None, options=None,  # noqa: A001
            **unknown):
    """Compile ``fn`` (a function, method or ``nn.Module``) with Kiln (mirrors torch.compile).

    Usable as ``kiln.compile(f)``, ``@kiln.compile`` and ``@kiln.compile(backend=...)``.
    ``dynamic``: None (default) compiles static first and makes sizes and int arguments
    that change symbolic on recompiling; True makes every input dimension symbolic from
    the start; False never introduces symbols.  ``mode`` ("default", "reduce-overhead",
    "max-autotune", "max-autotune-no-cudagraphs") and ``options`` (a dict of inductor
    config settings) mean what they mean to torch.compile, for ``backend="inductor"``;
    other backends refuse them (``_settings``).
    """
    if unknown:
        raise TypeError(f"kiln.compile() got unexpected option(s) {sorted(unknown)}; "
                        f"supported: backend, fullgraph, dynamic, mode, options")
    settings = _settings(backend, fullgraph, dynamic, mode, options)
    if fn is None:
        return lambda f: _compile_callable(f, Compiler(settings))
    return _compile_callable(fn, Compiler(settings))


def _compile_callable(fn, compiler: Compiler):
    if isinstance(fn, CompiledFunction):
        fn = fn._kiln_fn if fn._kiln_self is UNBOUND else types.MethodType(fn._kiln_fn, fn._kiln_self)
    if isinstance(fn, torch.nn.Module):
        return _compile_module(fn, compiler)
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, (types.FunctionType, CompiledFunction)):
        func = fn.__func__._kiln_fn if isinstance(fn.__func__, CompiledFunction) else fn.__func__
        return CompiledFunction(func, compiler, bound_self=fn.__self__)
    if isinstance(fn, types.FunctionType):
        return CompiledFunction(fn, compiler)
    if isinstance(fn, functools.partial):
        inner = _compile_callable(fn.func, compiler)
        return functools.partial(inner, *fn.args, **fn.keywords)
    if isinstance(fn, functools._lru_cache_wrapper):
        # the C wrapper calls the Python function it holds, never a compiled one: put a
        # cache of the same kind in front of the compiled function instead, so hits return
        # the cached object as eager does and the compiled code runs on misses (the new
        # cache is this compiled function's own)
        params = fn.cache_parameters()
        inner = _compile_callable(fn.__wrapped__, compiler)
        return functools.lru_cache(maxsize=params["maxsize"], typed=params["typed"])(inner)
    if isinstance(fn, type):    # a class: its call constructs, which is not what the user means
        raise TypeError(f"kiln.compile got the class {fn.__qualname__}; pass an instance: kiln.compile({fn.__name__}(...))")
    if not callable(fn):
        raise TypeError(f"kiln.compile expects a function, method or nn.Module, got {type(fn).__name__}")
    call = getattr(type(fn), "__call__", None)
    if isinstance(call, types.FunctionType):
        return CompiledFunction(call, compiler, bound_self=fn)
    raise TypeError(f"kiln.compile cannot compile {fn!r}: it is not Python code (a builtin or C function)")


# (class, forward) + CompileSettings.key() -> wrapper class
_WRAPPER_CLASSES: dict = caches.register_dict("api.wrapper_classes", {})
# compiled module -> the module it wraps: not a cache (a compiled module keeps its
# original across kiln.reset()), so not registered
_ORIGINALS = weakref.WeakKeyDictionary()


def original_module(mod: torch.nn.Module) -> torch.nn.Module:
    """The module a compiled module wraps (``mod`` itself when it is not one)."""
    if type(mod).__dict__.get("_kiln_compiled_module_class"):
        return _ORIGINALS.get(mod, mod)
    return mod


def _compile_module(mod: torch.nn.Module, compiler: Compiler):
    mod = original_module(mod)
    cls = type(mod)
    forward = mod.__dict__.get("forward", cls.forward)
    if isinstance(forward, types.MethodType):
        forward = forward.__func__
    if not isinstance(forward, types.FunctionType):
        raise TypeError(f"kiln.compile: {cls.__name__}.forward is not a Python function")
    wrapper = object.__new__(_wrapper_class(cls, forward, compiler))
    object.__setattr__(wrapper, "__dict__", mod.__dict__)
    _ORIGINALS[wrapper] = mod
    share_module_state(mod, wrapper)
    return wrapper


def _wrapper_class_parts(obj):
    """A compiled module class as what makes it again in a new process (the persistent
    cache's recipes): the original class, its forward and the settings, which must be
    the loading frame's own."""
    if not (isinstance(obj, type) and obj.__dict__.get("_kiln_compiled_module_class")):
        return None
    compiled = obj.__dict__["forward"]
    return obj.__mro__[1], compiled._kiln_fn, settings_key(compiled._kiln_compiler.settings)


def _remade_wrapper_class(compiler: Compiler, cls: type, forward, settings: tuple) -> type:
    if settings_key(compiler.settings) != settings:
        raise ValueError("a compiled module class of other compile settings than the loading frame's")
    return _wrapper_class(cls, forward, compiler)


register_made_kind("compiled_module_class", _wrapper_class_parts, _remade_wrapper_class)


def _wrapper_class(cls: type, forward, compiler: Compiler) -> type:
    """The class of compiled modules of ``cls``: ``cls`` with the compiled ``forward``.

    One class per class, forward and settings (``CompileSettings.key``), shared by every instance
    compiled alike, so that a fresh model of the same class passes the entries' guards
    (``type(self) is ...``) and reuses their graphs; the class holds no reference to any
    instance (the original of each compiled module is in ``_ORIGINALS``, weakly keyed),
    so a compiled model is freed with its last user reference.  Classes made at run
    time (FSDP2) get one each and live as long as the process, as their entries do.
    """
    key = (cls, forward) + compiler.settings.key()
    sub = _WRAPPER_CLASSES.get(key)
    if sub is not None:
        return sub
    compiled_forward = CompiledFunction(forward, compiler)

    def __new__(klass, *args, **kwargs):
        # Calling the compiled module's class again (a container slicing itself does
        # ``type(self)(...)``) builds a plain module of the original class: the compiled
        # class only makes sense for the wrappers ``_compile_module`` makes.  Going
        # through ``cls(...)`` also runs any ``__new__`` the class has (FSDP2's finds the
        # original class by its position in the MRO, which this extra class would shift).
        if klass is sub:
            return cls(*args, **kwargs)
        base_new = super(sub, klass).__new__
        # object.__new__ refuses arguments once a class defines __new__ (this one does)
        return base_new(klass) if base_new is object.__new__ else base_new(klass, *args, **kwargs)

    sub = type(cls.__name__, (cls,), {
        "forward": compiled_forward,
        "_kiln_compiled_module_class": True,
        "__new__": __new__,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__reduce_ex__": lambda self, protocol: original_module(self).__reduce_ex__(protocol),
    })
    # Wrappers are made with object.__new__, not the class's own __new__: a class made at
    # run time (FSDP2, parametrize) or one that overrides __new__ would build or
    # initialise a new module, and the wrapper is only a shell around the original's
    # __dict__.
    _WRAPPER_CLASSES[key] = sub
    return sub


class set_stance:
    """``kiln.set_stance(stance)``: what compiled functions do from now on, with
    ``torch.compiler.set_stance``'s meaning (``kiln.config.stance`` lists them):
    ``"default"``, ``"force_eager"``, ``"eager_on_recompile"``, ``"fail_on_recompile"``.
    Also a context manager (``with kiln.set_stance("force_eager"): ...``) that puts the
    previous stance back on exit, and a decorator (``@kiln.set_stance("force_eager")``)
    that sets the stance for each call of the function only.

    Why the decorator puts the stance back at once: the call that builds the decorator
    has already set the stance (that is the plain call's meaning), but decorating a
    function must not change what every other compiled function does from then on."""

    def __init__(self, stance: str = "default"):
        self.previous = config.stance
        config.stance = stance          # validated by config: one of config.STANCES
        self.stance = stance

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        config.stance = self.previous
        return False

    def __call__(self, fn):
        config.stance = self.previous
        if not callable(fn):
            raise TypeError(f"kiln.set_stance({self.stance!r}) decorates a function; got {type(fn).__name__}")
        stance = self.stance

        @functools.wraps(fn)
        def with_stance(*args, **kwargs):
            with set_stance(stance):
                return fn(*args, **kwargs)

        return with_stance


def reset() -> None:
    """Forget every compiled entry and zero the metrics: every process-wide cache is
    registered with ``runtime.caches`` by its owner, and emptied here at once."""
    caches.reset_all()
    metrics.reset()
