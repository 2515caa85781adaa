"""What a backend may declare about itself, and what Kiln assumes when it declares nothing.

Several of Kiln's exactness rules depend on what a backend does with a graph, which
Kiln cannot see from outside: a user's ``def backend(gm, inputs): return aot_eager(gm,
inputs)`` looks exactly like ``def backend(gm, inputs): return gm.forward``.  So each
fact is a separate opt-in attribute on the backend callable, read only as ``True`` (a
``Mock`` or an object whose ``__getattr__`` answers anything declares nothing), and
a backend that does not declare a fact gets the answer that is safe whatever it does:

``runs_graph_as_is``
    The callable it returns runs the graph's own ops in order on the real tensors, and
    autograd records each op as in eager (Kiln's ``eager``; ``kiln.testing.CompileCounter``).
    Not declared: the backend may functionalize or retrace the graph (AOTAutograd makes
    it one autograd node and turns tensors made inside it into constants), so a factory
    call with ``requires_grad=True`` is made at a break, graphs whose backward or
    in-place changes only eager's ops get right run op by op instead of going to the
    backend, and outputs' gradients are kept to the inputs they reach.  A backend that
    returns the graph's own ``gm.forward`` unchanged is seen to run it as is for the
    decisions made after compiling (``returned_as_is``).
``applies_input_mutations_last``
    Its compiled graphs change their inputs in place only after every op ran, so one that
    raised changed nothing (AOTAutograd's functional graphs: ``aot_eager``, ``aten``,
    ``inductor``).  Not declared: inputs may change as the ops run, and the glue watches
    their version counters before re-running a failed frame as Python, which is sound
    either way.  Meaningless for a backend that runs the graph as is.
``caches_compiled_graphs``
    It keeps compiled graphs in on-disk caches that need a shape environment
    (``inductor``).  Not declared: it gets AOTAutograd's own fake mode.

A callable made by ``functools.wraps`` copies the ``__dict__`` of the one it wraps, so a
declaration the wrapped callable also holds is taken as copied, not as the wrapper's own:
wrapping ``eager`` does not make a transforming wrapper "as is".  A wrapper that keeps
the wrapped backend's behaviour declares on itself after ``del wrapper.__wrapped__``, or
is a class with the attribute.  Kiln's own wrappers that hand graphs to a backend (the
recorders of ``kiln.explain``, the minifier and bisector, the bench) declare what it
declares (``declare_like``), so a program runs under the same rules with them as without.

A backend with a notion of torch.compile's ``mode`` and ``options`` (``inductor``)
declares ``with_options``: ``with_options(mode, options) -> backend`` returns the backend
that compiles under them, or raises ``ValueError`` naming what it does not accept
(``options_hook``; the same rule for copied declarations).  ``kiln.compile`` refuses
``mode``/``options`` for a backend without one.
"""
from __future__ import annotations

import torch.fx

__all__ = ["FACTS", "runs_graph_as_is", "applies_input_mutations_last", "caches_compiled_graphs", "returned_as_is",
           "declare_like", "options_hook"]

FACTS = ("runs_graph_as_is", "applies_input_mutations_last", "caches_compiled_graphs")


def _declares(backend, fact: str) -> bool:
    """Whether ``backend`` itself declares ``fact`` (see the module docstring)."""
    try:
        if getattr(backend, fact, False) is not True:
            return False
        wrapped = getattr(backend, "__wrapped__", None)
        return wrapped is None or getattr(wrapped, fact, False) is not True
    except Exception:          # a property or __getattr__ that raises declares nothing
        return False


def runs_graph_as_is(backend) -> bool:
    """The backend declares that it runs graphs' ops as they are, in order, on real tensors."""
    return _declares(backend, "runs_graph_as_is")


def applies_input_mutations_last(backend) -> bool:
    """The backend declares that its graphs change inputs only after every op ran."""
    return _declares(backend, "applies_input_mutations_last") and not runs_graph_as_is(backend)


def caches_compiled_graphs(backend) -> bool:
    """The backend declares on-disk caches of compiled graphs (needing a shape environment)."""
    return _declares(backend, "caches_compiled_graphs")


def returned_as_is(compiled, own_forward) -> bool:
    """Whether what the backend returned runs the graph as Kiln built it: the graph's own
    ``forward`` bound before the backend saw it (``gm.forward``, or the failure policy's
    fallback to it), or the graph module itself while its ``forward`` is still that one.
    A backend that rewrote and recompiled the graph returns another function."""
    gm = getattr(own_forward, "__self__", None)
    func = getattr(own_forward, "__func__", None)
    if not isinstance(gm, torch.fx.GraphModule):
        return False
    if compiled is gm:
        return type(gm).forward is func
    return getattr(compiled, "__self__", None) is gm and getattr(compiled, "__func__", None) is func


def declare_like(wrapper, inner, facts=FACTS) -> None:
    """Make ``wrapper``, which hands each graph to ``inner`` and returns what it returns,
    declare the ``facts`` that ``inner`` declares.  ``inner`` None: the wrapper returns
    ``gm.forward`` itself, and runs graphs as they are."""
    for fact in facts:
        if fact == "runs_graph_as_is" and inner is None or inner is not None and _declares(inner, fact):
            setattr(wrapper, fact, True)


def options_hook(backend):
    """The backend's own ``with_options(mode, options)`` (see the module docstring), or None."""
    try:
        hook = getattr(backend, "with_options", None)
        wrapped = getattr(backend, "__wrapped__", None)
        own = "with_options" in getattr(backend, "__dict__", {}) or \
            any("with_options" in vars(k) for k in type(backend).__mro__[:-1])
        if not callable(hook) or not own:
            return None     # a Mock's or a __getattr__'s answer declares nothing
        if wrapped is not None and getattr(wrapped, "with_options", None) is hook:
            return None     # copied by functools.wraps from the backend it wraps
        return hook
    except Exception:
        return None
