"""Numbers "read from tensor data" whose data is a constant of the trace.

Why: ``item()`` / ``bool(t)`` in the graph gives an unbacked symbol, and Python that needs
its value breaks there (docs/architecture.md, "Dynamic shapes").  But some of those tensors
depend on nothing the call passes in: ``nn.TransformerEncoder`` compares the mask it was
given with ``_generate_square_subsequent_mask(sz)`` (``bool((mask == causal).all())``),
and a mask made in the frame by ``generate_square_subsequent_mask(n)`` at a static ``n`` is
the same tensor on every call that passes the frame's guards.  Its value is a fact of the
trace, so the trace computes it: the ops behind the number are run on real tensors at
trace time, and the ShapeEnv is told the symbol's value (``torch._check(u == value)``),
which also puts the same check into the graph as a run-time assertion.  Python then reads
a constant and no break is needed.

When the value is a constant: every op behind the number (the fx ancestors of the node
that read it) is a ``call_function``/``call_method`` on constants, none reads a graph
input (placeholder), a module attribute (get_attr) or draws random numbers, and nothing
recorded before the read mutates one of those tensors from outside that set (a view of
it written in place by an input would change the data).  Anything else keeps the break.
"""
from __future__ import annotations

import operator

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

__all__ = ["settle_constant_symbols"]

_MUTATING_OPERATORS = {operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv,
                       operator.ifloordiv, operator.imod, operator.ipow, operator.iand, operator.ior,
                       operator.ixor, operator.ilshift, operator.irshift, operator.imatmul}


def _may_mutate(node: torch.fx.Node) -> bool:
    """Whether an op may write into one of its arguments (torch's ``name_`` convention,
    Python's in-place operators and ``setitem``, an ``out=`` argument)."""
    if "out" in node.kwargs or node.target in _MUTATING_OPERATORS:
        return True
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    return name.endswith("_") and not name.endswith("__")


def _ancestors(node: torch.fx.Node) -> set | None:
    """The nodes ``node`` is computed from, or None when one of them is not a constant
    of the trace (an input, an attribute, a random draw)."""
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        if n.op not in ("call_function", "call_method") or n.meta.get("kiln_draws"):
            return None
        seen.add(n)
        todo.extend(n.all_input_nodes)
    return seen


def _unmutated(graph: torch.fx.Graph, node: torch.fx.Node, behind: set) -> bool:
    """No op recorded before ``node``, outside ``behind``, that may write into data
    ``behind`` reads (it, or a view made from it)."""
    touched = set(behind)
    for n in graph.nodes:
        if n is node:
            return True
        if n in behind or not any(a in touched for a in n.all_input_nodes):
            continue
        if _may_mutate(n):
            return False
        touched.add(n)   # a view (or any result) made from those tensors
    return True


def _run(behind: set, graph: torch.fx.Graph) -> dict:
    """Each node of ``behind`` computed on real tensors, in the graph's order."""
    real = {}
    for n in graph.nodes:
        if n not in behind:
            continue
        args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), lambda a: real[a])
        if n.op == "call_method":
            self_arg, *rest = args
            real[n] = getattr(self_arg, n.target)(*rest, **kwargs)
        else:
            real[n] = n.target(*args, **kwargs)
    return real


def settle_constant_symbols(graph: torch.fx.Graph, expr) -> bool:
    """For each unbacked symbol in ``expr`` (what a data-dependent guard asked about)
    read from constant data, compute its value and assume it (``torch._check``); True
    when every symbol in ``expr`` was settled so, and the question can be asked again."""
    symbols = free_unbacked_symbols(expr) if expr is not None else set()
    if not symbols:
        return False
    readers = {}
    for n in graph.nodes:
        for sym in (n.meta.get("unbacked_bindings") or {}):
            readers[sym] = n
    if not all(sym in readers for sym in symbols):
        return False
    checks = []
    for sym in symbols:
        node = readers[sym]
        behind = _ancestors(node)
        if behind is None or not _unmutated(graph, node, behind):
            return False
        with torch._subclasses.fake_tensor.unset_fake_temporarily():
            try:
                value = _run(behind, graph)[node]
            except Exception:   # the trace's fakes accepted it; give up and break as before
                return False
        fake = node.meta.get("example_value")
        if isinstance(fake, torch.SymBool) and isinstance(value, bool):
            checks.append(fake if value else torch.sym_not(fake))
        elif isinstance(fake, torch.SymInt) and isinstance(value, int) and not isinstance(value, bool):
            checks.append(fake == value)
        else:
            return False
    for check in checks:
        torch._check(check)
    return True
