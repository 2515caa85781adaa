"""Graph inputs reproduced as they were: values, layout, autograd role and aliasing.

Why not fresh random tensors.  The second seed (a BigBird training step wrong under
``aot_eager``) hid from torch.compile's accuracy minifier because the minifier rebuilt
each graph input as an independent tensor, while in the real run two inputs were views
of one buffer and the graph wrote into one of them.  A bug that needs aliasing vanishes
the moment the aliasing does.  So an :class:`InputSet` keeps, per input:

* dtype, shape, stride, storage offset, ``requires_grad``, whether it was a leaf and
  whether it was a view;
* which *storage* it lives in: inputs that shared memory are rebuilt as views
  (``as_strided``) of one new buffer, so an in-place write through one is seen by the
  others, as in the real run;
* and an input that was no view, and was all of its buffer, is rebuilt as such a tensor
  (not as a view of a flat buffer).  Whether an argument is a view changes what the
  program does with it: Kiln's glue rebuilds an output that is a view of an input view
  on that input (``runtime.outputs.view_of_detached``), which would hide a backend that
  returns a copy where eager returns a view of a plain tensor argument (issue #30).
* the storage's values (so integer ids, masks and the exact floats survive), or a seed
  for random values when the values were unknown (fake tensors) or too large to keep.

Non-tensor inputs (ints, floats, tuples of them) are kept as Python literals.

An InputSet renders itself as Python source (:meth:`InputSet.to_source`), which is how a
repro script carries its inputs; ``build()`` makes a fresh set of real tensors every
time, in float64 for the reference run (``float64=True``) or with every input in its own
storage (``independent=True``, to show that a failure needs the aliasing).
"""
from __future__ import annotations

import base64
import math
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import torch

__all__ = ["StorageSpec", "TensorInput", "ValueInput", "InputSet", "is_literal"]

#: storages larger than this are not embedded in a repro; they get seeded random values
MAX_EMBEDDED_BYTES = 8 * 1024 * 1024


@dataclass
class StorageSpec:
    """One buffer that one or more inputs view."""

    dtype: torch.dtype
    numel: int
    #: 1-D tensor of ``numel`` values, or None: random values from ``seed``
    values: torch.Tensor | None = None
    seed: int = 0

    def make(self) -> torch.Tensor:
        if self.values is not None:
            return self.values.clone()
        g = torch.Generator().manual_seed(self.seed)
        if self.dtype.is_floating_point or self.dtype.is_complex:
            return torch.randn(self.numel, generator=g, dtype=torch.float64).to(self.dtype)
        if self.dtype == torch.bool:
            return torch.rand(self.numel, generator=g) > 0.5
        return torch.randint(0, 2, (self.numel,), generator=g, dtype=self.dtype)


@dataclass
class TensorInput:
    storage: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    dtype: torch.dtype
    requires_grad: bool = False
    is_leaf: bool = True
    name: str = ""
    #: it was a view (of a buffer passed in or not); False: the buffer's own tensor
    is_view: bool = False

    def covers(self, storage: StorageSpec) -> bool:
        """True if this input is its whole storage, contiguous, from offset 0."""
        return (self.offset == 0 and math.prod(self.shape) == storage.numel
                and tuple(self.stride) == _contiguous_strides(self.shape))


@dataclass
class ValueInput:
    value: Any
    name: str = ""


