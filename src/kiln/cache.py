"""Per-code-object caches of compiled entries, and the recompile policy.

A FrameCache holds the entries for one (code object, backend, fullgraph) triple; its
``compiler`` (``kiln.api.Compiler``) names the backend and compiles the further frames
a capture makes (continuations, callees at breaks).
A call tries each entry's guard; the first that passes runs its glue.  A miss
captures a new entry, up to ``config.recompile_limit`` entries; past that the frame
runs eagerly, with one warning naming the guard that failed.
"""
from __future__ import annotations

import types
import warnings

from . import trace
from .capture.compile_frame import capture
from .capture.dynamism import ShapePolicy
from .config import config
from .exc import ArgumentError, KilnError, RecompileLimitReached, Unsupported
from .metrics import BreakRecord, metrics
from .runtime import caches


class KilnWarning(UserWarning):
    """Warnings from Kiln (eager fallbacks, recompile limits)."""


class FrameCache:
    def __init__(self, code, compiler, fullgraph: bool):
        self.code = code
        self.compiler = compiler
        self.fullgraph = fullgraph
        self.shapes = ShapePolicy(compiler.dynamic)   # which sizes are symbolic (dynamic=)
        self.entries: list = []
        self.eager_reason: str | None = None   # set when the frame must run eagerly
        self.warned_limit = False
        self.stale = False                      # set by kiln.reset()

    def call(self, fn, args, kwargs):
        for e in self.entries:
            handed = e.guard(fn, *args, **kwargs)
            if handed is not False:
                return e.run(handed, fn, *args, **kwargs)
        if self.eager_reason is not None:
            return fn(*args, **kwargs)
        if len(self.entries) >= config.recompile_limit:
            return self._limit_reached(fn, args, kwargs)
        entry = self._capture(fn, args, kwargs)
        if entry is None:
            return fn(*args, **kwargs)
        return entry.run(entry.gather(fn, *args, **kwargs), fn, *args, **kwargs)

    def _limit_reached(self, fn, args, kwargs):
        reason = self.entries[-1].explain_guard(fn, *args, **kwargs) if self.entries else "?"
        msg = (f"kiln: {self.code.co_name} ({self.code.co_filename}:{self.code.co_firstlineno}) reached the "
               f"recompile limit ({config.recompile_limit}); running it eagerly from now on. "
               f"Last guard that failed: {reason}")
        trace.recompile_limit(self.code, msg)
        if config.error_on_recompile_limit:
            raise RecompileLimitReached(msg)
        if not self.warned_limit:
            warnings.warn(msg, KilnWarning, stacklevel=4)
            self.warned_limit = True
        self.eager_reason = msg
        return fn(*args, **kwargs)

    def _capture(self, fn, args, kwargs):
        if self.entries:
            metrics.recompiles += 1
            if trace.active():
                trace.recompile(self.code, self.entries[-1].explain_guard(fn, *args, **kwargs), args, kwargs,
                                self.code.co_varnames[:self.code.co_argcount + self.code.co_kwonlyargcount])
            if config.log_enabled("recompiles"):
                reason = self.entries[-1].explain_guard(fn, *args, **kwargs)
                print(f"[kiln] recompiling {self.code.co_name}: {reason}")
        trace.capture_start(self.code, self, len(self.entries), self.compiler.backend_name)
        try:
            entry = capture(fn, args, kwargs, self.compiler, self.fullgraph, self.shapes)
        except Unsupported as e:
            if self.fullgraph or e.fatal:   # a broken higher-order operator rule
                raise
            self._fallback(f"{e.reason}", e.location, e.source_line)
            return None
        except KilnError:
            raise
        except ArgumentError:
            return None   # the call runs as Python, which raises its own TypeError (type and message)
        except Exception as e:  # a bug in Kiln: never let it take the user's program down
            return self._internal_error(e)
        finally:
            trace.capture_end()
        self.entries.append(entry)
        return entry

    def _internal_error(self, e):
        if not config.suppress_errors:
            raise e
        self._fallback(f"internal error in Kiln: {type(e).__name__}: {e}", None, None)
        return None

    def _fallback(self, reason, location, source_line):
        metrics.eager_fallbacks += 1
        metrics.breaks.append(BreakRecord(reason, location, source_line))
        trace.fallback(self.code, reason, location, source_line)
        self.eager_reason = reason
        if config.warn_on_fallback:
            where = f" at {location}" if location else ""
            warnings.warn(f"kiln: running {self.code.co_name} eagerly: {reason}{where}", KilnWarning, stacklevel=5)


_CACHES: dict = {}
_VARIANTS: dict = {}          # (code, backend, fullgraph) -> number of closure variants made
MAX_CLOSURE_VARIANTS = 32


def closure_key(fn) -> tuple:
    """What separates functions that share one code object but wrap different code.

    Decorator wrappers (``functools.wraps`` closures) have one code object for every
    function they decorate; the decorated function sits in a closure cell.  Giving
    each such variant its own cache keeps one module class's entries from counting
    against another's recompile limit.  Only module- or class-level functions count,
    so closures made afresh on every call still share one cache.
    """
    cells = fn.__closure__
    if not cells:
        return ()
    key = []
    for cell in cells:
        try:
            contents = cell.cell_contents
        except ValueError:
            continue
        if isinstance(contents, types.FunctionType) and "<locals>" not in contents.__qualname__:
            key.append(id(contents))
    return tuple(key)


def cache_for(code, compiler, fullgraph, variant: tuple = ()) -> FrameCache:
    base = (code, id(compiler.backend), fullgraph, compiler.dynamic)
    key = base + (variant,)
    c = _CACHES.get(key)
    if c is None:
        if variant and _VARIANTS.get(base, 0) >= MAX_CLOSURE_VARIANTS:
            return cache_for(code, compiler, fullgraph)
        if variant:
            _VARIANTS[base] = _VARIANTS.get(base, 0) + 1
        c = _CACHES[key] = FrameCache(code, compiler, fullgraph)
    return c


def reset_caches():
    """Forget every frame cache (``kiln.reset``): a compiled function holding one sees it is
    stale on its next call and looks its cache up again."""
    for c in _CACHES.values():
        c.stale = True
    _CACHES.clear()
    _VARIANTS.clear()


caches.register("cache.frame_caches", reset_caches, _CACHES.__len__)
