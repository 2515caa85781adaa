"""What a call did besides computing values: which outputs alias inputs, which inputs changed.

A compiled function must match eager on these as well as on values.  If eager returns
a view of an input and the compiled function returns a copy, a caller that then writes
into that output in place (a common idiom in training code) silently stops updating
the input.  If eager mutates an input and the compiled function does not (or does it
without bumping the version counter), optimizer state, KV caches or autograd's saved-
tensor checks go wrong.  :func:`record_call` observes one call, :func:`compare_aliasing`
lists how two observations differ.

Aliasing is storage sharing: two tensors alias if their ``untyped_storage()`` has the
same data pointer on the same device (empty storages never alias).  An input counts as
mutated if its values, sizes, strides or storage offset changed (NaN equals NaN), and
separately we record whether its version counter moved, which is what autograd uses to
detect in-place changes.  Version counters are compared where they matter: a compiled
call must bump the counter of every input it changes, and must not bump one eager
leaves alone (that makes autograd report a spurious in-place modification).  Eager
bumps that come with no change to the input itself (an in-place metadata op such as
``x.detach().unsqueeze_(0)``, which shares ``x``'s counter) are not required of compiled
code: AOTAutograd, like any functionalizing compiler, does not replay them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from ._tree import tensor_leaves

__all__ = ["CallRecord", "record_call", "aliasing_of", "compare_aliasing"]


@dataclass
class CallRecord:
    """One observed call: its outputs and its side effects on the inputs.

    Inputs are named ``input[i]`` (and deeper paths for nested inputs); outputs
    ``output...`` as in :mod:`kiln.debug.accuracy`.
    """

    outputs: Any
    inputs: Sequence[Any]
    #: output path -> input paths whose storage it shares
    output_aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: pairs of output paths that share storage with each other
    output_pairs: list[tuple[str, str]] = field(default_factory=list)
    #: input paths whose values or metadata changed
    mutated: tuple[str, ...] = ()
    #: input paths whose version counter moved
    bumped: tuple[str, ...] = ()


def _storage_key(t: torch.Tensor):
    try:
        storage = t.untyped_storage()
    except Exception:  # tensors without storage (some subclasses): treat as unaliased
        return None
    if storage.nbytes() == 0:
        return None
    return (t.device, storage.data_ptr())


def aliasing_of(inputs: Sequence[Any], outputs: Any) -> tuple[dict[str, tuple[str, ...]], list[tuple[str, str]]]:
    """Map each output path to the input paths it shares storage with; also output-output pairs."""
    owners: dict[Any, list[str]] = {}
    for path, t in tensor_leaves(list(inputs), "input"):
        key = _storage_key(t)
        if key is not None:
            owners.setdefault(key, []).append(path)
    aliases: dict[str, tuple[str, ...]] = {}
    seen: dict[Any, list[str]] = {}
    pairs: list[tuple[str, str]] = []
    for path, t in tensor_leaves(outputs, "output"):
        key = _storage_key(t)
        if key is None:
            continue
        if key in owners:
            aliases[path] = tuple(owners[key])
        for other in seen.get(key, []):
            pairs.append((other, path))
        seen.setdefault(key, []).append(path)
    return aliases, pairs


def record_call(fn: Callable, inputs: Sequence[Any]) -> CallRecord:
    """Call ``fn(*inputs)`` and record its outputs, output aliasing and input mutations."""
    before = []
    for path, t in tensor_leaves(list(inputs), "input"):
        with torch.no_grad():
            before.append((path, t, t._version, t.detach().clone(), t.shape, t.stride(), t.storage_offset()))
    outputs = fn(*inputs)
    aliases, pairs = aliasing_of(inputs, outputs)
    mutated, bumped = [], []
    for path, t, version, values, shape, stride, offset in before:
        if t._version != version:
            bumped.append(path)
        if (t.shape, t.stride(), t.storage_offset()) != (shape, stride, offset) or not _same_values(t, values):
            mutated.append(path)
    return CallRecord(outputs, inputs, aliases, pairs, tuple(mutated), tuple(bumped))


def _same_values(t: torch.Tensor, old: torch.Tensor) -> bool:
    t = t.detach()
    if t.shape != old.shape or t.dtype != old.dtype:
        return False
    if t.is_floating_point() or t.is_complex():
        return bool(((t == old) | (torch.isnan(t) & torch.isnan(old))).all())
    return torch.equal(t, old)


def compare_aliasing(eager: CallRecord, compiled: CallRecord) -> list[str]:
    """Describe every difference in aliasing and mutation between two calls ([] if none)."""
    problems: list[str] = []
    for path in sorted(set(eager.output_aliases) | set(compiled.output_aliases)):
        e, c = eager.output_aliases.get(path, ()), compiled.output_aliases.get(path, ())
        if e != c:
            problems.append(f"{path} aliases {_names(e)} in eager but {_names(c)} when compiled")
    e_pairs, c_pairs = set(eager.output_pairs), set(compiled.output_pairs)
    for a, b in sorted(e_pairs - c_pairs):
        problems.append(f"{a} and {b} share storage in eager but not when compiled")
    for a, b in sorted(c_pairs - e_pairs):
        problems.append(f"{a} and {b} share storage when compiled but not in eager")
    for path in sorted(set(eager.mutated) - set(compiled.mutated)):
        problems.append(f"{path} changed in eager but not when compiled")
    for path in sorted(set(compiled.mutated) - set(eager.mutated)):
        problems.append(f"{path} changed when compiled but not in eager")
    for path in sorted(set(compiled.bumped) - set(eager.bumped)):
        problems.append(f"{path} had its version counter bumped when compiled but not in eager "
                        f"(autograd may report a spurious in-place modification)")
    for path in sorted((set(eager.bumped) & set(eager.mutated) & set(compiled.mutated)) - set(compiled.bumped)):
        problems.append(f"{path} was changed without bumping its version counter when compiled "
                        f"(autograd cannot notice the change)")
    return problems


def _names(paths: tuple[str, ...]) -> str:
    return ", ".join(paths) if paths else "no input"
