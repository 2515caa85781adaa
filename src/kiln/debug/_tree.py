"""Walking the nested values that models return, with readable paths.

Paths read like Python where they can (``output.logits``, ``output[0]``) and fall back
to brackets for keys that are not identifiers (``grad[encoder.layer.0.weight]``), so a
report names a tensor the way a user would reach it.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Iterator

import torch


def child_path(parent: str, key: Any) -> str:
    """The path of ``parent[key]`` / ``parent.key``."""
    if isinstance(key, str) and key.isidentifier():
        return f"{parent}.{key}"
    return f"{parent}[{key}]"


def children(obj: Any) -> list[tuple[Any, Any]] | None:
    """``(key, child)`` pairs of a container, or None for a leaf.

    Mappings (which include ``OrderedDict`` and transformers' ``ModelOutput``, whose keys
    are its non-None fields) go by items; tuples and lists by position; other dataclass
    instances by field.  Tensors and everything else are leaves.
    """
    if isinstance(obj, torch.Tensor):
        return None
    if isinstance(obj, Mapping):
        return list(obj.items())
    if isinstance(obj, (tuple, list)):
        return list(enumerate(obj))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    return None


def leaves(obj: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Yield ``(path, leaf)`` for every leaf of ``obj``, depth first."""
    kids = children(obj)
    if kids is None:
        yield path, obj
        return
    for key, child in kids:
        yield from leaves(child, child_path(path, key))


def tensor_leaves(obj: Any, path: str) -> Iterator[tuple[str, torch.Tensor]]:
    """Like :func:`leaves`, keeping only tensors."""
    for p, leaf in leaves(obj, path):
        if isinstance(leaf, torch.Tensor):
            yield p, leaf
