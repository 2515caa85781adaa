"""The bucket layout of the DistributedDataParallel module whose forward is running.

DDP marks the module it is running (``DistributedDataParallel._get_active_ddp_module``,
set around the call of the wrapped module) for compilers to see.  Kiln compiles a
graph lazily, on the first call of its frame, so a graph traced from a module inside a
DDP forward (``DDP(kiln.compile(model))``, and ``kiln.compile(DDP(model))`` too, where
DDP's own forward runs as Python around the compiled inner module) is compiled while
that mark is set.  ``active_bucket_layout`` reads it for
``kiln.backends.ddp_split.BucketSplittingBackend``, which the API installs around every
backend.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..backends import BucketLayout


def _ddp_class():
    if not torch.distributed.is_available():
        return None
    return torch.nn.parallel.DistributedDataParallel


def active_bucket_layout() -> Optional[BucketLayout]:
    """The layout of the DDP module whose forward is running, or None outside DDP."""
    ddp_class = _ddp_class()
    find = getattr(ddp_class, "_get_active_ddp_module", None)
    ddp = find() if find is not None else None
    return bucket_layout(ddp) if ddp is not None else None


def bucket_layout(ddp) -> BucketLayout:
    """Bucket byte caps (in the order the backward fills buckets) and reduced parameters."""
    per_bucket = list(getattr(ddp, "bucket_bytes_cap_list", None) or [])
    cap = int(ddp.bucket_bytes_cap)
    config = getattr(ddp, "_bucket_config", None)
    first = int(getattr(config, "first_bucket_bytes_cap", cap)) if config is not None else cap
    caps = tuple(per_bucket) if per_bucket else (first, cap)
    ignored = set(getattr(ddp, "parameters_to_ignore", ()) or ())
    params = tuple(p for name, p in ddp.module.named_parameters() if p.requires_grad and name not in ignored)
    return BucketLayout(caps=caps, params=params)
