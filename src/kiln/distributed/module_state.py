"""Composable distributed APIs (FSDP2's ``fully_shard``, ``replicate``) keep a module's
state in two places: in the module's ``__dict__`` (shared by a compiled module and its
original, so nothing to do) and in a process-wide table keyed by the module object.
A compiled module is a second object around the same ``__dict__``; without an entry of
its own in that table, ``compiled.reshard()``, ``compiled.set_requires_gradient_sync()``
and FSDP's other methods would find no state for it.
"""
from __future__ import annotations

import torch


def share_module_state(original: torch.nn.Module, wrapper: torch.nn.Module) -> None:
    """Give ``wrapper`` the composable-API state ``original`` has, if it has one."""
    if not torch.distributed.is_available():
        return
    # imported here: torch.distributed's composable state is optional (builds without
    # distributed support) and only needed when a module was sharded before compiling
    from torch.distributed import _composable_state
    get_state = getattr(_composable_state, "_get_module_state", None)
    insert_state = getattr(_composable_state, "_insert_module_state", None)
    if get_state is None or insert_state is None:
        return
    state = get_state(original)
    if state is not None and get_state(wrapper) is None:
        insert_state(wrapper, state)
