"""Per-call overhead and capture time: Kiln beside torch.compile, same process.

    .venv/bin/python benchmarks/overhead.py [--repeat N]

For a few small programs (so the graph's own run time is tiny and the frontend's
guard + glue cost dominates) it reports, per frontend: capture time of the first
call, steady-state time per call, eager time per call, and the ratio Kiln/torch.
Both frontends use the ``eager`` backend, so the difference is the frontend only.
"""
from __future__ import annotations

import argparse
import time

import torch

import kiln


def add_one(x):
    return x + 1


def mlp_step(x, w1, w2):
    return torch.relu(x @ w1) @ w2


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(8))
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.norm(x)


def many_args(a, b, c, d, e, f, g, h):
    return a + b + c + d + e + f + g + h


def cases():
    x = torch.randn(4, 16)
    yield "x + 1", add_one, (torch.randn(8),)
    yield "mlp (3 tensors)", mlp_step, (x, torch.randn(16, 16), torch.randn(16, 16))
    yield "8 args", many_args, tuple(torch.randn(4) for _ in range(8))
    block = Block().eval()
    yield "module (8 Linear + LayerNorm)", block, (x,)


def per_call(fn, args, repeat):
    for _ in range(10):
        fn(*args)
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn(*args)
    return (time.perf_counter() - t0) / repeat


def first_call(make, args):
    t0 = time.perf_counter()
    fn = make()
    fn(*args)
    return fn, time.perf_counter() - t0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    dynamo = __import__("torch._dynamo").__dict__["_dynamo"]  # only for torch.compile's reset
    rows = []
    for name, fn, inputs in cases():
        with torch.no_grad():
            eager = per_call(fn, inputs, args.repeat)
            kiln.reset()
            k_fn, k_capture = first_call(lambda: kiln.compile(fn), inputs)
            k_call = per_call(k_fn, inputs, args.repeat)
            dynamo.reset()
            t_fn, t_capture = first_call(lambda: torch.compile(fn, backend="eager"), inputs)
            t_call = per_call(t_fn, inputs, args.repeat)
        rows.append((name, eager, k_call, t_call, k_capture, t_capture))
    print(f"{'program':32} {'eager us':>9} {'kiln us':>9} {'torch us':>9} {'kiln ovh':>9} {'torch ovh':>9} "
          f"{'ovh ratio':>9} {'kiln cap s':>10} {'torch cap s':>11} {'cap ratio':>9}")
    for name, e, k, t, kc, tc in rows:
        ko, to = (k - e) * 1e6, (t - e) * 1e6
        print(f"{name:32} {e * 1e6:9.1f} {k * 1e6:9.1f} {t * 1e6:9.1f} {ko:9.1f} {to:9.1f} "
              f"{(ko / to if to > 0 else float('nan')):9.2f} {kc:10.3f} {tc:11.3f} {kc / tc:9.2f}")


if __name__ == "__main__":
    main()
