"""The two frontends the harness compares: Kiln and torch.compile (TorchDynamo).

Why an adapter per frontend: the runner must not care whose capture it measures.
Each adapter compiles a model with a named backend, resets its caches, tells a
deliberate frontend failure apart from a runtime error, and reports the same four
numbers: graphs, graph breaks (with reasons), recompiles and the frontend's own
compile seconds.  Kiln's come from ``kiln.metrics``; torch's from
``torch._dynamo.utils`` (counters and compilation metrics), read only here.

For ``kiln bench --dynamic`` each adapter also counts recompile-limit hits (frames
that reached the limit and run eagerly from then on) over a block of calls,
``with fe.watch_limits() as hits: ...; hits.count``.  Kiln says so with a
``KilnWarning``; torch logs a warning on ``torch._dynamo.convert_frame``'s logger.

Backend names are shared where both sides have them (eager, aot_eager, inductor).
Kiln's ``aten`` backend (graphs decomposed to ATen ops, run eagerly) has no
namesake in torch; its closest torch backend is ``aot_eager``, used for the torch
row and shown in the row's backend column as ``aten->aot_eager``.
"""
from __future__ import annotations

import importlib
import logging
import warnings
from collections import Counter
from contextlib import contextmanager

import torch

from .. import api
from ..backends import list_backends, lookup
from ..cache import KilnWarning
from ..exc import KilnError
from ..metrics import metrics

#: kiln backend name -> the torch backend that plays the same part
TORCH_EQUIVALENT = {"aten": "aot_eager"}


def top_reasons(reasons, limit: int = 3) -> str:
    """``"reason (count); ..."``, most frequent first, first line of each reason only."""
    counts = Counter()
    for reason, n in reasons:
        first = (str(reason).strip().splitlines() or ["?"])[0][:160]
        counts[first] += n
    return "; ".join(f"{r} ({n})" for r, n in counts.most_common(limit))


class LimitHits:
    """What a ``watch_limits()`` block saw: ``count`` recompile-limit hits, and their messages."""

    def __init__(self):
        self.messages: list[str] = []

    @property
    def count(self) -> int:
        return len(self.messages)


class KilnFrontend:
    name = "kiln"

    def backend_label(self, backend: str) -> str:
        return backend

    def known_backends(self) -> list[str]:
        return list_backends()

    def reset(self) -> None:
        api.reset()   # also zeroes kiln.metrics

    def compile(self, fn, backend):
        return api.compile(fn, backend=backend)

    def backend_callable(self, backend: str):
        """The ``(gm, example_inputs)`` function ``backend`` names (to wrap it)."""
        return lookup(backend)

    def is_frontend_error(self, exc: BaseException) -> bool:
        return isinstance(exc, KilnError)

    def stats(self) -> dict:
        m = metrics
        breaks = list(getattr(m, "breaks", []))
        return {
            "graphs": int(getattr(m, "graphs", 0)),
            "breaks": len(breaks),
            "top_breaks": top_reasons((getattr(b, "reason", b), 1) for b in breaks),
            "recompiles": int(getattr(m, "recompiles", 0)),
        }

    @contextmanager
    def watch_limits(self):
        """Count Kiln's recompile-limit warnings (one per frame that reaches the limit)."""
        hits = LimitHits()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", KilnWarning)
            try:
                yield hits
            finally:
                hits.messages += [str(w.message) for w in caught
                                  if issubclass(w.category, KilnWarning) and "recompile limit" in str(w.message)]


class TorchFrontend:
    name = "torch"

    def _torch_backend(self, backend: str) -> str:
        return TORCH_EQUIVALENT.get(backend, backend)

    def backend_label(self, backend: str) -> str:
        tb = self._torch_backend(backend)
        return backend if tb == backend else f"{backend}->{tb}"

    def known_backends(self) -> list[str]:
        names = set(_dynamo().list_backends(exclude_tags=()))
        return sorted(names | {k for k, v in TORCH_EQUIVALENT.items() if v in names})

    def reset(self) -> None:
        dynamo = _dynamo()
        utils = importlib.import_module("torch._dynamo.utils")
        dynamo.reset()
        utils.counters.clear()
        clear = getattr(utils, "clear_compilation_metrics", None)
        if clear is not None:
            clear()

    def compile(self, fn, backend):
        return torch.compile(fn, backend=self._torch_backend(backend) if isinstance(backend, str) else backend)

    def backend_callable(self, backend: str):
        """The ``(gm, example_inputs)`` function ``backend`` names (to wrap it)."""
        return _dynamo().lookup_backend(self._torch_backend(backend))

    def is_frontend_error(self, exc: BaseException) -> bool:
        return isinstance(exc, importlib.import_module("torch._dynamo.exc").TorchDynamoException)

    def stats(self) -> dict:
        utils = importlib.import_module("torch._dynamo.utils")
        breaks = utils.counters["graph_break"]
        getter = getattr(utils, "get_compilation_metrics", None)
        compiles = list(getter()) if getter is not None else []
        # an attempt refused at the recompile limit is logged as a compile with a
        # recompile reason too, but nothing was captured: not a recompile
        recompiles = sum(1 for c in compiles if getattr(c, "recompile_reason", None)
                         and "recompile limit exceeded" not in str(getattr(c, "fail_reason", None) or ""))
        return {
            "graphs": int(utils.counters["stats"]["unique_graphs"]),
            "breaks": int(sum(breaks.values())),
            "top_breaks": top_reasons((_torch_reason(r), n) for r, n in breaks.items()),
            "recompiles": recompiles,
        }

    @contextmanager
    def watch_limits(self):
        """Count dynamo's "hit config.recompile_limit" warnings (one per frame that
        reaches the limit); dynamo logs them rather than raising a Python warning."""
        hits = LimitHits()
        handler = _LimitLogHandler(hits)
        logger = logging.getLogger(TORCH_LIMIT_LOGGER)
        logger.addHandler(handler)
        try:
            yield hits
        finally:
            logger.removeHandler(handler)


#: the logger dynamo reports a recompile-limit hit on, and how that message starts
TORCH_LIMIT_LOGGER = "torch._dynamo.convert_frame"
TORCH_LIMIT_PREFIX = "torch._dynamo hit config."


class _LimitLogHandler(logging.Handler):
    def __init__(self, hits: LimitHits):
        super().__init__(logging.WARNING)
        self.hits = hits

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(TORCH_LIMIT_PREFIX):
            self.hits.messages.append(message)


def _torch_reason(reason: str) -> str:
    """Dynamo's first line is generic ("Failed to trace builtin operator"); its
    ``Explanation:`` line says what was not traced, so keep both."""
    lines = [ln.strip() for ln in str(reason).strip().splitlines() if ln.strip()]
    explanation = next((ln[len("Explanation:"):].strip() for ln in lines if ln.startswith("Explanation:")), "")
    head = lines[0] if lines else "?"
    return f"{head}: {explanation}" if explanation else head


_FRONTENDS = {"kiln": KilnFrontend, "torch": TorchFrontend}


def get(name: str):
    try:
        return _FRONTENDS[name]()
    except KeyError:
        raise ValueError(f"unknown frontend {name!r}; known frontends: {', '.join(_FRONTENDS)}") from None


def _dynamo():
    """torch._dynamo, for the torch.compile side of the comparison only (Kiln's own
    capture never imports it)."""
    return importlib.import_module("torch._dynamo")
