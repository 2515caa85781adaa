"""Parent side: run each (model, frontend, device) in its own worker subprocess.

Why subprocesses rather than threads or a pool: isolation is the point.  A worker
that segfaults, is killed for memory or hangs ends as one ``fail_run`` or
``timeout`` row, and the run goes on.  Workers run one at a time so that their
timings do not compete for the two cores.

The worker's process group is killed on timeout, so helper processes it started
(inductor's compile workers, say) go with it.  The environment forbids Hugging Face
downloads: models are built from configs only.
"""
from __future__ import annotations

import os
import json
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, Iterable

from . import frontends as _frontends
from .results import EAGER_FAIL, FAIL_RUN, SKIPPED, TIMEOUT, Result, RunOptions, row_class
from .skips import skip_reason
from .worker import PHASE_TAG, RESULT_TAG, STARTED_ENV

EAGER_PHASES = ("eager", "fp64 reference", "eager timing")


@dataclass(frozen=True)
class Job:
    model: str
    frontend: str
    opts: RunOptions

    @property
    def title(self) -> str:
        return f"{self.model} [{self.frontend}, {self.opts.device}]"

    def blank(self, **fields) -> Result:
        """A result row for this job that the worker did not fill in (a ``DynamicResult``
        for ``--dynamic`` jobs)."""
        fe = _frontends.get(self.frontend)
        o = self.opts
        return row_class(o)(model=self.model, frontend=self.frontend, backend=fe.backend_label(o.backend), mode=o.mode,
                      precision=o.precision, device=o.device, **fields)


def plan(models: Iterable[str], frontends: Iterable[str], opts: RunOptions, devices: Iterable[str]) -> list[Job]:
    """Jobs in report order: per device, per model, the frontends side by side."""
    frontends = list(frontends)
    return [Job(m, f, replace(opts, device=d)) for d in devices for m in models for f in frontends]


def worker_env() -> dict:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
               PYTHONUNBUFFERED="1", PYTHONWARNINGS=env.get("PYTHONWARNINGS", "ignore"))
    return env


def _exit_description(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def parse_output(stdout: str) -> tuple[str | None, dict | None]:
    """The last phase announced and the result payload, from a worker's stdout."""
    phase, result = None, None
    for line in stdout.splitlines():
        if line.startswith(PHASE_TAG + " "):
            phase = line[len(PHASE_TAG) + 1:].strip()
        elif line.startswith(RESULT_TAG + " "):
            result = json.loads(line[len(RESULT_TAG) + 1:])
    return phase, result


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


#: seconds between "still running" lines while a worker is busy (kiln bench --heartbeat)
HEARTBEAT_S = 30.0


def _read_lines(stream, into: list[str]) -> threading.Thread:
    """A thread that appends every line of ``stream`` to ``into`` until it closes."""
    def pump():
        for line in stream:
            into.append(line)
        stream.close()
    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def run_job(job: Job, timeout: float, *, heartbeat_s: float = HEARTBEAT_S,
            on_heartbeat: Callable[[Job, float, str], None] = lambda job, elapsed, phase: None) -> Result:
    """Run one job in a fresh interpreter; always returns a row.

    While the worker runs, ``on_heartbeat(job, seconds so far, phase)`` is called every
    ``heartbeat_s`` seconds (the phase is the last one the worker announced), so a long
    compile shows that it is alive and where it is.
    """
    cmd = [sys.executable, "-m", "kiln.bench.worker", "--model", job.model, "--frontend", job.frontend,
           "--options", job.opts.to_json()]
    start = time.perf_counter()
    env = worker_env()
    env[STARTED_ENV] = repr(time.time())
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    out_lines: list[str] = []
    err_lines: list[str] = []
    readers = [_read_lines(proc.stdout, out_lines), _read_lines(proc.stderr, err_lines)]
    timed_out = False
    try:
        while True:
            elapsed = time.perf_counter() - start
            if elapsed >= timeout:
                timed_out = True
                _kill_group(proc)
                proc.wait()
                break
            try:
                proc.wait(timeout=min(heartbeat_s, timeout - elapsed))
                break
            except subprocess.TimeoutExpired:
                elapsed = time.perf_counter() - start
                if elapsed < timeout:
                    on_heartbeat(job, elapsed, parse_output("".join(out_lines))[0] or "start-up")
    except BaseException:   # Ctrl-C: the worker is in its own session and would outlive us
        _kill_group(proc)
        proc.wait()
        raise
    for reader in readers:
        reader.join(timeout=5)
    stdout, stderr = "".join(out_lines), "".join(err_lines)
    wall = time.perf_counter() - start
    phase, payload = parse_output(stdout)

    if payload is not None and not timed_out:
        row = row_class(job.opts).from_dict(payload)
    elif timed_out:
        row = job.blank(status=TIMEOUT, reason=f"no result after {timeout:g} s (in phase: {phase or 'start-up'})")
    else:
        status = EAGER_FAIL if phase in EAGER_PHASES else FAIL_RUN
        detail = _last_line(stderr)
        row = job.blank(status=status, reason=f"worker {_exit_description(proc.returncode)} in phase "
                                              f"{phase or 'start-up'}" + (f": {detail}" if detail else ""))
    row.wall_s = wall
    return row


def run_all(jobs: list[Job], timeout: float, *, no_skip: bool = False,
            on_start: Callable[[Job], None] = lambda job: None,
            on_result: Callable[[Job, Result], None] = lambda job, row: None,
            on_heartbeat: Callable[[Job, float, str], None] = lambda job, elapsed, phase: None,
            heartbeat_s: float = HEARTBEAT_S, collect: list | None = None) -> list[Result]:
    """Run the jobs one by one; skip-listed ones become ``skipped`` rows unless ``no_skip``.
    ``on_start`` is called before each job, ``on_heartbeat`` while one runs (see ``run_job``).

    Rows are appended to ``collect`` (a new list by default) as they finish, so a
    caller interrupted half way still has the finished ones.
    """
    rows = collect if collect is not None else []
    for job in jobs:
        on_start(job)
        reason = None if no_skip else skip_reason(job.model, job.frontend, job.opts.mode, job.opts.backend,
                                                  job.opts.device)
        row = job.blank(status=SKIPPED, reason=reason) if reason else \
            run_job(job, timeout, heartbeat_s=heartbeat_s, on_heartbeat=on_heartbeat)
        rows.append(row)
        on_result(job, row)
    return rows
