"""What changed, for a guard that failed: both sides, in the user's names.

A recompile message that gives only the expected side (``expected inp is a Tensor of
dtype torch.float32, ... shape (2, 7)``) leaves the user to find the difference.  The
guard's explain twin (``capture.basics.guards.GuardCodegen.explain_source``) calls
``describe_change`` with what the guard expected and the value it found, which says
what changed: ``inp.dtype: torch.float32 -> torch.float64``, ``x.size(1): 7 -> 1``.
Where a kind has no two sides to show (an identity), the guard's own description
(``expected ...``) is the answer.  Runs only on a guard miss, never on the fast path.
"""
from __future__ import annotations

import torch


def describe_change(kind: str, name: str, expected, actual, description: str) -> str:
    """The change that made a guard fail, or ``expected <description>`` if there is
    none to show.  Never raises: it runs while Kiln decides to recompile."""
    rule = _RULES.get(kind)
    try:
        text = rule(name, expected, actual) if rule is not None else None
    except Exception:     # a value whose repr or attributes raise: say what was expected
        text = None
    return text or f"expected {description}"


def _arrow(what: str, before, after) -> str:
    return f"{what}: {before} -> {after}"


def _type(name, expected, actual):
    return _arrow(f"type({name})", expected.__name__, type(actual).__name__)


def _constant(name, expected, actual):
    if type(actual) is not type(expected) and expected is not None:
        return _arrow(name, f"{expected!r} ({type(expected).__name__})", f"{actual!r} ({type(actual).__name__})")
    return _arrow(name, repr(expected), _short(actual))


def _length(name, expected, actual):
    return _arrow(f"len({name})", expected, len(actual))


def _keys(name, expected, actual):
    return _arrow(f"keys of {name}", expected, list(actual))


def _state(name, expected, actual):
    return _arrow(name, expected, actual)


def _tensor(name, expected, actual):
    """``expected``: (type, dtype, device, requires_grad, sizes, strides), an entry None
    where it is symbolic (the shape guards check those)."""
    cls, dtype, device, requires_grad, sizes, strides = expected
    if type(actual) is not cls:
        return _arrow(f"type({name})", cls.__name__, type(actual).__name__)
    changes = []
    if actual.dtype != dtype:
        changes.append(_arrow(f"{name}.dtype", dtype, actual.dtype))
    if actual.device != device:
        changes.append(_arrow(f"{name}.device", device, actual.device))
    if actual.requires_grad != requires_grad:
        changes.append(_arrow(f"{name}.requires_grad", requires_grad, actual.requires_grad))
    if actual.dim() != len(sizes):
        changes.append(_arrow(f"{name}.dim()", len(sizes), actual.dim()))
    else:
        changes += [_arrow(f"{name}.size({i})", s, actual.size(i)) for i, s in enumerate(sizes)
                    if s is not None and actual.size(i) != s]
        if not changes and strides is not None and actual.layout == torch.strided:
            changes += [_arrow(f"{name}.stride({i})", s, actual.stride(i)) for i, s in enumerate(strides)
                        if s is not None and actual.stride(i) != s]
    return ", ".join(changes) or None


def _shape(name, expected, actual):
    """A symbolic-size guard: its condition, and the sizes the input has now."""
    now = f"{name}.shape is {tuple(actual.shape)}" if isinstance(actual, torch.Tensor) else f"{name} is {actual!r}"
    return f"expected {expected}; now {now}"


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_RULES = {"type": _type, "const": _constant, "len": _length, "keys": _keys, "tensor": _tensor,
          "shape": _shape, "global_state": _state}
