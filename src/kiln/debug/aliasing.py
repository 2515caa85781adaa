"""What a call did besides computing values: which outputs alias inputs, which inputs changed.

A compiled function must match eager on these as well as on values.  If eager returns
a view of an input and the compiled function returns a copy, a caller that then writes
into that output in place (a common idiom in training code) silently stops updating
the input.  If eager mutates an input and the compiled function does not (or does it
without bumping the version counter), optimizer state, KV caches or autograd's saved-
tensor checks go wrong.  :func:`record_call` observes one call, :func:`compare_aliasing`
lists how two observations differ.  The observing (storage keys, the walk, the snapshot of
the inputs) is :mod:`kiln.comparison`'s, shared with the tests; the report is this module's.

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

from ..comparison import REPORT_WALK, InputWatch, aliasing

__all__ = ["CallRecord", "record_call", "aliasing_of", "compare_aliasing", "output_aliasing_differences",
           "mutation_differences"]


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


def aliasing_of(inputs: Sequence[Any], outputs: Any) -> tuple[dict[str, tuple[str, ...]], list[tuple[str, str]]]:
    """Map each output path to the input paths it shares storage with; also output-output pairs."""
    facts = aliasing((list(inputs), outputs), ("input", "output"), how=REPORT_WALK, empty_tensors_alias=True)
    is_output = {p: root == 1 for p, root in zip(facts.paths, facts.roots)}
    aliases = {}
    for path in facts.paths:
        shared = facts.sharing(path, lambda q: not is_output[q]) if is_output[path] else ()
        if shared:
            aliases[path] = shared
    return aliases, facts.shared(among=lambda p: is_output[p])


def record_call(fn: Callable, inputs: Sequence[Any]) -> CallRecord:
    """Call ``fn(*inputs)`` and record its outputs, output aliasing and input mutations."""
    watch = InputWatch(list(inputs), "input", REPORT_WALK)
    outputs = fn(*inputs)
    aliases, pairs = aliasing_of(inputs, outputs)
    mutated, bumped = watch.changes()
    return CallRecord(outputs, inputs, aliases, pairs, mutated, bumped)


def compare_aliasing(eager: CallRecord, compiled: CallRecord) -> list[str]:
    """Describe every difference in aliasing and mutation between two calls ([] if none):
    :func:`output_aliasing_differences` then :func:`mutation_differences`."""
    return output_aliasing_differences(eager, compiled) + mutation_differences(eager, compiled)


def output_aliasing_differences(eager: CallRecord, compiled: CallRecord, *,
                                lost_output_pairs: bool = True) -> list[str]:
    """Which outputs share memory with which inputs, and with each other, differently.
    ``lost_output_pairs=False`` leaves out outputs that share memory in eager only (for one
    graph, whose glue rebuilds an output's view of another output: ``Codegen.realias_outputs``)."""
    problems: list[str] = []
    for path in sorted(set(eager.output_aliases) | set(compiled.output_aliases)):
        e, c = eager.output_aliases.get(path, ()), compiled.output_aliases.get(path, ())
        if e != c:
            problems.append(f"{path} shares memory with {_names(e)} in eager but with {_names(c)} when compiled")
    e_pairs, c_pairs = set(eager.output_pairs), set(compiled.output_pairs)
    if lost_output_pairs:
        for a, b in sorted(e_pairs - c_pairs):
            problems.append(f"{a} and {b} share storage in eager but not when compiled")
    for a, b in sorted(c_pairs - e_pairs):
        problems.append(f"{a} and {b} share storage when compiled but not in eager")
    return problems


def mutation_differences(eager: CallRecord, compiled: CallRecord) -> list[str]:
    """Which inputs were changed in place, and whose version counters moved, differently."""
    problems: list[str] = []
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
