"""Run a script in a fresh Python process with the persistent cache in a given directory.

The script is the test's text with a header that turns the cache on (``kiln.config``, so
that the C accelerator's builds stay in their usual place) and registers a counting
backend by name (a registered name is what the persistent cache keys a backend by).
It prints one JSON line at the end: ``report(...)``'s fields and Kiln's metrics.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")

HEADER = '''
import json, warnings, torch, kiln
from kiln.metrics import metrics
from kiln.testing import CompileCounter
kiln.config.cache_dir = {cache_dir!r}
kiln.config.suppress_errors = False
counter = CompileCounter()
kiln.backends.register("pcache_counting", counter)
warnings.simplefilter("always")
caught = warnings.catch_warnings(record=True)
seen = caught.__enter__()

def report(**fields):
    fields.update(captured=metrics.frames_captured, loaded=metrics.entries_loaded, skipped=metrics.cache_skipped,
                  graphs_compiled=counter.frame_count, warnings=[str(w.message) for w in seen])
    print("REPORT " + json.dumps(fields))
'''


def run_script(body: str, cache_dir: str, path, env: dict | None = None) -> dict:
    """Write the script to ``path``, run it and return its report (fails with its output)."""
    path.write_text(HEADER.format(cache_dir=str(cache_dir)) + textwrap.dedent(body))
    environment = dict(os.environ, PYTHONPATH=os.path.abspath(SRC), **(env or {}))
    environment.pop("KILN_CACHE_DIR", None)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=environment, timeout=600)
    lines = [l for l in done.stdout.splitlines() if l.startswith("REPORT ")]
    assert done.returncode == 0 and lines, f"script failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return dict(json.loads(lines[-1][len("REPORT "):]), stdout=done.stdout)


def start_script(body: str, cache_dir: str, path) -> subprocess.Popen:
    path.write_text(HEADER.format(cache_dir=str(cache_dir)) + textwrap.dedent(body))
    environment = dict(os.environ, PYTHONPATH=os.path.abspath(SRC))
    environment.pop("KILN_CACHE_DIR", None)
    return subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environment)


def report_of(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=600)
    lines = [l for l in out.splitlines() if l.startswith("REPORT ")]
    assert proc.returncode == 0 and lines, f"script failed ({proc.returncode}):\n{out}\n{err}"
    return json.loads(lines[-1][len("REPORT "):])
