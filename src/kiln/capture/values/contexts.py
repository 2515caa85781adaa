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
from ..sources import AttrSource
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
            return f"{cg.ref(_entered_inference_exit)}()"
        if self.prior is None:
            return f"{cg.ref(torch.set_grad_enabled)}({self.mode}).__exit__"
        return f"{cg.ref(_entered_grad_exit)}({self.mode}, {self.prior})"


def _entered_inference_exit():
    ctx = torch.inference_mode()
    ctx.__enter__()
    return ctx.__exit__


def _entered_grad_exit(mode: bool, prior: bool):
    ctx = torch.set_grad_enabled(mode)  # switches now
    ctx.prev = prior
    return ctx.__exit__


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
