"""Warm start: the first call of a tiny BertModel in a second and third process, Kiln
(with its persistent cache, ``kiln.config.cache_dir``) beside torch.compile.

    .venv/bin/python benchmarks/warm_start.py [--backends eager,inductor] [--repeat 1]

For each backend and frontend, three processes run one after the other on the same
fresh cache directories; each builds the model (seeded), times its first call and
compares it with eager.  Process 1 compiles from nothing (Kiln writes its entries),
processes 2 and 3 are the warm starts.  For inductor each frontend runs twice: with
inductor's own cache directory (``TORCHINDUCTOR_CACHE_DIR``) shared by the three
processes, and with a fresh one per process (nothing of inductor's is reused: Kiln
still loads its entries, the kernels are compiled again).  "eager" is the model run
without any compiler: its first call is the floor every frontend pays (torch's own
first-run costs).  Times are wall seconds of one call; the machine's load shows in them,
so ratios measured in one run count, not the seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKER = r'''
import json, sys, time
t0 = time.perf_counter()
import torch
frontend, backend, kiln_dir = sys.argv[1], sys.argv[2], sys.argv[3]
if frontend == "kiln":
    import kiln
    from kiln.metrics import metrics
    kiln.config.cache_dir = kiln_dir
from transformers import BertConfig, BertModel
imported = time.perf_counter() - t0
torch.manual_seed(0)
config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64)
model = BertModel(config).eval()
ids = torch.randint(0, 100, (2, 16))
if frontend == "kiln":
    compiled = kiln.compile(model, backend=backend)
elif frontend == "torch":
    compiled = torch.compile(model, backend=backend)
else:
    compiled = model
with torch.no_grad():
    t = time.perf_counter()
    out = compiled(ids).last_hidden_state
    first = time.perf_counter() - t
    t = time.perf_counter()
    compiled(ids)
    second = time.perf_counter() - t
    want = model(ids).last_hidden_state
report = {"import_s": imported, "first_call_s": first, "second_call_s": second,
          "equal": bool(torch.equal(out, want)) if backend == "eager" else bool(torch.allclose(out, want, atol=1e-5))}
if frontend == "kiln":
    report.update(captured=metrics.frames_captured, loaded=metrics.entries_loaded)
print("RESULT " + json.dumps(report))
'''


def run_worker(frontend: str, backend: str, kiln_dir: str, inductor_dir: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"), TORCHINDUCTOR_CACHE_DIR=inductor_dir)
    env.pop("KILN_CACHE_DIR", None)      # the C accelerator's builds stay where they are
    done = subprocess.run([sys.executable, "-c", WORKER, frontend, backend, kiln_dir], capture_output=True,
                          text=True, env=env, timeout=1200)
    lines = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{frontend}/{backend} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def series(frontend: str, backend: str, shared_inductor_cache: bool) -> list:
    """Three processes on the same fresh Kiln cache (and inductor cache, if shared)."""
    root = tempfile.mkdtemp(prefix="kiln-warmstart-")
    out = []
    for i in range(3):
        inductor_dir = os.path.join(root, "inductor" if shared_inductor_cache else f"inductor-{i}")
        out.append(run_worker(frontend, backend, os.path.join(root, "kiln"), inductor_dir))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="eager,inductor")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()
    rows = []
    for backend in args.backends.split(","):
        configs = [("eager", "eager", True)] if backend == "eager" else []
        caches = (True,) if backend == "eager" else (True, False)
        configs += [(frontend, backend, shared) for shared in caches for frontend in ("kiln", "torch")]
        for frontend, be, shared in configs:
            started = time.perf_counter()
            runs = series(frontend, be, shared)
            label = f"{frontend:6s} {be:9s} " + ("" if be == "eager" else
                                                 "inductor cache shared" if shared else "inductor cache fresh")
            rows.append({"frontend": frontend, "backend": be, "inductor_cache": shared, "runs": runs})
            firsts = "  ".join(f"p{i + 1} {r['first_call_s'] * 1000:8.1f} ms" for i, r in enumerate(runs))
            extra = "" if frontend != "kiln" else "  captures " + "/".join(str(r["captured"]) for r in runs)
            equal = all(r["equal"] for r in runs)
            print(f"{label:44s} first call: {firsts}{extra}  equal={equal}  ({time.perf_counter() - started:.0f} s)",
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
