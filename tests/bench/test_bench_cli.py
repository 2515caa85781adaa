"""``kiln bench`` argument parsing and errors, report, CSV and chart; one real run."""
from __future__ import annotations

import csv
import subprocess
import sys

import pytest

from kiln import cli
from kiln.bench import command, report
from kiln.bench.plot import plot
from kiln.bench.results import COLUMNS, Result, RunOptions


def parse(*argv):
    return cli.build_parser().parse_args(["bench", *argv])


def test_defaults_follow_the_dynamo_runners():
    args = parse()
    assert (args.suite, args.frontend, args.backend, args.mode, args.precision) == \
        ("quick", "kiln", "eager", "inference", "float32")
    models, frontends, opts, devices = command._check(args)
    assert models == ["mlp", "bert", "gpt2", "t5"] and frontends == ["kiln"] and devices == ["cpu"]
    assert opts.accuracy and opts.performance        # neither flag: both


def test_flags_map_to_run_options():
    args = parse("--only", "bert,t5", "--frontend", "both", "--training", "--bfloat16", "--accuracy",
                 "-n", "3", "--backend", "eager", "--threads", "2")
    models, frontends, opts, _ = command._check(args)
    assert models == ["bert", "t5"] and frontends == ["kiln", "torch"]
    assert opts == RunOptions(backend="eager", mode="training", precision="bfloat16", accuracy=True,
                              performance=False, repeat=3, warmup=2, threads=2)
    models, *_ = command._check(parse("--suite", "all", "-k", "gpt", "-k", "mlp"))
    assert models == ["mlp", "gpt2", "gpt_neo"]


@pytest.mark.parametrize("argv, message", [
    (["--only", "nope"], r"unknown benchmark model 'nope'; known models: .*bert.*whisper"),
    (["--backend", "nope"], r"unknown backend 'nope' for the kiln frontend; known backends: .*eager"),
    (["--backend", "nope", "--frontend", "torch"], r"unknown backend 'nope' for the torch frontend; known .*inductor"),
    (["--suite", "huge"], r"unknown suite 'huge'; known suites: quick, hf, local, all"),
    (["-k", "zzz"], r"no model matches"),
    (["-n", "0"], r"-n/--repeat must be at least 1"),
    (["--timeout", "0"], r"--timeout must be positive"),
    (["--threads", "0"], r"--threads must be at least 1"),
])
def test_bad_input_is_a_clear_usage_error(argv, message, capsys):
    assert cli.main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert "usage: kiln bench" in err
    assert "kiln bench: error:" in err
    import re
    assert re.search(message, err), err


def test_argparse_level_errors(capsys):
    for argv in (["--training", "--inference"], ["--float32", "--bfloat16"], ["--frontend", "jax"],
                 ["--devices", "tpu"]):
        with pytest.raises(SystemExit) as exc:
            parse(*argv)
        assert exc.value.code == 2
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args([])        # a subcommand is required


def test_list_prints_the_selection(capsys):
    assert cli.main(["bench", "--suite", "hf", "--list"]) == 0
    out = capsys.readouterr().out
    assert "bigbird" in out and "whisper" in out and "mlp" not in out


def _rows():
    def row(model, frontend, status="pass", speedup=1.5, capture=0.5, breaks=0):
        return Result(model, frontend, "eager", "inference", "float32", "cpu", status=status,
                      reason="" if status == "pass" else "boom", graphs=1, breaks=breaks,
                      top_breaks="data-dependent branch (1)" if breaks else "", recompiles=0, accuracy="ok",
                      eager_ms=2.0, compiled_ms=2.0 / speedup if speedup else None, speedup=speedup,
                      first_call_s=None if capture is None else capture + 0.002, capture_s=capture,
                      overhead_us=3.0, wall_s=4.0)
    return [row("mlp", "kiln", speedup=2.0, breaks=1), row("mlp", "torch", speedup=0.5, capture=1.2),
            row("bert", "kiln", status="fail_compile", speedup=None, capture=None),
            row("bert", "torch", speedup=1.1), row("t5", "kiln", status="skipped", speedup=None, capture=None)]


def test_summary_pass_rate_and_geomean():
    s = report.summarize(_rows())
    assert (s["kiln"].passed, s["kiln"].ran, s["kiln"].total) == (1, 2, 3)
    assert s["kiln"].pass_rate == 0.5 and s["kiln"].geomean_speedup == pytest.approx(2.0)
    assert s["torch"].geomean_speedup == pytest.approx((0.5 * 1.1) ** 0.5)
    text = "\n".join(report.summary_lines(_rows()))
    assert "kiln: passed 1/2 (50%)" in text and "bert [kiln] fail_compile: boom" in text
    assert "data-dependent branch (1)" in text


def test_table_puts_frontends_side_by_side():
    from rich.console import Console
    console = Console(width=250, record=True)
    console.print(report.build_table(_rows()))
    text = console.export_text()
    assert "kiln" in text and "torch" in text and "fail_compile" in text
    assert sum(1 for line in text.splitlines() if "mlp" in line) == 1   # one row per model


def test_csv_has_every_column_and_round_trips(tmp_path):
    path = tmp_path / "results.csv"
    report.write_csv(_rows(), str(path))
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == COLUMNS
        lines = list(reader)
    for col in ("model", "frontend", "backend", "mode", "status", "graphs", "breaks", "top_breaks", "recompiles",
                "eager_ms", "compiled_ms", "speedup", "first_call_s", "capture_s", "overhead_us", "accuracy"):
        assert col in COLUMNS
    assert len(lines) == 5 and lines[2]["speedup"] == ""
    assert report.read_csv(str(path)) == _rows()


def test_chart_is_written(tmp_path):
    path = tmp_path / "chart.png"
    plot(_rows(), str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_end_to_end_torch_frontend_on_mlp(tmp_path):
    """The real thing, through a fresh interpreter: table, CSV and chart."""
    csv_path, png = tmp_path / "r.csv", tmp_path / "c.png"
    proc = subprocess.run([sys.executable, "-m", "kiln.cli", "bench", "--only", "mlp", "--frontend", "torch",
                           "-n", "3", "--output", str(csv_path), "--plot", str(png)],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "mlp" in proc.stdout and "pass" in proc.stdout and "torch: passed 1/1 (100%)" in proc.stdout
    (row,) = report.read_csv(str(csv_path))
    assert (row.model, row.frontend, row.status, row.accuracy) == ("mlp", "torch", "pass", "ok")
    assert row.graphs == 1 and row.speedup > 0 and row.wall_s > 0
    assert png.exists()
