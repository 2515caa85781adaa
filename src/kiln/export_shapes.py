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

from .capture import ShapePolicy

_AUTO, _DYNAMIC, _STATIC = Dim.AUTO, Dim.DYNAMIC, Dim.STATIC


class ExportShapes(ShapePolicy):
    """Symbolic dimensions by example tensor: ``{id(tensor): {dim: (min, max) or None}}``,
    None for a dimension that may specialise (``Dim.AUTO``).  Everything else is static;
    numbers are constants (as torch.export makes them, checked by ``ep.module()``)."""

    frame_numbers_are_inputs = False

    def __init__(self, dims: dict, keep_alive: list, ints: frozenset = frozenset()):
        super().__init__(False)
        self._by_tensor = dims
        self._alive = keep_alive     # the tensors whose ids key ``dims``
        self._ints = ints            # names of int arguments the spec makes dynamic

    def tensor_dims(self, key: str, t: torch.Tensor) -> tuple[set, dict]:
        spec = self._by_tensor.get(id(t))
        if not spec:
            return set(), {}
        return set(spec), {d: r for d, r in spec.items() if r is not None}

    def int_is_dynamic(self, key: str, value: int) -> bool:
        return key in self._ints


def export_shapes(fn, args: tuple, kwargs: dict, dynamic_shapes) -> ExportShapes:
    """The policy for ``dynamic_shapes`` given with ``fn``'s example inputs (``fn``: what
    torch.export binds the spec against, the module's ``forward`` or the function)."""
    dims: dict = {}
    tensors: list = []
    ints: set = set()
    if dynamic_shapes is None:
        return ExportShapes(dims, tensors)
    bound = inspect.signature(fn).bind(*args, **kwargs).arguments
    if isinstance(dynamic_shapes, dict):
        named = dynamic_shapes
        for name in named:
            if name not in bound:
                raise ValueError(f"kiln.export: dynamic_shapes names {name!r}, which is not an argument "
                                 f"given to {getattr(fn, '__qualname__', fn)!r}")
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(bound):
            raise ValueError(f"kiln.export: dynamic_shapes has {len(dynamic_shapes)} entries for "
                             f"{len(bound)} arguments")
        named = dict(zip(bound, dynamic_shapes))
    else:
        raise TypeError(f"kiln.export: dynamic_shapes must be a dict, tuple or list, got "
                        f"{type(dynamic_shapes).__name__}")
    for name, spec in named.items():
        value = bound[name]
        if type(value) in (int, float) and spec is not None:
            # a number torch.export makes symbolic must be symbolic in Kiln's graph too,
            # or the graph would hold the example's value
            if _range(spec) is _STATIC:
                continue
            if type(value) is float or value in (0, 1):
                raise ValueError(f"kiln.export: argument {name!r} = {value!r} cannot be dynamic: "
                                 + ("floats are constants" if type(value) is float else
                                    "the example values 0 and 1 are specialised; give another example"))
            ints.add(name)
            continue
        _walk(value, spec, name, dims, tensors)
    return ExportShapes(dims, tensors, frozenset(ints))


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
    if type(value) is int:
        if _range(spec) is not _STATIC:
            raise ValueError(f"kiln.export: {where} is an int inside a container; only int arguments of the "
                             f"function itself can be dynamic (or give None: a constant)")
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
