"""GraphBuilder: the fx.Graph being captured plus fake tensors for its metadata.

Graph inputs are added lazily, the first time traced code touches a tensor that
lives outside the frame.  Every op is run on fake tensors as it is recorded, so
shapes, dtypes and ``requires_grad`` are known while tracing without touching data.
"""
from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
)
from torch.utils._pytree import tree_map

from ..exc import Unsupported


class GraphBuilder:
    def __init__(self):
        self.graph = torch.fx.Graph()
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        self.placeholders: list[tuple[torch.fx.Node, Any]] = []  # (node, source)
        self.example_inputs: list[torch.Tensor] = []
        self._names: set[str] = set()
        self._first_output_node = None
        self.attrs: dict = {}   # name -> subgraph GraphModule (bodies of higher-order operators)

    # -- inputs ---------------------------------------------------------------------
    def add_input(self, real: torch.Tensor, source, hint: str) -> tuple[torch.fx.Node, FakeTensor]:
        name = self._unique(_sanitize(hint))
        # placeholders go before every other node
        if self.placeholders:
            with self.graph.inserting_after(self.placeholders[-1][0]):
                node = self.graph.placeholder(name)
        else:
            first = next(iter(self.graph.nodes), None)
            if first is not None:
                with self.graph.inserting_before(first):
                    node = self.graph.placeholder(name)
            else:
                node = self.graph.placeholder(name)
        fake = self.fake_mode.from_tensor(real, static_shapes=True)
        node.meta["example_value"] = fake
        self.placeholders.append((node, source))
        self.example_inputs.append(real)
        return node, fake

    def lift(self, node: torch.fx.Node, fake) -> torch.fx.Node:
        """The node standing for ``node`` in this graph; a subgraph builder turns a node of
        an enclosing graph into an input (``hops/subgraph.py``)."""
        return node

    def add_attr(self, gm, hint: str) -> torch.fx.Node:
        """A ``get_attr`` node for a subgraph module attached to this graph."""
        name = self._unique(_sanitize(hint))
        self.attrs[name] = gm
        node = self.graph.get_attr(name)
        node.meta["example_value"] = gm
        return node

    def _unique(self, base: str) -> str:
        name, i = base, 1
        while name in self._names:
            name = f"{base}_{i}"
            i += 1
        self._names.add(name)
        return name

    # -- ops ------------------------------------------------------------------------
    def call(self, kind: str, target, node_args: tuple, node_kwargs: dict, fake_args: tuple, fake_kwargs: dict):
        """Record one op and run it on fakes; returns (node, fake_result)."""
        node = self.graph.create_node(kind, target, node_args, node_kwargs)
        try:
            with self.fake_mode:
                if kind == "call_method":
                    self_arg, *rest = fake_args
                    result = getattr(self_arg, target)(*rest, **fake_kwargs)
                else:
                    result = target(*fake_args, **fake_kwargs)
        except (DataDependentOutputException, DynamicOutputShapeException) as e:
            self.graph.erase_node(node)
            raise Unsupported(f"{_target_name(target)} produces a value that depends on tensor data ({type(e).__name__})") from e
        except Unsupported:
            self.graph.erase_node(node)
            raise
        except Exception as e:
            self.graph.erase_node(node)
            raise Unsupported(f"{_target_name(target)} failed while Kiln propagated tensor metadata: "
                              f"{type(e).__name__}: {e}") from e
        node.meta["example_value"] = result
        return node, result

    def getitem(self, node: torch.fx.Node, index: int, fake):
        n = self.graph.call_function(operator.getitem, (node, index))
        n.meta["example_value"] = fake
        return n

    def raw(self, target, args=()):
        """A call recorded for its side effect only (e.g. grad-mode switches)."""
        return self.graph.call_function(target, args)

    def output(self, nodes: list[torch.fx.Node]):
        self.graph.output(tuple(nodes))

    def count_ops(self) -> int:
        return sum(1 for n in self.graph.nodes if n.op in ("call_function", "call_method", "call_module"))

    def has_work(self) -> bool:
        return self.count_ops() > 0


def _sanitize(hint: str) -> str:
    out = "".join(c if c.isalnum() else "_" for c in hint).strip("_") or "input"
    if out[0].isdigit():
        out = "_" + out
    return out.lower() if out.isupper() else out


def _target_name(target) -> str:
    if isinstance(target, str):
        return f"Tensor.{target}"
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", None) or repr(target)
    return f"{mod}.{name}" if mod and not mod.startswith("_") else name


def contains_fake(x) -> bool:
    found = []
    tree_map(lambda v: found.append(1) if isinstance(v, FakeTensor) else None, x)
    return bool(found)
