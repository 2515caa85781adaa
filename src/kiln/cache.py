"""Per-code-object caches of compiled entries, and the recompile policy.

A FrameCache holds the entries for one code object under one ``kiln.compile``'s settings
(``CompileSettings.key``: backend, fullgraph, dynamic, mode, options); its ``compiler``
(``kiln.api.Compiler``) carries those settings and compiles the further frames a
capture makes (continuations, callees at breaks).
A call (``CompiledFunction.__call__``) tries each entry's guard; the first that passes
runs its glue; ``FrameCache.miss`` handles the rest.  A miss
captures a new entry, up to ``config.recompile_limit`` entries; past that the frame
runs eagerly, with one warning naming the guard that failed.
"""
from __future__ import annotations

import time
import types

from . import persistent
from .capture import capture, frame_label, ShapePolicy
from .config import config
from .events import event, later
from .exc import ArgumentError, KilnError, RecompileError, RecompileLimitReached, Unsupported
from .runtime import caches, FALLEN_BACK
from .user_warnings import warn


class KilnWarning(UserWarning):
    """Warnings from Kiln (eager fallbacks, recompile limits)."""


class FrameCache:
    def __init__(self, code, compiler, name: str | None = None):
        self.code = code
        # the user's name for the frame (``capture.frame_label``): a decorator's wrapper is
        # named after the function it wraps, not the decorator's code
        self.name = name or getattr(code, "co_qualname", code.co_name)
        self.compiler = compiler
        self.settings = compiler.settings
        self.shapes = ShapePolicy(self.settings.dynamic)   # which sizes are symbolic (dynamic=)
        self.entries: list = []
        self.eager_reason: str | None = None   # set when the frame must run eagerly
        self.warned_limit = False
        self.stale = False                      # set by kiln.reset()
        self.disk_looked = False                # the persistent cache was read (first miss)

    # The hot part of a call (each entry's guard, then the glue of the first that passes)
    # is ``CompiledFunction.__call__`` (api.py), inline in one Python frame; it comes here
    # when every guard failed.
    def miss(self, fn, args, kwargs):
        """Every entry's guard failed: run eagerly, refuse, or capture a new entry."""
        if self.eager_reason is not None:
            return fn(*args, **kwargs)
        if not self.disk_looked and persistent.enabled():
            handed = self._load_from_disk(fn, args, kwargs)
            if handed is not None:
                entry, pre = handed
                return entry.run(pre, fn, *args, **kwargs)
        if self.entries and config.stance != "default":
            return self._stance_on_recompile(fn, args, kwargs)
        if len(self.entries) >= config.recompile_limit:
            return self._limit_reached(fn, args, kwargs)
        entry = self._capture(fn, args, kwargs)
        if entry is None:
            return fn(*args, **kwargs)
        return entry.run(entry.gather(fn, *args, **kwargs), fn, *args, **kwargs)

    def _load_from_disk(self, fn, args, kwargs):
        """The first miss with the persistent cache on: the entries stored for this frame
        join the cache; ``(entry, handed)`` for the first whose guard passes, else None."""
        self.disk_looked = True
        loaded = persistent.load(fn, self.compiler)
        self.entries.extend(loaded)
        for entry in loaded:
            handed = entry.guard(fn, *args, **kwargs)
            if handed is not False:
                return entry, handed
        return None

    def _stance_on_recompile(self, fn, args, kwargs):
        """A new entry is needed under a stance that forbids one (``kiln.set_stance``)."""
        if config.stance == "fail_on_recompile":
            reason = self.entries[-1].explain_guard(fn, *args, **kwargs)
            raise RecompileError(f"kiln: {self.name} ({self.code.co_filename}:{self.code.co_firstlineno}) "
                                 f"would recompile under set_stance('fail_on_recompile'): {reason}")
        return fn(*args, **kwargs)          # eager_on_recompile: this call runs as Python

    def _limit_reached(self, fn, args, kwargs):
        reason = self.entries[-1].explain_guard(fn, *args, **kwargs) if self.entries else "?"
        msg = (f"kiln: {self.name} ({self.code.co_filename}:{self.code.co_firstlineno}) reached the "
               f"recompile limit ({config.recompile_limit}); running it eagerly from now on. "
               f"Last guard that failed: {reason}")
        event("recompile_limit", code=self.code, message=msg, frame_name=self.name)
        if config.error_on_recompile_limit:
            raise RecompileLimitReached(msg)
        if not self.warned_limit:
            warn(msg, KilnWarning)
            self.warned_limit = True
        self.eager_reason = msg
        return fn(*args, **kwargs)

    def _capture(self, fn, args, kwargs):
        code = self.code
        if self.entries:
            newest = self.entries[-1]
            event("recompile", code=code, failing=later(lambda: newest.explain_guard(fn, *args, **kwargs)),
                  args=args, kwargs=kwargs, params=code.co_varnames[:code.co_argcount + code.co_kwonlyargcount],
                  frame_name=self.name)
        event("capture_start", code=code, cache=self, entry_index=len(self.entries),
              backend_name=self.settings.backend_name)
        start, entry = time.perf_counter(), None
        try:
            entry = capture(fn, args, kwargs, self.compiler, self.shapes)
        except Unsupported as e:
            if self.settings.fullgraph or e.fatal:   # a broken higher-order operator rule
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
            event("capture_end", seconds=None if entry is None else time.perf_counter() - start)
        self.entries.append(entry)
        if persistent.enabled():
            persistent.save(fn, entry, self.settings)
        return entry

    def _internal_error(self, e):
        if not config.suppress_errors:
            raise e
        self._fallback(f"internal error in Kiln: {type(e).__name__}: {e}", None, None)
        return None

    def _fallback(self, reason, location, source_line):
        event("fallback", code=self.code, reason=reason, location=location, source_line=source_line,
              frame_name=self.name)
        self.eager_reason = reason
        if config.warn_on_fallback:
            where = f" at {location}" if location else ""
            warn(f"kiln: running {self.name} eagerly: {reason}{where}", KilnWarning)


