"""Kiln: a Python-level JIT compiler for PyTorch.

Public API only; the machinery lives in the submodules.
"""
from __future__ import annotations

# past capture's face on purpose: the version check must run before capture is imported
from .capture.basics import opcodes as _opcodes

if not _opcodes.supported():  # pragma: no cover - checked on import
    raise ImportError(
        f"Kiln supports CPython {', '.join('%d.%d' % v for v in _opcodes.SUPPORTED_VERSIONS)} "
        f"(its bytecode facts are a table per version, kiln/capture/basics/opcodes.py); "
        f"this is Python {_opcodes.RUNNING[0]}.{_opcodes.RUNNING[1]}"
    )

from . import backends, testing  # noqa: E402
from .api import compile, disable, graph_break, reset, set_stance  # noqa: E402,A004
from .markers import mark_dynamic, mark_static, maybe_mark_dynamic  # noqa: E402
from .config import config  # noqa: E402
from .debug.explain import explain  # noqa: E402
from .exc import BackendError, KilnError, RecompileError, Unsupported  # noqa: E402
from .exporting import export  # noqa: E402
from .metrics import metrics  # noqa: E402

__all__ = [
    "compile", "export", "disable", "graph_break", "reset", "config", "backends", "testing", "explain",
    "mark_dynamic", "maybe_mark_dynamic", "mark_static",
    "metrics", "Unsupported", "KilnError", "BackendError", "set_stance", "RecompileError",
]
