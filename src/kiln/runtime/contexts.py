"""Context managers the glue enters again, and the autocast state the guards read.

A ``with`` block that spans a graph break is left by the continuation, so the glue
enters the context again before handing over and passes its ``__exit__`` on
(``entered_grad_exit``, ``entered_inference_exit``, ``entered_autocast_exit``;
``no_exit`` for a context with nothing to undo).  An entry traced under autocast is
valid only under the same autocast settings, which its guard reads on every call
(``autocast_state``).  Which of these an entry calls is decided at compile time
(``capture.values.contexts``, ``capture.basics.guards``).
"""
from __future__ import annotations

import torch


def entered_inference_exit():
    """Enter ``torch.inference_mode()`` now; its ``__exit__``."""
    ctx = torch.inference_mode()
    ctx.__enter__()
    return ctx.__exit__


def entered_grad_exit(mode: bool, prior: bool):
    """Switch grad mode to ``mode`` now; an ``__exit__`` that puts back ``prior`` (the mode
    from before the with-block, not the one the glue runs under)."""
    ctx = torch.set_grad_enabled(mode)  # switches now
    ctx.prev = prior
    return ctx.__exit__


def no_exit(*exc_info):
    """The ``__exit__`` of a context that has nothing to undo."""
    return None


def entered_autocast_exit(device, dtype, enabled, cache_enabled):
    """Enter ``torch.autocast`` with these settings now; its ``__exit__``."""
    ctx = torch.amp.autocast(device, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
    ctx.__enter__()
    return ctx.__exit__


def autocast_state() -> tuple:
    """(device, dtype) for every device where autocast is on."""
    out = []
    for device in ("cpu", "cuda", "xpu", "mps", "hpu"):
        try:
            if torch.is_autocast_enabled(device):
                out.append((device, str(torch.get_autocast_dtype(device))))
        except RuntimeError:
            continue
    return tuple(out)
