"""Kiln: a Python-level JIT compiler for PyTorch.

Public API only; the machinery lives in the submodules.
"""
from __future__ import annotations

import sys as _sys

if _sys.version_info[:2] != (3, 11):  # pragma: no cover - checked on import
    raise ImportError(
        f"Kiln supports CPython 3.11 only (bytecode facts are version specific); "
        f"this is Python {_sys.version_info.major}.{_sys.version_info.minor}"
    )

from . import backends, testing  # noqa: E402
from .api import compile, disable, graph_break, reset  # noqa: E402,A004
from .markers import mark_dynamic, mark_static, maybe_mark_dynamic  # noqa: E402
from .config import config  # noqa: E402
from .debug.explain import explain  # noqa: E402
from .exc import BackendError, KilnError, Unsupported  # noqa: E402
from .metrics import metrics  # noqa: E402

__all__ = [
    "compile", "disable", "graph_break", "reset", "config", "backends", "testing", "explain",
    "mark_dynamic", "maybe_mark_dynamic", "mark_static",
    "metrics", "Unsupported", "KilnError", "BackendError",
]