@dataclass
class InputSet:
    storages: list[StorageSpec] = field(default_factory=list)
    inputs: list[TensorInput | ValueInput] = field(default_factory=list)
    #: storages whose members could not keep their aliasing (mixed dtypes), for reports
    notes: list[str] = field(default_factory=list)

    # ---------------------------------------------------------------- snapshot

    @classmethod
    def snapshot(cls, values: Sequence[Any], names: Sequence[str] | None = None,
                 keep_values: bool = True) -> "InputSet":
        """Record ``values`` (tensors and literals) as they are now, aliasing included."""
        result = cls()
        by_storage: dict[Any, int] = {}
        for i, v in enumerate(values):
            name = names[i] if names is not None else f"arg{i}"
            if not isinstance(v, torch.Tensor):
                result.inputs.append(ValueInput(v, name))
                continue
            key = _storage_key(v)
            index = by_storage.get(key) if key is not None else None
            if index is not None and result.storages[index].dtype != v.dtype:
                result.notes.append(f"{name} shares memory with an input of another dtype; rebuilt separately")
                index = None
            if index is None:
                index = len(result.storages)
                result.storages.append(_storage_of(v, keep_values, seed=index))
                if key is not None:
                    by_storage[key] = index
            result.inputs.append(TensorInput(index, tuple(v.shape), tuple(v.stride()), v.storage_offset(),
                                             v.dtype, v.requires_grad, v.is_leaf, name, v._is_view()))
        return result

    def subset(self, positions: Sequence[int]) -> "InputSet":
        """The inputs at ``positions``, keeping their shared storages (renumbered)."""
        new = InputSet(notes=list(self.notes))
        remap: dict[int, int] = {}
        for p in positions:
            spec = self.inputs[p]
            if isinstance(spec, TensorInput):
                if spec.storage not in remap:
                    remap[spec.storage] = len(new.storages)
                    new.storages.append(self.storages[spec.storage])
                spec = replace(spec, storage=remap[spec.storage])
            new.inputs.append(spec)
        return new

    def add_value(self, value: Any, name: str) -> None:
        """Append one more input holding ``value`` in storage of its own."""
        if isinstance(value, torch.Tensor):
            t = value.detach().contiguous()
            self.storages.append(StorageSpec(t.dtype, t.numel(), t.reshape(-1).clone(), seed=len(self.storages)))
            self.inputs.append(TensorInput(len(self.storages) - 1, tuple(t.shape), tuple(t.stride()), 0,
                                           t.dtype, value.requires_grad, True, name))
        else:
            self.inputs.append(ValueInput(value, name))

    # ---------------------------------------------------------------- rebuild

    def build(self, *, float64: bool = False, independent: bool = False) -> tuple[list[Any], list[torch.Tensor]]:
        """Fresh real inputs, and the leaf tensors gradients flow to (in storage order).

        Floating storages become float64 with ``float64=True``.  A storage with a member
        that requires grad gets a leaf: the member itself when it was a leaf covering the
        whole storage, else a leaf the storage is cloned from (so members are non-leaf
        views, as activations are in a real training step).
        """
        if independent:
            return self._build_independent(float64)
        bases: list[torch.Tensor | None] = []
        owners: list[TensorInput | None] = []
        leaves: list[torch.Tensor] = []
        for k, storage in enumerate(self.storages):
            members = [s for s in self.inputs if isinstance(s, TensorInput) and s.storage == k]
            owner = _owner(members, storage)
            data = _convert(storage.make(), float64)
            if owner is not None:   # the buffer's own tensor: its shape and layout, no view
                data = torch.empty(0, dtype=data.dtype).set_(data.untyped_storage(), 0, owner.shape, owner.stride)
            if any(m.requires_grad for m in members):
                whole_leaf = len(members) == 1 and members[0].is_leaf and members[0].covers(storage)
                if owner is not None and owner.is_leaf and owner.requires_grad:
                    whole_leaf = True   # a parameter (views of it are views of the leaf)
                elif whole_leaf and owner is None:   # the input itself is the leaf, with its own shape
                    data = data.view(members[0].shape)
                leaf = data.requires_grad_(True)
                leaves.append(leaf)
                data = leaf if whole_leaf else leaf.clone()   # clone keeps the owner's layout
            bases.append(data)
            owners.append(owner)
        out: list[Any] = []
        for spec in self.inputs:
            if isinstance(spec, ValueInput):
                out.append(spec.value)
                continue
            base = bases[spec.storage]
            if spec is owners[spec.storage]:
                out.append(base)
            elif owners[spec.storage] is None and spec.covers(self.storages[spec.storage]):
                out.append(base.view(spec.shape) if tuple(base.shape) != tuple(spec.shape) else base)
            else:
                out.append(base.as_strided(spec.shape, spec.stride, spec.offset))
        return out, leaves

    def leaf_names(self, *, independent: bool = False) -> list[str]:
        """Names for the leaves :meth:`build` returns, in the same order: the first input
        of each storage that needs a gradient (every such input when ``independent``)."""
        names = []
        for k in range(len(self.storages)):
            members = [s for s in self.inputs if isinstance(s, TensorInput) and s.storage == k]
            if independent:
                names += [m.name for m in members if m.requires_grad]
            elif any(m.requires_grad for m in members):
                names.append(members[0].name)
        if independent:   # _build_independent walks inputs in order, not storages
            names = [s.name for s in self.inputs if isinstance(s, TensorInput) and s.requires_grad]
        return names

    def _build_independent(self, float64: bool) -> tuple[list[Any], list[torch.Tensor]]:
        shared, _ = InputSet(self.storages, [replace(s, requires_grad=False) if isinstance(s, TensorInput) else s
                                             for s in self.inputs]).build(float64=float64)
        out, leaves = [], []
        for spec, value in zip(self.inputs, shared):
            if isinstance(spec, TensorInput):
                value = value.detach().clone()
                if spec.requires_grad:
                    value.requires_grad_(True)
                    leaves.append(value)
            out.append(value)
        return out, leaves

    # ---------------------------------------------------------------- source

    def aliasing_summary(self) -> str:
        """e.g. ``"inputs a, v share one buffer"``; empty when nothing is shared."""
        groups = []
        for k in range(len(self.storages)):
            names = [s.name for s in self.inputs if isinstance(s, TensorInput) and s.storage == k]
            if len(names) > 1:
                groups.append(f"inputs {', '.join(names)} share one buffer")
        return "; ".join(groups)

    def to_source(self) -> str:
        """Python source for an expression that rebuilds this InputSet (see module doc)."""
        lines = ["InputSet(", "    storages=["]
        for k, s in enumerate(self.storages):
            data = _encode(s.values) if s.values is not None and _nbytes(s) <= MAX_EMBEDDED_BYTES else None
            note = "" if data is not None or s.values is None else "  # values too large to embed: random"
            if data is None:
                lines.append(f"        StorageSpec({_dtype_src(s.dtype)}, {s.numel}, seed={s.seed}),{note}")
            else:
                lines.append(f"        StorageSpec({_dtype_src(s.dtype)}, {s.numel}, values=decode({_dtype_src(s.dtype)}, ")
                for i in range(0, len(data), 96):
                    lines.append(f"            {data[i:i + 96]!r}")
                lines.append("        )),")
        lines.append("    ],")
        lines.append("    inputs=[")
        for spec in self.inputs:
            if isinstance(spec, ValueInput):
                lines.append(f"        ValueInput({spec.value!r}, name={spec.name!r}),")
            else:
                lines.append(f"        TensorInput(storage={spec.storage}, shape={tuple(spec.shape)!r}, "
                             f"stride={tuple(spec.stride)!r}, offset={spec.offset}, dtype={_dtype_src(spec.dtype)}, "
                             f"requires_grad={spec.requires_grad}, is_leaf={spec.is_leaf}, name={spec.name!r}, "
                             f"is_view={spec.is_view}),")
        lines.append("    ],")
        lines.append(")")
        return "\n".join(lines)


