"""What ``kiln bench`` prints while it runs and under its table: a line when each job
starts, a heartbeat while a worker is busy, the start-up apart from capture, noisy rows
flagged, and a two-frontend table that fits a 120-column terminal."""
from __future__ import annotations

import subprocess
import sys

from rich.console import Console

from kiln.bench import driver, noise, report
from kiln.bench.results import Result, RunOptions


def _row(model, frontend, eager_ms=2.0, eager_spread=0.01, compiled_spread=0.01, status="pass", **kw):
    return Result(model, frontend, "eager", "inference", "float32", "cpu", status=status, graphs=1, breaks=0,
                  recompiles=0, accuracy="ok", eager_ms=eager_ms, compiled_ms=1.0, speedup=eager_ms,
                  first_call_s=0.5, capture_s=0.4, eager_spread=eager_spread, compiled_spread=compiled_spread,
                  **kw)


def _render(rows, width=120):
    console = Console(width=width, record=True)
    console.print(report.build_table(rows, title="kiln bench: selected (3 models), backend eager, inference"))
    return console.export_text()


def test_noisy_rows_are_marked_and_explained():
    rows = [_row("mlp", "kiln"), _row("mlp", "torch", eager_ms=2.1),                      # steady
            _row("bert", "kiln", compiled_spread=0.25), _row("bert", "torch"),           # spread
            _row("t5", "kiln", eager_ms=2.0), _row("t5", "torch", eager_ms=3.0)]         # eager gap
    text = _render(rows)
    mlp, bert, t5 = (next(line for line in text.splitlines() if line.startswith(m)) for m in ("mlp", "bert", "t5"))
    assert "~" not in mlp
    assert bert.count("~") == 1 and t5.count("~") == 2   # the gap makes both of t5's rows suspect
    lines = report.summary_lines(rows)
    assert ("noisy timings (~ in the table; spread: interquartile range / median of the repetitions; "
            "rerun with a larger -n or on a quieter machine):") in lines
    assert "  bert [kiln]: compiled spread 25%" in lines
    assert "  t5: eager 2.00 ms in kiln's worker, 3.00 ms in torch's (50% apart)" in lines
    assert not any(line.startswith("  mlp") for line in lines)
    assert noise.noise_lines(rows[:2]) == []


def test_startup_is_reported_apart_from_capture():
    rows = [_row("mlp", "kiln", import_s=1.5, first_compile_s=0.25), _row("bert", "kiln", import_s=2.5,
                                                                          first_compile_s=0.75),
            _row("mlp", "torch", import_s=1.0, first_compile_s=3.0)]
    assert ("start-up per worker (median; not in capture s): kiln imports 2.00 s + first compile 0.50 s; "
            "torch imports 1.00 s + first compile 3.00 s") in report.summary_lines(rows)


def test_two_frontend_table_fits_120_columns():
    rows = [_row("checkpointed_blocks", "kiln", eager_ms=123.45, status="fail_accuracy"),
            _row("checkpointed_blocks", "torch", eager_ms=123.45, status="fail_compile"),
            _row("transformer_encoder", "kiln", eager_ms=0.5), _row("transformer_encoder", "torch", eager_ms=0.5)]
    rows[2].graphs, rows[2].breaks, rows[2].recompiles = 16, 17, 8
    text = _render(rows)
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 120
    assert "…" not in text                                          # nothing cut off
    assert "fail_accuracy" in text and "fail_compile" in text and "16/17/8" in text
    header = text[:text.index("───")]
    for word in ("g/b/r", "eager", "speedup", "capture", "kiln", "torch"):
        assert word in header


def test_heartbeat_names_the_phase_of_a_busy_worker(bench_plugins):
    job = driver.plan(["hang"], ["kiln"], RunOptions(repeat=2, warmup=2), ["cpu"])[0]
    beats = []
    row = driver.run_job(job, timeout=8, heartbeat_s=1,
                         on_heartbeat=lambda job, elapsed, phase: beats.append((round(elapsed), phase)))
    assert row.status == "timeout"
    assert len(beats) >= 5 and beats[-1][1] == "eager"               # the model hangs in its eager call
    assert [s for s, _ in beats] == sorted(s for s, _ in beats)


def test_cli_says_when_each_job_starts_and_reports_startup(bench_plugins, tmp_path):
    csv_path = tmp_path / "r.csv"
    proc = subprocess.run([sys.executable, "-m", "kiln.cli", "bench", "--suite", "benchtest", "--only", "tiny",
                           "--frontend", "both", "-n", "4", "--warmup", "1", "--output", str(csv_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "tiny [kiln, cpu]: started" in proc.stderr and "tiny [torch, cpu]: started" in proc.stderr
    assert proc.stderr.index("tiny [kiln, cpu]: started") < proc.stderr.index("tiny [kiln, cpu]: pass")
    assert "start-up per worker (median; not in capture s): kiln imports " in proc.stdout
    assert any(len(line) > 120 for line in proc.stdout.splitlines())   # summary lines whole, not cut at 120
    table = proc.stdout[:proc.stdout.index("kiln: passed")]
    assert max(len(line.rstrip()) for line in table.splitlines()) <= 120
    rows = report.read_csv(str(csv_path))
    for row in rows:
        assert row.import_s > 0 and row.first_compile_s > 0 and row.eager_spread is not None
        assert row.capture_s is not None


def test_heartbeat_must_be_positive(capsys):
    from kiln import cli
    assert cli.main(["bench", "--heartbeat", "0"]) == 2
    assert "kiln bench: error: --heartbeat must be positive, got 0" in capsys.readouterr().err
