"""Deep models: how capture and compile time grow with the number of layers.

    .venv/bin/python benchmarks/deep_layers.py [--models llama gpt2] [--layers 2 16 32]
        [--frontends kiln kiln-inline torch] [--skip-inductor] [--json out.json]

For LlamaModel and GPT2Model from transformers (hidden size 64, inference under
``no_grad``, batch 2 x 32 tokens), at each depth, each in a fresh process:

* ``capture``: Kiln's first call with the eager backend (capture, no compiler; the
  frontends are imported before timing), for
  ``kiln`` (repeated layers traced once, the default) and ``kiln-inline``
  (``kiln.config.reuse_layer_bodies = False``: every layer inlined);
* ``first``: the first call under inductor (capture plus inductor's compile) with an
  empty inductor cache directory of its own, for both Kiln variants and torch.compile;
* ``steady``: the median of 50 calls after warm-up under inductor (same processes).

Growth ratios are depth N over depth 2 of the same frontend; ``vs torch`` is Kiln over
torch.compile at the same depth.  One thread per process, so the runs do not compete.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def build(model: str, layers: int):
    import torch
    import transformers

    if model == "llama":
        config = transformers.LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128,
                                          num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                          max_position_embeddings=128)
        cls = transformers.LlamaModel
    else:
        config = transformers.GPT2Config(vocab_size=1000, n_embd=64, n_layer=layers, n_head=4, n_positions=128)
        cls = transformers.GPT2Model
    for key, value in config.to_dict().items():
        if ("dropout" in key or key.endswith("_pdrop")) and isinstance(value, float):
            setattr(config, key, 0.0)
    config.use_cache = False
    torch.manual_seed(0)
    module = cls(config).eval()
    gen = torch.Generator().manual_seed(0)
    inputs = {"input_ids": torch.randint(3, 1000, (2, 32), generator=gen),
              "attention_mask": torch.ones(2, 32, dtype=torch.long)}
    return module, inputs


def child(model: str, layers: int, frontend: str, backend: str) -> None:
    import torch

    torch.set_num_threads(1)
    module, inputs = build(model, layers)
    # the frontends are imported before the clock starts: what grows with depth is timed
    if frontend == "torch":
        import torch._dynamo  # noqa: F401
    else:
        import kiln
        kiln.config.reuse_layer_bodies = frontend == "kiln"
    with torch.no_grad():
        expected = module(**inputs).last_hidden_state
        t0 = time.perf_counter()
        if frontend == "torch":
            compiled = torch.compile(module, backend=backend)
        else:
            compiled = kiln.compile(module, backend=backend)
        out = compiled(**inputs).last_hidden_state
        first = time.perf_counter() - t0
        steady = None
        if backend == "inductor":
            for _ in range(10):
                compiled(**inputs)
            times = []
            for _ in range(50):
                t = time.perf_counter()
                compiled(**inputs)
                times.append(time.perf_counter() - t)
            steady = statistics.median(times)
    error = (out - expected).abs().max().item()
    print(json.dumps({"first": first, "steady": steady, "error": error}))


def run_child(model, layers, frontend, backend, cache_dir) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir, OMP_NUM_THREADS="1")
    cmd = [sys.executable, __file__, "--child", model, str(layers), frontend, backend]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["llama", "gpt2"])
    parser.add_argument("--layers", nargs="+", type=int, default=[2, 16, 32])
    parser.add_argument("--frontends", nargs="+", default=["kiln", "kiln-inline", "torch"])
    parser.add_argument("--skip-inductor", action="store_true")
    parser.add_argument("--json", default="")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        model, layers, frontend, backend = args.child
        child(model, int(layers), frontend, backend)
        return
    results = []
    with tempfile.TemporaryDirectory() as root:
        for model in args.models:
            for layers in args.layers:
                for frontend in args.frontends:
                    row = {"model": model, "layers": layers, "frontend": frontend}
                    if frontend != "torch":
                        row["capture"] = run_child(model, layers, frontend, "eager", root)["first"]
                    if not args.skip_inductor:
                        cache = os.path.join(root, f"{model}-{layers}-{frontend}")
                        r = run_child(model, layers, frontend, "inductor", cache)
                        row.update(first=r["first"], steady=r["steady"], error=r["error"])
                    results.append(row)
                    print(json.dumps(row), flush=True)
    report(results, args.layers)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def report(results: list, depths: list) -> None:
    by = {(r["model"], r["layers"], r["frontend"]): r for r in results}
    base = min(depths)
    print("\n| model | frontend | layers | capture (eager) s | x vs 2 | inductor first s | x vs 2 | "
          "steady ms | vs torch |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (model, layers, frontend), r in by.items():
        b = by.get((model, base, frontend), {})
        t = by.get((model, layers, "torch"), {})

        def cell(key, scale=1.0, digits=3):
            return f"{r[key] * scale:.{digits}f}" if r.get(key) is not None else "-"

        def ratio(key, other):
            return f"{r[key] / other[key]:.2f}" if r.get(key) and other.get(key) else "-"
        print(f"| {model} | {frontend} | {layers} | {cell('capture')} | {ratio('capture', b)} | {cell('first')} | "
              f"{ratio('first', b)} | {cell('steady', 1000, 2)} | {ratio('steady', t)} |")


if __name__ == "__main__":
    main()
