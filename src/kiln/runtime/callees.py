"""The callee of a breaking call, compiled when the glue calls it.

At a graph break at a call (``f(x)`` where ``f`` cannot be inlined), the callee runs as
a compiled frame of its own: the glue passes it through a ``CalleeCompiler``, which
wraps it with ``kiln.compile`` on first sight and hands back the same compiled version
for the same object afterwards (memoised per callee and backend, a process-wide cache
emptied by ``kiln.reset()``).  Compiling goes through the compile-time side's callback
(``kiln.api.Compiler.compile_callee``), so this module imports nothing above Kiln's
foundation.
"""
from __future__ import annotations

import torch

from . import caches


def has_hooks(mod: torch.nn.Module) -> bool:
    """Whether calling ``mod`` runs hooks (its own or global): then it must be called as a
    module, not by its compiled forward."""
    g = torch.nn.modules.module
    return bool(mod._forward_hooks or mod._forward_pre_hooks or mod._backward_hooks
                or getattr(mod, "_backward_pre_hooks", None) or g._global_forward_hooks
                or g._global_forward_pre_hooks or g._global_backward_hooks or g._global_backward_pre_hooks)


# (id(callee), *CompileSettings.key()) -> (callee, its compiled version)
_CALLEE_MEMO: dict = caches.register_dict("runtime.callees.compiled_callees", {})


class CalleeCompiler:
    """Wraps a callee with kiln.compile at run time, memoised per callee object.
    ``compiler``: the compile-time side's (``capture.frames.graph_break.FrameCompiler``)."""

    def __init__(self, compiler):
        self.compiler = compiler

    def __call__(self, obj):
        if isinstance(obj, torch.nn.Module) and has_hooks(obj):
            return obj    # hooks may be added after the first call: checked every time
        key = (id(obj),) + self.compiler.settings.key()
        hit = _CALLEE_MEMO.get(key)
        if hit is not None and hit[0] is obj:
            return hit[1]
        compiled = self.compiler.compile_callee(obj)
        _CALLEE_MEMO[key] = (obj, compiled)
        return compiled
