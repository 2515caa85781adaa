"""Where an output view lies relative to the tensor the glue re-views it on, as eager has it.

When a backend returns as a copy an output that eager returns as a view (of an input,
or of another output), the glue rebuilds the view with ``as_strided`` on the tensor it
views.  The layout must be eager's: the traced view's size, stride and storage offset,
the offset taken relative to the tensor it is rebuilt on (whose own offset may differ
from call to call).  The returned copy's own layout (offset 0, contiguous) says nothing
about where the view lies in another tensor's memory; using it there reads the wrong
elements (``x.view(-1)[8:]`` of a view ``x`` gave elements 0..7).

With symbolic sizes the layout is an expression of the inputs' sizes and strides: it is
rendered as Python over the inputs' expressions in the glue (the ShapeEnv says which
input dimension each symbol was made from).  A symbol with no such source (a size read
from tensor data) cannot be rendered: ``render`` then gives None and the glue keeps what
the backend returned (right values, maybe not eager's aliasing), never a guess.
"""
from __future__ import annotations

import re

import torch
from torch.utils._sympy.printers import PythonPrinter

_SYMBOL = re.compile(r"\{s(\d+)\}")


def view_source_node(node: torch.fx.Node, inputs: set) -> torch.fx.Node | None:
    """The graph input among ``inputs`` (placeholders) that output ``node`` views, found by
    following the first tensor argument through the ops that share its memory; None if
    the chain leaves that memory or ends elsewhere."""
    key = _storage(node)
    seen = set()
    while node is not None and node not in seen:
        seen.add(node)
        if node in inputs:
            return node
        node = next((a for a in node.args if isinstance(a, torch.fx.Node) and key is not None
                     and _storage(a) == key), None)
    return None


def _storage(node):
    fake = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
    if not isinstance(fake, torch.Tensor) or fake.layout != torch.strided:
        return None
    return fake.untyped_storage()._cdata


class LayoutRenderer:
    """Renders ints and SymInts of the trace as glue expressions.  ``builder``: the
    frame's ``GraphBuilder`` (its ShapeEnv and symbolic inputs); ``source_expr``: a
    Kiln source -> its expression in the glue."""

    def __init__(self, builder, source_expr):
        self.builder = builder
        self.source_expr = source_expr

    def number(self, value) -> str | None:
        if isinstance(value, int):
            return repr(value)
        if not isinstance(value, torch.SymInt):
            return None
        expr = value.node.expr
        if expr.is_number:
            return repr(int(expr))
        names = {}
        env = self.builder.shape_env
        for symbol in expr.free_symbols:
            sources = env.var_to_sources.get(symbol)
            if not sources:
                return None          # unbacked (data-dependent): no input says what it is
            text = sources[0].name
            try:
                text = _SYMBOL.sub(lambda m: self.source_expr(self.builder.symbolic_inputs[int(m.group(1))].source),
                                   text)
            except IndexError:
                return None
            names[symbol] = f"({text})"
        rendered = PythonPrinter().doprint(expr)
        for symbol, text in names.items():
            rendered = re.sub(rf"\b{re.escape(str(symbol))}\b", lambda _: text, rendered)
        return f"({rendered})"

    def layout(self, view: torch.Tensor, on: torch.Tensor, on_expr: str) -> str | None:
        """``(size, stride, offset)`` of ``view`` as the glue's arguments of
        ``as_strided`` on ``on_expr`` (whose traced tensor is ``on``): the offset is
        ``on_expr``'s own at run time plus the traced difference.  None if a part cannot
        be rendered."""
        sizes = [self.number(s) for s in view.shape]
        strides = [self.number(s) for s in view.stride()]
        delta = view.storage_offset() - on.storage_offset()
        offset = self.number(delta)
        if any(p is None for p in sizes + strides) or offset is None:
            return None
        tup = lambda parts: "(" + "".join(f"{p}, " for p in parts) + ")"
        return f"{tup(sizes)}, {tup(strides)}, {on_expr}.storage_offset() + {offset}"

