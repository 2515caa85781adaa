"""Accuracy checking glue: flatten outputs, then ask ``kiln.debug.accuracy``.

Why the harness does not judge accuracy itself: Kiln's tests and the benchmark must
agree on what "accurate" means, so the comparison (error relative to the tensor's
scale, compiled-vs-fp64 error against eager-fp32-vs-fp64 error) lives in one place,
``kiln.debug.accuracy``.  This module only turns a model's output (a tensor, a
Hugging Face ``ModelOutput``, a dict, a tuple, or in training the loss plus every
parameter gradient) into a flat ``{name: tensor}`` map, so failures are named by a
readable path, detached from the graph and safe from later calls.

``kiln.debug.accuracy`` is imported lazily; when it is missing the check reports
``unavailable`` instead of inventing a verdict.
"""
from __future__ import annotations

import importlib

import torch

ACCURACY_MODULE = "kiln.debug.accuracy"


def flatten(obj, prefix: str = "output") -> dict[str, torch.Tensor]:
    """Tensors inside ``obj`` by path (``output.last_hidden_state``, ``output.1``)."""
    flat: dict[str, torch.Tensor] = {}
    if isinstance(obj, torch.Tensor):
        flat[prefix] = obj
    elif isinstance(obj, dict):   # ModelOutput is a dict too
        for key, value in obj.items():
            flat.update(flatten(value, f"{prefix}.{key}"))
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            flat.update(flatten(value, f"{prefix}.{i}"))
    return flat


def snapshot(flat: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Detached copies, so later calls cannot change what we compare."""
    return {k: v.detach().clone() for k, v in flat.items()}


def _module():
    try:
        return importlib.import_module(ACCURACY_MODULE)
    except ImportError:
        return None


def available() -> bool:
    return _module() is not None


def fp64_copy(obj):
    """The fp64 reference copy of a model or of its inputs (``kiln.debug.accuracy``)."""
    mod = _module()
    if mod is None:
        raise ImportError(f"{ACCURACY_MODULE} is not available")
    return mod.fp64_copy(obj)


def compare(expected: dict, actual: dict, reference: dict, name: str = "output") -> tuple[str, str]:
    """Compare compiled (``actual``) with eager (``expected``) against fp64 (``reference``).

    Returns ``(verdict, detail)``: verdict is ``ok``, ``fail`` or ``unavailable``;
    detail lists the first failing tensors in the report's own words.
    """
    mod = _module()
    if mod is None:
        return "unavailable", f"{ACCURACY_MODULE} is not available; accuracy not checked"
    report = mod.compare(expected, actual, reference, name=name)
    if report.ok:
        return "ok", ""
    failures = list(getattr(report, "failures", None) or [str(report)])
    more = f" (+{len(failures) - 3} more)" if len(failures) > 3 else ""
    return "fail", "; ".join(f.strip().replace("\n", " ") for f in failures[:3]) + more
