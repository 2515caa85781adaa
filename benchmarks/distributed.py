"""One DDP training step of a small transformer on 2 local processes (gloo, 127.0.0.1):
eager DDP beside Kiln and torch.compile, each with and without splitting the graph at
gradient-bucket boundaries.

    .venv/bin/python benchmarks/distributed.py [--backend aot_eager] [--steps 10]
        [--dim 128] [--layers 4] [--batch 8] [--bucket-cap-mb 1]

Each configuration wraps a fresh copy of the same model in DistributedDataParallel,
compiles it (``kiln.compile(ddp)`` / ``torch.compile(ddp)``), runs warm-up steps (the
first compiles; DDP rebuilds its buckets after the first), then times ``--steps``
rounds, in which each configuration runs one step of forward + backward + SGD step
between two barriers (in turns, so that load from other processes spreads evenly).
Rank 0 prints the median step time per configuration and its ratio to eager DDP, and
the number of stages Kiln split its graphs into.  On a CPU-only machine with two shared cores the
all-reduce and the backward compete for the same cores, so the times are indicative;
``tests/distributed/test_ddp_overlap.py`` is the correctness signal for the overlap.
The torch.compile side reaches ``torch._dynamo`` (its ``optimize_ddp`` switch) through
importlib, as the rest of the bench harness does.
"""
from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time
from pathlib import Path

import torch

import kiln

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests.distributed: model and launcher

CONFIGS = ("eager DDP", "kiln, split", "kiln, no split", "torch.compile, split", "torch.compile, no split")


def _compile(name: str, ddp, backend: str):
    """``ddp`` as configuration ``name`` runs it; both switches are read when a graph is
    compiled, so each configuration keeps the setting it was warmed up with."""
    if name == "eager DDP":
        return ddp
    if name.startswith("kiln"):
        kiln.config.ddp_split_graphs = name.endswith(", split")
        return kiln.compile(ddp, backend=backend)
    dynamo = importlib.import_module("torch._dynamo")
    dynamo.config.optimize_ddp = name.endswith(", split")
    return torch.compile(ddp, backend=backend)


class _Setup:
    """One configuration: its DDP model, optimizer and data, warmed up."""

    def __init__(self, name, rank, args):
        from torch.nn.parallel import DistributedDataParallel

        from tests.distributed.tiny_transformer import batch, build
        self.name = name
        ddp = DistributedDataParallel(build(dim=args.dim, layers=args.layers), bucket_cap_mb=args.bucket_cap_mb)
        stages_before = kiln.metrics.ddp_stages
        self.model = _compile(name, ddp, args.backend)
        self.opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        self.data = [batch(step, rank, batch_size=args.batch) for step in range(4)]
        self.step = 0
        self.times = []
        for _ in range(args.warmup):
            self.run()
        self.stages = kiln.metrics.ddp_stages - stages_before if name.startswith("kiln") else None

    def run(self):
        self.model(*self.data[self.step % len(self.data)]).backward()
        self.opt.step()
        self.opt.zero_grad()
        self.step += 1


def _run(rank, args, out_path):
    """Warm every configuration up, then time them in turns (one step each per round),
    so that load from other processes on the machine spreads over all of them."""
    import torch.distributed as dist
    torch.manual_seed(0)
    kiln.config.raise_on_backend_error = True
    setups = [_Setup(name, rank, args) for name in CONFIGS]
    for _ in range(args.steps):
        for setup in setups:
            dist.barrier()
            start = time.perf_counter()
            setup.run()
            dist.barrier()
            setup.times.append(time.perf_counter() - start)
    if rank == 0:
        with open(out_path, "w") as f:
            for s in setups:
                f.write(f"{s.name}\t{statistics.median(s.times)}\t{'' if s.stages is None else s.stages}\n")


def _entry(rank, port, args, out_path):
    # the launcher in tests/distributed sets up gloo on 127.0.0.1 the same way
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch.distributed as dist
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        _run(rank, args, out_path)
    finally:
        dist.destroy_process_group()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="aot_eager", help="backend for both Kiln and torch.compile")
    p.add_argument("--steps", type=int, default=10, help="timed steps per configuration")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation, bucket rebuild)")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--bucket-cap-mb", type=float, default=1.0, help="DDP bucket size (default: a few buckets)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    args = p.parse_args(argv)

    import tempfile

    import torch.multiprocessing as mp

    from tests.distributed.launch import free_port
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "rows.tsv")
        mp.spawn(_entry, args=(free_port(), args, out_path), nprocs=2)
        rows = [line.rstrip("\n").split("\t") for line in open(out_path)]
    eager = float(rows[0][1])
    print(f"DDP training step, 2 gloo processes, backend={args.backend}, dim={args.dim}, layers={args.layers}, "
          f"batch={args.batch}, bucket_cap_mb={args.bucket_cap_mb}, torch {torch.__version__}")
    print(f"{'configuration':<26}{'ms/step':>10}{'vs eager':>10}{'stages':>8}")
    for name, seconds, stages in rows:
        print(f"{name:<26}{float(seconds) * 1e3:>10.2f}{float(seconds) / eager:>10.2f}{stages or '-':>8}")


if __name__ == "__main__":
    main()
