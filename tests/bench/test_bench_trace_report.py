"""Issue #16: ``kiln bench --report DIR`` writes one HTML report per model (kiln
frontend), from a trace the worker writes during the compiled side only."""
import csv
import subprocess
import sys


def test_bench_report_writes_one_page_per_model(tmp_path):
    reports = tmp_path / "reports"
    proc = subprocess.run([sys.executable, "-m", "kiln", "bench", "--only", "mlp", "-n", "2", "--report", str(reports),
                           "--output", str(tmp_path / "r.csv")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    page = (reports / "mlp-inference-cpu.html").read_text()
    assert "Kiln report: mlp (inference, eager, float32, cpu)" in page
    assert 'data-stat="graphs"><b>1</b>' in page
    # the row's overhead probe, from the bench_result record: the figure the CSV has, or
    # "not measured" when the probe's difference was lost in timing noise (a loaded machine)
    with open(tmp_path / "r.csv") as f:
        row = next(r for r in csv.DictReader(f) if r["frontend"] == "kiln")
    shown = f"{float(row['overhead_us']):.1f} µs" if row["overhead_us"] else "not measured"
    assert f"<b>{shown}</b><span>per-call overhead</span>" in page
    assert "add_one" not in page                 # the probe itself is not traced
    assert (tmp_path / "r.csv").exists()