def decode(dtype: torch.dtype, data: str) -> torch.Tensor:
    """The inverse of the encoding used by :meth:`InputSet.to_source`."""
    raw = bytearray(zlib.decompress(base64.b64decode(data)))
    if not raw:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).clone()


def is_literal(value: Any) -> bool:
    """Can ``value`` be written into a repro as a Python literal (and rebuilt by its repr)?"""
    if value is None or isinstance(value, (bool, int, str, torch.dtype)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (tuple, list, torch.Size)):
        return all(is_literal(v) for v in value)
    return False


def _encode(values: torch.Tensor) -> str:
    raw = values.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def _nbytes(s: StorageSpec) -> int:
    return s.numel * torch.empty((), dtype=s.dtype).element_size()


def _dtype_src(dtype: torch.dtype) -> str:
    return str(dtype)  # "torch.float32"


def _convert(t: torch.Tensor, float64: bool) -> torch.Tensor:
    if float64 and t.is_floating_point():
        return t.to(torch.float64)
    if float64 and t.is_complex():
        return t.to(torch.complex128)
    return t


def _owner(members: list[TensorInput], storage: StorageSpec) -> TensorInput | None:
    """The member that is the buffer's own tensor: no view, from offset 0, its elements
    exactly the buffer's (dense, no overlap, in any order of dimensions); None if none is."""
    for m in members:
        if not m.is_view and m.offset == 0 and _dense(m.shape, m.stride) == storage.numel and storage.numel > 0:
            return m
    return None


def _dense(shape: Sequence[int], stride: Sequence[int]) -> int | None:
    """The number of elements of a layout whose elements fill ``0..n-1`` once each, else None."""
    acc = 1
    for size, st in sorted(((s, st) for s, st in zip(shape, stride) if s != 1), key=lambda p: p[1]):
        if st != acc:
            return None
        acc *= size
    return acc if all(s > 0 for s in shape) else None


def _contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(size, 1)
    return tuple(reversed(strides))


def _storage_key(t: torch.Tensor):
    try:
        if t.device.type == "meta" or _is_fake(t):
            return None
        storage = t.untyped_storage()
        if storage.nbytes() == 0:
            return None
        return (t.device, storage.data_ptr())
    except Exception:  # tensor subclasses without storage: not aliased with anything
        return None


def _is_fake(t: torch.Tensor) -> bool:
    return type(t).__name__ == "FakeTensor" or "Functional" in type(t).__name__


def _storage_of(t: torch.Tensor, keep_values: bool, seed: int) -> StorageSpec:
    """The whole buffer ``t`` views (as 1-D values), or a seeded stand-in for fake tensors."""
    fake = _is_fake(t) or t.device.type == "meta"
    if fake or _storage_key(t) is None:
        needed = t.storage_offset() + sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if s > 0) + 1
        return StorageSpec(t.dtype, max(needed, 0) if t.numel() else 0, None, seed)
    numel = t.untyped_storage().nbytes() // t.element_size()
    values = None
    if keep_values:
        with torch.no_grad():
            values = t.detach().as_strided((numel,), (1,), 0).clone().cpu()
    return StorageSpec(t.dtype, numel, values, seed)
