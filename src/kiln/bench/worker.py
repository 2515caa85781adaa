"""Subprocess entry point: run one model, print one JSON result line.

    python -m kiln.bench.worker --model bert --frontend kiln --options '{"backend": "eager", ...}'

Why a subprocess per model and frontend: a segfault, an out-of-memory kill or a
hang in one model must cost that row only, and each frontend must start from a
clean interpreter (no caches, counters or patched state left by the other).

The protocol is two kinds of tagged stdout lines, so stray prints from models or
libraries cannot be mistaken for results:

* ``KILN_BENCH_PHASE <phase>`` as each phase starts (the driver reports the last
  one when the worker dies or times out);
* ``KILN_BENCH_RESULT <json>`` once at the end, a :class:`Result` as JSON (a
  :class:`DynamicResult` when the options ask for ``dynamic``).

Tracebacks go to stderr, which the driver keeps for rows that crash.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from .dynamic import run_series
from .results import RunOptions
from .runner import run_model

PHASE_TAG = "KILN_BENCH_PHASE"
RESULT_TAG = "KILN_BENCH_RESULT"
#: set by the driver to ``time.time()`` when it starts the worker, so the worker can
#: report its start-up (interpreter and imports) apart from any model's capture
STARTED_ENV = "KILN_BENCH_STARTED"


def _emit(tag: str, text: str) -> None:
    sys.stdout.write(f"\n{tag} {text}\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kiln.bench.worker", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--frontend", required=True, choices=("kiln", "torch"))
    parser.add_argument("--options", required=True, help="RunOptions as JSON")
    args = parser.parse_args(argv)

    started = os.environ.get(STARTED_ENV)
    import_s = time.time() - float(started) if started else None   # before any model is built
    opts = RunOptions.from_json(args.options)
    run = run_series if opts.dynamic else run_model
    result = run(args.model, args.frontend, opts, on_phase=lambda phase: _emit(PHASE_TAG, phase))
    result.import_s = import_s
    _emit(RESULT_TAG, result.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