def guard_rejected_arguments(error: TypeError, caller) -> bool:
    """Whether ``error`` was raised by binding the arguments to a guard or glue function
    itself: the traceback's last frame is the caller's (code object ``caller``), so the
    generated function's body never started."""
    tb = error.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code is caller


_CACHES: dict = {}
_VARIANTS: dict = {}          # (code, *CompileSettings.key()) -> number of closure variants made
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


def _forget_fallbacks(raise_on_backend_error: bool) -> None:
    """``kiln.config.raise_on_backend_error`` turned on: the entries whose graph fell back
    to eager (``runtime.fallback.FALLEN_BACK``) are dropped, so the next call compiles the
    frame again and the backend's error is raised, as the setting says (a cached fallback
    would keep running eagerly, silently)."""
    if not raise_on_backend_error or not FALLEN_BACK:
        return
    for frame_cache in _CACHES.values():
        frame_cache.entries = [e for e in frame_cache.entries if e.name not in FALLEN_BACK]
    FALLEN_BACK.clear()


config.watch("raise_on_backend_error", _forget_fallbacks)


def cache_for(code, compiler, variant: tuple = (), fn=None) -> FrameCache:
    """The frame cache of ``code`` under ``compiler``'s settings (``CompileSettings.key``)
    and closure ``variant`` (``closure_key``); a new one is named after ``fn``
    (``capture.frame_label``) when given."""
    base = (code,) + compiler.settings.key()
    key = base + (variant,)
    c = _CACHES.get(key)
    if c is None:
        if variant and _VARIANTS.get(base, 0) >= MAX_CLOSURE_VARIANTS:
            return cache_for(code, compiler, fn=fn)
        if variant:
            _VARIANTS[base] = _VARIANTS.get(base, 0) + 1
        c = _CACHES[key] = FrameCache(code, compiler, frame_label(fn) if fn is not None else None)
    return c


def reset_caches():
    """Forget every frame cache (``kiln.reset``): a compiled function holding one sees it is
    stale on its next call and looks its cache up again."""
    for c in _CACHES.values():
        c.stale = True
    _CACHES.clear()
    _VARIANTS.clear()


caches.register("cache.frame_caches", reset_caches, _CACHES.__len__)
