"""First-call time under ``backend="inductor"``: Kiln beside torch.compile, cold and warm.

    .venv/bin/python benchmarks/inductor_first_call.py [--models mlp bert gpt2 t5] [--rounds 1]

For each model of the quick suite and each frontend, a fresh process builds the model
(inference, ``no_grad``) and times its first compiled call: capture plus inductor's
compile.  *Cold*: the process gets an empty inductor cache directory of its own
(``TORCHINDUCTOR_CACHE_DIR``, one per model and frontend, so neither frontend warms the
other's).  *Warm*: a second fresh process with the same directory, the way a restarted
training job or server starts: inductor's FX-graph and AOTAutograd caches are full.
Timed: from the ``compile`` call to the end of the first call, so each frontend's own
imports of its compiler stack count (torch.compile imports ``torch._dynamo`` and
inductor when called; Kiln imports inductor on its first compile); model building and
``import torch`` do not.  Both frontends
hand inductor the graphs they captured; the ratio column is Kiln / torch.compile.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def child(model: str, frontend: str) -> None:
    import torch

    from kiln.bench.registry import get

    torch.set_num_threads(1)
    spec = get(model)
    module = spec.build(False).eval()
    inputs = spec.inputs(False, torch.Generator().manual_seed(0))
    t0 = time.perf_counter()
    if frontend == "kiln":
        import kiln
        compiled = kiln.compile(module, backend="inductor")
    else:
        compiled = torch.compile(module, backend="inductor")   # imports torch._dynamo and inductor
    with torch.no_grad():
        compiled(**inputs)
    first = time.perf_counter() - t0
    print(json.dumps({"first_s": first}))


def run_child(model: str, frontend: str, cache_dir: str) -> float:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, __file__, "--child", model, frontend], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["first_s"]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["mlp", "bert", "gpt2", "t5"])
    parser.add_argument("--rounds", type=int, default=1, help="cold+warm pairs per model and frontend")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "FRONTEND"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    print(f"{'model':8} {'kiln cold s':>11} {'torch cold s':>12} {'ratio':>6} "
          f"{'kiln warm s':>11} {'torch warm s':>12} {'ratio':>6}", flush=True)
    totals = {"kiln": [0.0, 0.0], "torch": [0.0, 0.0]}
    for model in args.models:
        best = {}
        for _ in range(args.rounds):
            for frontend in ("kiln", "torch"):   # alternating, so load drifts hit both alike
                with tempfile.TemporaryDirectory(prefix=f"inductor-{frontend}-") as cache:
                    cold = run_child(model, frontend, cache)
                    warm = run_child(model, frontend, cache)
                old = best.get(frontend, (float("inf"), float("inf")))
                best[frontend] = (min(old[0], cold), min(old[1], warm))
        for frontend in best:
            totals[frontend][0] += best[frontend][0]
            totals[frontend][1] += best[frontend][1]
        (kc, kw), (tc, tw) = best["kiln"], best["torch"]
        print(f"{model:8} {kc:11.2f} {tc:12.2f} {kc / tc:6.2f} {kw:11.2f} {tw:12.2f} {kw / tw:6.2f}", flush=True)
    (kc, kw), (tc, tw) = totals["kiln"], totals["torch"]
    print(f"{'total':8} {kc:11.2f} {tc:12.2f} {kc / tc:6.2f} {kw:11.2f} {tw:12.2f} {kw / tw:6.2f}")


if __name__ == "__main__":
    main()
