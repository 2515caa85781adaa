"""Context managers Kiln models: the grad-mode switches (``no_grad``, ``enable_grad``,
``set_grad_enabled``, ``inference_mode``, as objects, classes and decorators) and the
``__exit__`` that BEFORE_WITH leaves on the stack for a modelled context.

Entering a modelled context changes the real grad mode while tracing (so fake tensors
get the right ``requires_grad``) and records the switch in the graph; a with-block
that a graph break splits is entered again by the glue (``reconstruct_entered_exit``).
"""
from __future__ import annotations

import torch

from ...exc import Unsupported
from ...runtime import entered_autocast_exit, entered_grad_exit, entered_inference_exit, no_exit
from ..basics import AttrSource
from .base import Value, const


class WithExit(Value):
    """The ``__exit__`` that BEFORE_WITH leaves on the stack for a modelled context."""

    def __init__(self, ctx):
        self.ctx = ctx

    def describe(self):
        return f"exit of {self.ctx.describe()}"

    def call(self, tx, args, kwargs):
        if tx.context_stack and tx.context_stack[-1] is self.ctx:
            tx.context_stack.pop()
        return self.ctx.exit(tx)

    def reconstruct(self, cg):
        enter_again = getattr(self.ctx, "reconstruct_entered_exit", None)
        if enter_again is None:
            raise Unsupported(f"a graph break inside `with {self.ctx.describe()}` cannot be resumed")
        return cg.new_object(self, enter_again(cg))


class GradModeValue(Value):
    """``torch.no_grad()`` / ``enable_grad()`` / ``set_grad_enabled(b)`` as a context manager.

    Entering records ``torch._C._set_grad_enabled(mode)`` in the graph and switches
    the real grad mode while tracing so fake tensors get the right requires_grad.
    """

    def __init__(self, mode: bool):
        self.mode = mode
        self.prior = None

    def python_type(self):
        return torch.no_grad if not self.mode else torch.enable_grad

    def describe(self):
        return f"grad mode {'on' if self.mode else 'off'}"

    def enter(self, tx):
        if getattr(self, "entered_on_call", False):
            # torch.set_grad_enabled(b) already switched when it was called
            self.entered_on_call = False
            return const(None)
        self.prior = torch.is_grad_enabled()
        tx.state.set_grad_mode(self.mode)
        return const(None)

    def exit(self, tx):
        tx.state.set_grad_mode(self.prior)
        return const(None)

    def getattr(self, tx, name):
        if name == "__class__":   # the decorator form re-creates the context per call
            return tx.wrap(self.python_type(), None)
        return super().getattr(tx, name)

    def call(self, tx, args, kwargs):
        # used as a decorator: @torch.no_grad() on a function made in the frame
        if len(args) == 1 and not kwargs:
            return GradModeWrappedFunction(self.mode, args[0])
        raise Unsupported("calling a grad-mode context manager object")

    def reconstruct(self, cg):
        return f"{cg.ref(torch.enable_grad if self.mode else torch.no_grad)}()"

    def reconstruct_entered_exit(self, cg) -> str:
        """The ``__exit__`` of this context, entered again (a with-block that spans a graph break).

        It restores the mode from before the with-block, not the one the glue runs under
        (a continuation inside the block runs with the block's mode already on)."""
        if getattr(self, "inference", False):
            return f"{cg.ref(entered_inference_exit)}()"
        if self.prior is None:
            return f"{cg.ref(torch.set_grad_enabled)}({self.mode}).__exit__"
        return f"{cg.ref(entered_grad_exit)}({self.mode}, {self.prior})"


def wrap_grad_mode_exit(tx, method, source):
    """The ``__exit__`` of a real grad-mode context entered before this frame began
    (a with-block that a graph break split): calling it restores the saved mode."""
    owner = method.__self__
    if method.__name__ != "__exit__" or not isinstance(owner, (torch.no_grad, torch.enable_grad,
                                                                 torch.set_grad_enabled)):
        return None
    prev = getattr(owner, "prev", None)
    if not isinstance(prev, bool):
        return None
    if source is not None:
        tx.state.guards.type_is(source, method)
        tx.state.guards.constant(AttrSource(AttrSource(source, "__self__"), "prev"), prev)
    ctx = GradModeValue(torch.is_grad_enabled())
    ctx.prior = prev
    return WithExit(ctx)


