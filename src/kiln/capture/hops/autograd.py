"""torch.utils.checkpoint and custom torch.autograd.Function.

checkpoint: the function is traced into a subgraph and called through
``tag_activation_checkpoint`` (reentrant or not: values and gradients are the same,
except that eager's reentrant form gives outputs that need no grad when no input
does, which Kiln traces as a call under no_grad): under the eager backend that runs
torch.utils.checkpoint on the subgraph, so the body is recomputed in backward; under
AOTAutograd the operator marks the body's nodes for recomputation.

autograd.Function: ``Fn.apply(*args)`` is recorded as one call of the user's own
``apply``.  Every backend then runs the user's forward and, in backward, the user's
backward (with its ctx: saved tensors, attributes, mark_non_differentiable,
needs_input_grad): eager runs it as it is, AOTAutograd traces the user's backward
while it builds the joint graph.  Kiln also traces the forward in a body scope, only to
apply the mutation rule (a forward that writes outer state is a graph break, and an
error under fullgraph); metadata comes from running the forward on fake tensors.
"""
from __future__ import annotations

import torch
import torch.utils.checkpoint
from torch._higher_order_ops.wrap import tag_activation_checkpoint

from ...exc import Unsupported
from ...runtime import caches
from ..values import ConstantValue, DictValue, GradModeWrappedFunction, TracedException, TupleValue, Value
from ..values import TensorValue, graph_call
from .control_flow import HopFunctionValue
from .scope import HopBodyMutation
from .subgraph import emit, outer_outputs


class CheckpointValue(HopFunctionValue):
    op = "checkpoint"

    def call(self, tx, args, kwargs):
        if not args:
            raise Unsupported("checkpoint() needs a function")
        fn, operands = args[0], list(args[1:])
        kwargs = dict(kwargs)
        reentrant = kwargs.pop("use_reentrant", ConstantValue(None))
        if not isinstance(reentrant, ConstantValue):
            raise Unsupported("checkpoint with a use_reentrant that is not a constant")
        for name in ("preserve_rng_state", "determinism_check", "debug"):
            kwargs.pop(name, None)
        if "context_fn" in kwargs:
            raise Unsupported("checkpoint with a context_fn runs as Python")
        if not torch.is_grad_enabled():
            # nothing is saved for backward, so there is nothing to recompute: checkpoint is
            # a plain call (grad mode is guarded by every entry)
            return fn.call(tx, operands, kwargs)
        if reentrant.value is None or reentrant.value:      # torch 2.13: None means reentrant
            if kwargs:
                # eager's reentrant checkpoint refuses them (ValueError): let it say so
                raise Unsupported("reentrant checkpoint with keyword arguments for the function runs as Python")
            if not any(isinstance(a, TensorValue) and a.fake.requires_grad for a in operands):
                # eager runs fn under no_grad inside an autograd.Function none of whose inputs
                # requires grad: outputs that need no grad, even when fn reads parameters
                # (requires_grad of inputs is guarded by every entry)
                return GradModeWrappedFunction(False, fn).call(tx, operands, {})
            # otherwise the reentrant variant computes the same values and gradients as the
            # non-reentrant one (torch.compile records both as tag_activation_checkpoint)
        body = tx.trace_subgraph(_WithKwargs(fn, kwargs) if kwargs else fn, operands, "checkpoint")
        node, result = emit(tx, tag_activation_checkpoint,
                            (tx.state.builder.add_attr(body.gm, "checkpoint_body"), *body.lifted),
                            (body.gm, *body.lifted_fakes),
                            {"use_reentrant": False}, {"use_reentrant": False})
        if not body.out_fakes:
            return body.rebuild([])
        if isinstance(result, torch.Tensor):
            result = (result,)
        return body.rebuild(outer_outputs(tx, node, result, len(body.out_fakes)))


class _WithKwargs(Value):
    """``fn`` with keyword arguments bound (checkpoint passes unknown kwargs to fn)."""

    def __init__(self, fn, kwargs):
        self.fn, self.kwargs = fn, kwargs

    def call(self, tx, args, kwargs):
        return self.fn.call(tx, args, {**self.kwargs, **kwargs})


class CtxValue(Value):
    """The ``ctx`` a forward receives while Kiln checks it: attribute stores and the
    ctx methods are accepted and kept here (the real ctx is made when apply runs)."""

    _METHODS = frozenset({"save_for_backward", "mark_non_differentiable", "mark_dirty", "set_materialize_grads",
                          "save_for_forward"})

    def __init__(self, needs_input_grad: tuple):
        self.attrs: dict = {}
        self.needs_input_grad = needs_input_grad
        self.saved: list = []

    def describe(self):
        return "autograd.Function ctx"

    def getattr(self, tx, name):
        if name in self.attrs:
            return self.attrs[name]
        if name == "needs_input_grad":
            return tx.wrap(self.needs_input_grad, None)
        if name == "saved_tensors":
            return TupleValue(list(self.saved))
        if name in self._METHODS:
            return _CtxMethod(self, name)
        raise Unsupported(f"ctx.{name} in an autograd.Function forward")

    def setattr(self, tx, name, value):
        self.attrs[name] = value


class _CtxMethod(Value):
    def __init__(self, ctx, name):
        self.ctx, self.name = ctx, name

    def call(self, tx, args, kwargs):
        if self.name == "save_for_backward":
            self.ctx.saved = list(args)
        return ConstantValue(None)


def check_forward(tx, cls, args: list) -> None:
    """Trace the user's forward in a body scope, for its rules only: a forward that
    writes outer state is refused (a break in default mode: eager runs it as written).
    The graph is dropped; what runs is the real apply.  Kiln's own limits inside the
    forward do not matter here, the forward is run, not traced."""
    new_style = cls.setup_context is not torch.autograd.function._SingleLevelFunction.setup_context
    fwd = tx.wrap(cls.forward, None)
    needs = tuple(isinstance(a, TensorValue) and a.fake.requires_grad for a in args)
    body_args = list(args) if new_style else [CtxValue(needs), *args]
    try:
        tx.trace_subgraph(fwd, body_args, "autograd.Function")
    except HopBodyMutation:
        raise
    except (Unsupported, TracedException):
        pass     # the forward is run, not traced: only its writes to outer state matter here


class AutogradApplyValue(HopFunctionValue):
    """``Function.apply`` (reached as ``MyFn.apply``: the class comes first)."""

    op = "autograd.Function"

    def call(self, tx, args, kwargs):
        if not args:
            raise Unsupported("Function.apply without its class")
        cls_value, rest = args[0], list(args[1:])
        cls = getattr(cls_value, "obj", None)
        if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
            raise Unsupported(f"Function.apply on {cls_value.describe()}")
        if kwargs:
            raise Unsupported(f"{cls.__name__}.apply with keyword arguments")
        for a in rest:
            if not isinstance(a, (TensorValue, ConstantValue)) and not isinstance(a, DictValue):
                raise Unsupported(f"{cls.__name__}.apply with a {a.describe()} argument")
        check_forward(tx, cls, rest)
        return graph_call(tx, "call_function", apply_of(cls), rest, {})


_APPLIERS: dict = caches.register_dict("capture.hops.autograd.appliers", {})   # Function class -> applier


def apply_of(cls):
    """A plain function calling ``cls.apply``: fx would render the classmethod itself by
    its torch module path (``torch.autograd.function.apply``), which does not exist."""
    fn = _APPLIERS.get(cls)
    if fn is None:
        def fn(*args):
            return cls.apply(*args)
        fn.__name__ = fn.__qualname__ = f"{cls.__name__}_apply"
        _APPLIERS[cls] = fn
    return fn
