"""``python -m tests.fuzz --n 5000 --seed S --backend eager|aot_eager --out DIR``: a campaign.

Runs programs ``S .. S+n-1``, prints a progress line, minimizes the first few failures of
each (aspect, exception) and writes each minimized repro as ``DIR/<backend>-<class>-<seed>.py``.
A failure *class* is (backend, aspect, exception type, features of the minimized program);
failures past the minimization cap are counted under their (aspect, exception) only.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time

from .gen import generate
from .minimize import minimize, repro_script
from .oracle import check_program, quiet_fake_tensor_logs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", action="append", choices=["eager", "aot_eager", "aot_wrapper"])
    ap.add_argument("--out", default="fuzz-repros")
    ap.add_argument("--minimize-per-key", type=int, default=3)
    a = ap.parse_args(argv)
    quiet_fake_tensor_logs()
    os.makedirs(a.out, exist_ok=True)
    status = 0
    for backend in a.backend or ["eager", "aot_eager"]:
        t0 = time.time()
        coarse = collections.Counter()
        seeds = collections.defaultdict(list)
        classes: dict = {}
        crashed = 0
        for k, seed in enumerate(range(a.seed, a.seed + a.n)):
            prog = generate(seed)
            try:
                d = check_program(prog, backend)
            except Exception as e:  # noqa: BLE001 - harness bug: count, keep going
                crashed += 1
                print(f"\nharness error on seed {seed}: {e!r}", file=sys.stderr)
                continue
            if d is not None:
                coarse[d.key()] += 1
                seeds[d.key()].append(seed)
                if coarse[d.key()] <= a.minimize_per_key:
                    small = minimize(prog, backend, d)
                    d2 = check_program(small, backend) or d
                    cls = (backend, d.aspect, d.exc or "-", "+".join(small.features) or "-")
                    path = os.path.join(a.out, f"{backend}-{d.aspect}-{d.exc or 'noexc'}-{seed}.py")
                    with open(path, "w") as f:
                        f.write(repro_script(small, backend, d2))
                    entry = classes.setdefault(cls, [0, path])
                    entry[0] += 1
            if (k + 1) % 25 == 0 or k + 1 == a.n:
                print(f"\r[{backend}] {k + 1}/{a.n} programs, {sum(coarse.values())} divergences, "
                      f"{time.time() - t0:.0f}s", end="", flush=True)
        print()
        print(f"== {backend}: {a.n} programs, {sum(coarse.values())} divergent, {crashed} harness errors, "
              f"{time.time() - t0:.0f}s")
        print(f"{'count':>6}  aspect / exception")
        for (aspect, exc), n in coarse.most_common():
            more = " ..." if n > 12 else ""
            print(f"{n:>6}  {aspect} / {exc or '-'}   seeds {' '.join(map(str, seeds[aspect, exc][:12]))}{more}")
        print("minimized classes (backend, aspect, exception, features) -> count, example repro:")
        for cls, (n, path) in sorted(classes.items(), key=lambda kv: -kv[1][0]):
            print(f"  {cls}: {n}  {path}")
        status |= bool(coarse)
    return status


if __name__ == "__main__":
    sys.exit(main())