class GradModeWrappedFunction(Value):
    def __init__(self, mode, fn):
        self.mode, self.fn = mode, fn

    def call(self, tx, args, kwargs):
        ctx = GradModeValue(self.mode)
        ctx.enter(tx)
        try:
            return self.fn.call(tx, args, kwargs)
        finally:
            ctx.exit(tx)


class GradModeClassValue(Value):
    def __init__(self, cls, source=None):
        self.cls = cls
        self.source = source

    def real_object(self):
        return self.cls

    def python_type(self):
        return type

    def call(self, tx, args, kwargs):
        cls = self.cls
        if cls is torch.no_grad:
            return GradModeValue(False)
        if cls is torch.enable_grad:
            return GradModeValue(True)
        if cls is torch.set_grad_enabled:
            mode = (args[0] if args else kwargs["mode"]).as_constant()
            v = GradModeValue(bool(mode))
            # set_grad_enabled(b) also acts immediately when not used in a with-statement
            v.enter(tx)
            v.entered_on_call = True
            return v
        if cls is torch.inference_mode:
            mode = args[0].as_constant() if args else kwargs.get("mode", const(True)).as_constant()
            v = GradModeValue(not mode)
            v.inference = bool(mode)   # re-entered as inference mode at a graph break
            return v
        raise Unsupported(f"{cls.__name__} as a context manager")

    def reconstruct(self, cg):
        return cg.ref(self.cls)


class AnnotationContextValue(Value):
    """``torch.autograd.profiler.record_function(name)``: a label for the profiler, no
    effect on any value.  Inside a graph the label is dropped (the graph's ops are not
    attributed to it in a profile; torch.compile drops it as well), so the block is
    traced as if the with-statement were not there."""

    def __init__(self, cls):
        self.cls = cls

    def describe(self):
        return f"{self.cls.__qualname__} (profiler label)"

    def enter(self, tx):
        return self

    def exit(self, tx):
        return const(None)

    def reconstruct_entered_exit(self, cg) -> str:
        return cg.ref(no_exit)


ANNOTATION_CONTEXTS = (torch.autograd.profiler.record_function,)


class AnnotationContextClassValue(GradModeClassValue):
    def call(self, tx, args, kwargs):
        return AnnotationContextValue(self.cls)


class AutocastValue(Value):
    """``torch.autocast(...)`` / ``torch.amp.autocast`` / ``torch.cpu.amp.autocast`` built
    in the frame (or read from outside it) and used in a with-statement.

    Like grad mode, autocast is recorded in the graph: entering records
    ``torch.amp.autocast_mode._enter_autocast(device, dtype, enabled, cache_enabled)``
    (the node is the mode object) and exiting ``_exit_autocast(node)``, the pair torch's
    own tracers put in graphs, which every backend runs or retraces.  The real autocast
    state is switched while tracing too, so fake tensors get eager's dtypes.  A graph
    ends with every autocast it entered exited (``CaptureState.close_autocast``); a
    with-block that a break splits is entered again by the glue, with the same settings.
    """

    def __init__(self, real):
        self.real = real   # a real, never-entered autocast object holding the resolved settings
        self.node = None
        self.entered = None

    def settings(self) -> tuple:
        r = self.real
        return (r.device, r.fast_dtype, r._enabled, r._cache_enabled)

    def python_type(self):
        return type(self.real)

    def describe(self):
        device, dtype, enabled, _ = self.settings()
        return f"autocast({device!r}, {dtype}, enabled={enabled})"

    def enter(self, tx):
        self.node = tx.state.builder.raw(torch.amp.autocast_mode._enter_autocast, self.settings())
        self.entered = torch.amp.autocast_mode._enter_autocast(*self.settings())
        tx.state.autocast_stack.append(self)
        return self

    def exit(self, tx):
        if self in tx.state.autocast_stack:
            tx.state.autocast_stack.remove(self)
            self.close(tx.state.builder)
        return const(None)

    def close(self, builder=None):
        """Leave the mode: in the graph (when ``builder`` is given) and at trace time."""
        if builder is not None:
            builder.raw(torch.amp.autocast_mode._exit_autocast, (self.node,))
        torch.amp.autocast_mode._exit_autocast(self.entered)

    def reconstruct_entered_exit(self, cg) -> str:
        device, dtype, enabled, cache_enabled = self.settings()
        return f"{cg.ref(entered_autocast_exit)}({device!r}, {cg.ref(dtype)}, {enabled!r}, {cache_enabled!r})"


