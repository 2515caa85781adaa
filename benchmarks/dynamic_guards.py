"""Guard cost of a symbolic entry against the static entry of the same model.

    .venv/bin/python benchmarks/dynamic_guards.py [--calls N]

For each model of the quick suite (hidden 64, 2 layers), compiles it once with
``dynamic=False`` and once with ``dynamic=True`` at sequence length 16, then times the
entry's guard function alone (``entry.guard(fn, *args)``, the check every call pays
before the glue runs) on the same inputs, interleaved, and reports the medians and the
ratio symbolic / static.  The guard count of each entry is shown too.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import kiln
from kiln.bench import registry
from kiln.bench.models_hf import _text


def guard_timer(model, kwargs, dynamic):
    kiln.reset()
    compiled = kiln.compile(model, backend="eager", dynamic=dynamic)
    compiled(**kwargs)
    forward = type(compiled).forward
    entry = forward.entries[-1]
    fn = forward._kiln_fn
    args, kw = (compiled,), kwargs     # as the cache calls it
    assert entry.guard(fn, *args, **kw)

    def run(n):
        t0 = time.perf_counter()
        for _ in range(n):
            entry.guard(fn, *args, **kw)
        return (time.perf_counter() - t0) / n * 1e6

    return run, entry.guard_count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)   # the entries were captured for inference
    print(f"{'model':8} {'static µs':>10} {'guards':>7} {'symbolic µs':>12} {'guards':>7} {'ratio':>6}")
    for name in ("bert", "gpt2", "t5", "llama"):
        model = registry.get(name).build(False).eval()
        kwargs = _text(16, seq2seq=(name == "t5"))(False, torch.Generator().manual_seed(0))
        static, n_static = guard_timer(model, kwargs, False)
        symbolic, n_symbolic = guard_timer(model, kwargs, True)
        times = {"static": [], "symbolic": []}
        for _ in range(args.rounds):
            times["static"].append(static(args.calls))
            times["symbolic"].append(symbolic(args.calls))
        s, d = statistics.median(times["static"]), statistics.median(times["symbolic"])
        print(f"{name:8} {s:10.1f} {n_static:7d} {d:12.1f} {n_symbolic:7d} {d / s:6.2f}")


if __name__ == "__main__":
    main()
