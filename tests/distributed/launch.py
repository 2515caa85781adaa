"""Run a test body on two local processes joined by a gloo process group.

Each case is a module-level function ``body(rank, *args)`` (picklable by reference, as
``torch.multiprocessing.spawn`` needs).  It runs after ``init_process_group`` on
127.0.0.1 with a free port, with Kiln's errors raised rather than hidden by eager
fallbacks.  A failing assertion on either rank fails the test with that rank's
traceback; a hang is cut off after ``timeout`` seconds so it cannot stall CI.  A rank
whose body passed exits with ``os._exit(0)`` after tearing down its process group, so
C++ teardown during interpreter finalization cannot turn a pass into a signal death.
"""
from __future__ import annotations

import os
import socket
import time

import pytest
import torch

WORLD = 2


def distributed_available() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_gloo_available()


requires_gloo = pytest.mark.skipif(not distributed_available(), reason="torch.distributed with gloo is unavailable")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, port, body, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    import datetime
    import torch.distributed as dist
    import kiln
    torch.set_num_threads(1)      # two ranks share the machine's cores
    kiln.config.suppress_errors = False
    kiln.config.raise_on_backend_error = True
    kiln.config.warn_on_fallback = False
    dist.init_process_group("gloo", rank=rank, world_size=WORLD, timeout=datetime.timedelta(seconds=60))
    try:
        body(rank, *args)
    except BaseException:
        dist.destroy_process_group()
        raise               # spawn writes this rank's traceback for the parent
    # A clean exit: wait for the other rank, tear the group down while the interpreter
    # is whole, and leave without running interpreter finalization.  Gloo's worker
    # threads and DDP's reducer can still own tensors at that point, and destroying them
    # while Python shuts down aborts the process ("terminate called without an active
    # exception", seen once in CI on a test whose body had passed).
    dist.barrier()
    dist.destroy_process_group()
    import gc
    import sys
    gc.collect()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_on_two_ranks(body, *args, timeout: float = 240.0) -> None:
    """Run ``body(rank, *args)`` on ranks 0 and 1; raise if either fails or time runs out."""
    import torch.multiprocessing as mp
    ctx = mp.spawn(_entry, args=(free_port(), body, args), nprocs=WORLD, join=False)
    deadline = time.monotonic() + timeout
    while not ctx.join(timeout=max(0.1, min(5.0, deadline - time.monotonic()))):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            pytest.fail(f"distributed test did not finish within {timeout:.0f}s")