def is_autocast_class(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, torch.amp.autocast_mode.autocast)


class AutocastClassValue(GradModeClassValue):
    """An autocast class: calling it with constant arguments builds the real object at
    trace time (its ``__init__`` only resolves settings and warns); the default dtype it
    read from the process is guarded."""

    def call(self, tx, args, kwargs):
        try:
            real_args = [a.as_constant() for a in args]
            real_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
        except Unsupported:
            raise Unsupported(f"{self.cls.__qualname__} with arguments that are not constants")
        real = self.cls(*real_args, **real_kwargs)
        if self.cls is torch.amp.autocast_mode.autocast and "dtype" not in real_kwargs and len(real_args) < 2:
            fn = torch.get_autocast_dtype
            tx.state.guards.add("global_state", None,
                                f"{tx.state.ns.ref(fn)}({real.device!r}) == {tx.state.ns.ref(real.fast_dtype)}",
                                f"the default autocast dtype of {real.device} is {real.fast_dtype}")
        return AutocastValue(real)


def wrap_autocast_object(tx, obj, source):
    """A real autocast object made outside the frame, not entered yet: its settings are
    guarded and it is entered as one built in the frame."""
    if not isinstance(obj, torch.amp.autocast_mode.autocast) or hasattr(obj, "prev") or source is None:
        return None
    tx.state.guards.type_is(source, obj)
    for attr in ("device", "fast_dtype", "_enabled", "_cache_enabled"):
        value = getattr(obj, attr)
        if isinstance(value, torch.dtype):
            tx.state.guards.add("const", AttrSource(source, attr), f"{{v}} is {tx.state.ns.ref(value)}",
                                f"{source.describe()}.{attr} is {value}", plan=(("is", value),))
        else:
            tx.state.guards.constant(AttrSource(source, attr), value)
    return AutocastValue(obj)


class _Settings:
    """The four settings an AutocastValue enters with, when no autocast object holds them."""

    def __init__(self, device, fast_dtype, enabled, cache_enabled):
        self.device, self.fast_dtype, self._enabled, self._cache_enabled = device, fast_dtype, enabled, cache_enabled


class AutocastExitValue(Value):
    """The ``__exit__`` of a real autocast entered before this frame began (a with-block
    that a graph break split).  The real exit (which restores the saved state and counts
    the nesting down) is replayed by the glue after the graph; inside the graph, the ops
    after it run under the state it restores: an autocast with the saved settings is
    entered there, and left when the graph ends."""

    def __init__(self, method, source, saved):
        self.method, self.source, self.saved = method, source, saved

    def describe(self):
        return "exit of an autocast entered before the frame"

    def exit(self, tx):
        AutocastValue(_Settings(*self.saved)).enter(tx)
        tx.state.side_effects.replay_call(self, [const(None)] * 3)
        return const(None)

    def reconstruct(self, cg):
        return cg.source_expr(self.source)

    def reconstruct_entered_exit(self, cg) -> str:
        return cg.source_expr(self.source)   # still entered: the same method


def wrap_autocast_exit(tx, method, source):
    owner = getattr(method, "__self__", None)
    if getattr(method, "__name__", None) != "__exit__" or source is None \
            or not isinstance(owner, torch.amp.autocast_mode.autocast) or not hasattr(owner, "prev"):
        return None
    tx.state.guards.type_is(source, method)
    self_src = AttrSource(source, "__self__")
    tx.state.guards.type_is(self_src, owner)
    saved = (owner.device, owner.prev_fastdtype, owner.prev, owner.prev_cache_enabled)
    for attr, value in zip(("device", "prev_fastdtype", "prev", "prev_cache_enabled"), saved):
        if isinstance(value, torch.dtype):
            tx.state.guards.add("const", AttrSource(self_src, attr), f"{{v}} is {tx.state.ns.ref(value)}",
                                f"{self_src.describe()}.{attr} is {value}", plan=(("is", value),))
        else:
            tx.state.guards.constant(AttrSource(self_src, attr), value)
    return WithExit(AutocastExitValue(method, source, saved))
