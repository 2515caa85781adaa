"""Fix-ups the glue applies to a compiled graph's outputs, on every call, so that they
behave as eager's.

Which fix-ups an entry needs is decided at compile time (``capture.frames.graph_outputs`` and
``capture.frames.codegen`` compare the trace's fake outputs with what a backend may return);
the glue then calls these functions on the real outputs, each behind a cheap check
written into the glue (``if ___o[0]._is_view(): ...``), so an output that is already
right costs one attribute read:

* ``not_a_view``: an output eager computes as a new tensor that a functional inference
  graph returned as a view;
* ``view_of_detached``: an output that is a view of a detached alias of an input
  (``x.data[1:]``, or a view of an input that is itself a view), which AOTAutograd
  returns on the input's memory but not as a view, and a copying backend as a copy;
* ``rebuild_view``: an output that is a view of another output, returned as a copy.

A view is rebuilt with eager's layout (the trace's, relative to the tensor it is
rebuilt on: ``capture.frames.view_layout``), never with the returned tensor's own layout on
other memory; where the glue cannot work eager's out, the returned tensor is kept.
* ``named_like_eager``: an output of a graph compiled as one autograd node shows
  eager's ``grad_fn`` name;
* ``gradients_through_reached_outputs``: a backward from some outputs of such a graph
  gives gradients only to the inputs those outputs reach, as eager's per-op graph does.
"""
from __future__ import annotations

import functools

import torch

from . import caches


def not_a_view(t: torch.Tensor) -> torch.Tensor:
    """``t`` (a view) as a tensor that is not a view, on the same memory: what eager has
    for an output it computes as a new tensor, where a functional inference graph may
    return a view of a tensor it updated through a view."""
    return torch.ops.aten._unsafe_view(t, t.shape) if t.requires_grad else t.detach()


def view_of_detached(source: torch.Tensor, t: torch.Tensor, size=None, stride=None, offset=None) -> torch.Tensor:
    """``t`` as a view of a detached alias of ``source``, as eager has ``x.data[1:]``.
    ``size``/``stride``/``offset``: eager's layout of the view in ``source``'s memory (the
    trace's, worked out by the glue); None where the glue could not work it out.  Then
    ``t``'s own layout is used only if ``t`` lies in ``source``'s memory (AOTAutograd
    returns it there, not as a view); a copy elsewhere is returned as it is: its layout
    says nothing about where the view lies in ``source`` (right values over eager's
    aliasing)."""
    if size is not None:
        return source.detach().as_strided(size, stride, offset)
    if _same_memory(t, source):
        return source.detach().as_strided(t.size(), t.stride(), t.storage_offset())
    return t


def rebuild_view(t, base, size=None, stride=None, offset=None):
    """Output ``t`` as a view of output ``base``, as in eager.  ``size``/``stride``/
    ``offset``: eager's layout in ``base``'s memory, or None where the glue could not
    work it out (a symbol read from tensor data): then ``t``'s own layout is used only
    if ``t`` lies in ``base``'s memory, and a copy is returned as it is."""
    if size is not None:
        return base.as_strided(size, stride, offset)
    if _same_memory(t, base):
        return base.as_strided(t.size(), t.stride(), t.storage_offset())
    return t


def _same_memory(t: torch.Tensor, other: torch.Tensor) -> bool:
    return t.untyped_storage().data_ptr() == other.untyped_storage().data_ptr()


def named_like_eager(t: torch.Tensor, name: str) -> torch.Tensor:
    """``t`` (a graph output computed fresh) with a ``grad_fn`` named ``name``, eager's node
    for it.  An AOTAutograd graph is one autograd node for all its outputs
    (``CompiledFunctionBackward``), which printing a tensor shows; if that is not eager's
    name, ``t`` is passed through an identity node of that name (gradients flow through
    unchanged)."""
    fn = t.grad_fn
    if fn is None or type(fn).__name__ == name:
        return t
    return _identity_node(name).apply(t)


@functools.lru_cache(maxsize=None)
def _identity_node(name: str):
    class Identity(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            # None stays None in the backward, as through eager's node: the engine runs a
            # node on a path to what it computes even when no gradient reached it
            ctx.set_materialize_grads(False)
            return t.detach()      # a new tensor object on the same storage, not a view

        @staticmethod
        def backward(ctx, grad):
            return grad

    Identity._backward_cls.__name__ = Identity._backward_cls.__qualname__ = name
    return Identity


caches.register_lru("runtime.outputs.identity_nodes", _identity_node)


def gradients_through_reached_outputs(outputs, inputs, reach) -> None:
    """Make a backward through one autograd node for the whole graph (AOTAutograd's) give
    an input a gradient only if an output the backward reached depends on it, as eager's
    per-op graph does: unreached outputs count as zeros in the node's backward, which
    would give inputs only they reach zero gradients (eager: ``.grad`` stays None).
    ``reach``: ``((output index, input positions it reaches), ...)``, worked out at compile
    time from the trace (``capture.frames.graph_outputs.output_reach``).

    A pre-hook on the node notes which of its outputs got a gradient; a hook after it
    drops the gradients of inputs none of those outputs reaches.  Nothing is done when
    the outputs do not share one node (a graph run op by op has eager's graph)."""
    # the node: what the outputs the graph computes fresh (not views) hang from; a view's
    # gradient reaches it through the view's own node (outputs that are views of inputs,
    # which hang from the inputs, never reach it)
    ends = []
    for i, positions in reach:
        t = outputs[i]
        fn, nr = t.grad_fn, t.output_nr
        if fn is not None and t._is_view():
            fn, nr = fn.next_functions[0]
        ends.append((fn, nr, positions, t._is_view()))
    node = next((fn for fn, _, _, view in ends if fn is not None and not view), None)
    if node is None or any(fn is not node for fn, _, _, view in ends if fn is not None and not view):
        return                       # no fresh output, or they do not share one node (op by op)
    slots = {}
    for fn, nr, positions, _ in ends:
        if fn is node:
            slots.setdefault(nr, set()).update(positions)
    edges = {}                       # input position -> indices of the node's inputs
    for k, (fn, nr) in enumerate(node.next_functions):
        if fn is None:
            continue
        for p, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and x.requires_grad and (
                    getattr(fn, "variable", None) is x or (fn is x.grad_fn and nr == x.output_nr)):
                edges.setdefault(p, []).append(k)
    reached: list = []

    def note(grad_outputs):
        reached[:] = [s for s, g in enumerate(grad_outputs) if g is not None]

    def drop(grad_inputs, grad_outputs):
        if any(s not in slots for s in reached):
            return None              # an output Kiln does not know (a mutated input): keep all
        live = set().union(*(slots[s] for s in reached))
        dropped = {k for p, ks in edges.items() if p not in live for k in ks}
        if not dropped:
            return None
        return tuple(None if k in dropped else g for k, g in enumerate(grad_inputs))

    node.register_prehook(note)
    node.register_hook(drop)
