"""Per-call overhead and first-call time of Kiln on each CPython, side by side (issue #23).

    .venv/bin/python benchmarks/versions.py --pythons .venv/bin/python \\
        .venv-3.12/bin/python .venv-3.13/bin/python --rounds 3 --captures 3 --clock cpu

Runs ``benchmarks/overhead.py`` under each interpreter in turn, ``--rounds`` times
round-robin (so that the machine's drift and other jobs' bursts hit every version
alike), then prints, per program and backend, the median over rounds of

* Kiln's per-call overhead (µs) and first call (s: capture plus backend compile) on
  each version, and each version's ratio to the first interpreter given;
* torch.compile's figures on the same version, and Kiln / torch.compile there.

The summary line is the geometric mean of the per-row ratios: single rows of a
2-core shared machine move by tens of percent between runs, the mean over 18 rows much
less.  Options it does not know (``--captures``, ``--clock``, ``--only``...) go to
overhead.py; ``--clock cpu`` times with the thread's CPU time, which other jobs on a
shared machine do not inflate the way they inflate wall time.  ``--json`` keeps
everything measured.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIGURES = ("kiln_overhead_us", "torch_overhead_us", "kiln_first_call_s", "torch_first_call_s")


def run_once(python: str, extra: list[str]) -> dict:
    """One run of overhead.py under ``python``: its JSON rows."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
        subprocess.run([python, os.path.join(HERE, "overhead.py"), "--json", path, *extra],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        with open(path) as f:
            return json.load(f)
    finally:
        os.unlink(path)


def geomean(values: list[float]) -> float:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def summarize(runs: dict[str, list[dict]]) -> tuple[list[str], list[dict]]:
    """Per (program, backend): the median of each figure over rounds, per version."""
    versions = list(runs)
    table: dict[tuple[str, str], dict[str, dict[str, float | None]]] = {}
    for version, results in runs.items():
        samples: dict[tuple[str, str], dict[str, list[float]]] = {}
        for result in results:
            for row in result["rows"]:
                key = (row["program"], row["backend"])
                for fig in FIGURES:
                    if row[fig] is not None:
                        samples.setdefault(key, {}).setdefault(fig, []).append(row[fig])
        for key, figs in samples.items():
            table.setdefault(key, {})[version] = {f: statistics.median(v) if v else None
                                                  for f, v in figs.items()}
    rows = [dict(program=p, backend=b, per_version=per) for (p, b), per in table.items()]
    return versions, rows


def ratio(a, b):
    return a / b if a is not None and b else None


def print_report(versions: list[str], rows: list[dict]) -> None:
    base = versions[0]
    show = lambda v, fmt: "-" if v is None else format(v, fmt)   # noqa: E731
    for fig, unit, fmt in (("kiln_overhead_us", "per-call overhead, µs", ".1f"),
                           ("kiln_first_call_s", "first call, s", ".3f")):
        torch_fig = fig.replace("kiln", "torch")
        print(f"\n== Kiln {unit} (median of rounds); vs {base}; Kiln / torch.compile on the same Python")
        head = f"{'program':32} {'backend':9}"
        for v in versions:
            head += f" {v:>9}" + ("" if v == base else f" {'/' + base:>8}") + f" {'k/t':>5}"
        print(head)
        vs_base = {v: [] for v in versions[1:]}
        vs_torch = {v: [] for v in versions}
        for row in rows:
            per = row["per_version"]
            line = f"{row['program']:32} {row['backend']:9}"
            for v in versions:
                k = per.get(v, {}).get(fig)
                t = per.get(v, {}).get(torch_fig)
                line += f" {show(k, fmt):>9}"
                if v != base:
                    r = ratio(k, per.get(base, {}).get(fig))
                    line += f" {show(r, '.2f'):>8}"
                    vs_base[v].append(r)
                kt = ratio(k, t)
                vs_torch[v].append(kt)
                line += f" {show(kt, '.2f'):>5}"
            print(line)
        summary = "geometric mean:"
        for v in versions:
            if v != base:
                summary += f" {v}/{base} {geomean(vs_base[v]):.2f};"
            summary += f" Kiln/torch on {v} {geomean(vs_torch[v]):.2f};"
        print(summary)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pythons", nargs="+", required=True, help="interpreters (the first is the baseline)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", metavar="PATH", help="write every run's rows here")
    args, extra = parser.parse_known_args(argv)
    runs: dict[str, list[dict]] = {}
    for r in range(args.rounds):
        for python in args.pythons:
            result = run_once(python, extra)
            runs.setdefault(result["python"], []).append(result)
            print(f"round {r + 1}/{args.rounds}: Python {result['python']} done", file=sys.stderr, flush=True)
    versions, rows = summarize(runs)
    first = next(iter(runs.values()))[0]
    print(f"torch {first['torch']} (each Python's own build); {args.rounds} rounds; clock: {first['clock']} "
          f"({'the thread CPU time' if first['clock'] == 'cpu' else 'wall time'})")
    print_report(versions, rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
