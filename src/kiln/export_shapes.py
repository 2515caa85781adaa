"""torch.export's ``dynamic_shapes`` as Kiln's shape policy for one capture.

``kiln.export`` takes ``dynamic_shapes`` in the forms torch.export takes (a dict keyed
by argument name or a tuple by position, nesting like the arguments, with a dict
``{dim: Dim}`` or a tuple of ``Dim`` / ``None`` / int per tensor).  Kiln's capture must
make exactly those dimensions symbolic, or it would decide Python on a size it treats
as a constant and say nothing: so the spec is read here into the dimensions of each
example tensor (``ExportShapes``, a ``ShapePolicy`` answering by tensor identity, so the
user's tensors are not marked).  A named ``Dim`` or ``Dim.DYNAMIC`` must stay symbolic
(the capture names the line that specialised it), ``Dim.AUTO`` may specialise, and
``Dim.STATIC``, an int or None keeps the dimension static.  The spec itself goes on to
torch.export unchanged, which checks it the same way against the same graph.
"""
from __future__ import annotations

import inspect

import torch
from torch.export import Dim

from .capture.dynamism import ShapePolicy

_AUTO, _DYNAMIC, _STATIC = Dim.AUTO, Dim.DYNAMIC, Dim.STATIC


class ExportShapes(ShapePolicy):
    """Symbolic dimensions by example tensor: ``{id(tensor): {dim: (min, max) or None}}``,
    None for a dimension that may specialise (``Dim.AUTO``).  Everything else is static;
    numbers are constants (as torch.export makes them, checked by ``ep.module()``)."""

    frame_numbers_are_inputs = False

    def __init__(self, dims: dict, keep_alive: list):
        super().__init__(False)
        self._by_tensor = dims
        self._alive = keep_alive     # the tensors whose ids key ``dims``

    def tensor_dims(self, key: str, t: torch.Tensor) -> tuple[set, dict]:
        spec = self._by_tensor.get(id(t))
        if not spec:
            return set(), {}
        return set(spec), {d: r for d, r in spec.items() if r is not None}

    def int_is_dynamic(self, key: str, value: int) -> bool:
        return False


def export_shapes(fn, args: tuple, kwargs: dict, dynamic_shapes) -> ExportShapes:
    """The policy for ``dynamic_shapes`` given with ``fn``'s example inputs (``fn``: what
    torch.export binds the spec against, the module's ``forward`` or the function)."""
    dims: dict = {}
    tensors: list = []
    if dynamic_shapes is None:
        return ExportShapes(dims, tensors)
    if isinstance(dynamic_shapes, dict):
        bound = inspect.signature(fn).bind(*args, **kwargs)
        for name, spec in dynamic_shapes.items():
            if name not in bound.arguments:
                raise ValueError(f"kiln.export: dynamic_shapes names {name!r}, which is not an argument "
                                 f"given to {getattr(fn, '__qualname__', fn)!r}")
            _walk(bound.arguments[name], spec, name, dims, tensors)
    elif isinstance(dynamic_shapes, (tuple, list)):
        values = list(args) + list(kwargs.values())
        if len(dynamic_shapes) != len(values):
            raise ValueError(f"kiln.export: dynamic_shapes has {len(dynamic_shapes)} entries for "
                             f"{len(values)} inputs")
        for i, (value, spec) in enumerate(zip(values, dynamic_shapes)):
            _walk(value, spec, f"input {i}", dims, tensors)
    else:
        raise TypeError(f"kiln.export: dynamic_shapes must be a dict, tuple or list, got "
                        f"{type(dynamic_shapes).__name__}")
    return ExportShapes(dims, tensors)


def _walk(value, spec, where: str, dims: dict, tensors: list) -> None:
    if spec is None:
        return
    if isinstance(value, torch.Tensor):
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        chosen = {}
        for d, dim in items:
            if not 0 <= d < value.dim():
                raise ValueError(f"kiln.export: dynamic_shapes gives dimension {d} of {where}, "
                                 f"which has {value.dim()} dimensions")
            rng = _range(dim)
            if rng is not _STATIC:
                chosen[d] = rng
        if chosen:
            dims[id(value)] = chosen
            tensors.append(value)
        return
    if isinstance(value, dict) and isinstance(spec, dict):
        for k, v in value.items():
            _walk(v, spec.get(k), f"{where}[{k!r}]", dims, tensors)
        return
    if isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
        for i, (v, s) in enumerate(zip(value, spec)):
            _walk(v, s, f"{where}[{i}]", dims, tensors)
        return
    leaves, _ = torch.utils._pytree.tree_flatten(value)
    specs = spec if isinstance(spec, (list, tuple)) else getattr(spec, "__dict__", {}).values()
    for i, (v, s) in enumerate(zip(leaves, specs)):
        _walk(v, s, f"{where} leaf {i}", dims, tensors)


def _range(dim):
    """(min, max) a named Dim bounds a dimension to (None for no bound), None for one
    that may specialise (``Dim.AUTO``), ``_STATIC`` for one that must not be symbolic."""
    if dim is None or isinstance(dim, int) or dim is _STATIC:
        return _STATIC
    if dim is _AUTO:
        return None
    if dim is _DYNAMIC:
        return (None, None)
    if isinstance(dim, Dim):
        # sizes 0 and 1 always specialise (broadcasting depends on them), as torch.export's do
        low = dim.min if isinstance(dim.min, int) and dim.min > 2 else None
        high = dim.max if isinstance(dim.max, int) and dim.max < (1 << 62) else None
        return (low, high)
    raise TypeError(f"kiln.export: {dim!r} in dynamic_shapes is not a Dim, Dim.AUTO, Dim.DYNAMIC, "
                    f"Dim.STATIC, an int or None")
