"""Issue #16: ``kiln bench --report DIR`` writes one HTML report per model (kiln
frontend), from a trace the worker writes during the compiled side only."""
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
    assert "per-call overhead" in page           # the row's overhead probe, from the bench_result record
    assert "add_one" not in page                 # the probe itself is not traced
    assert (tmp_path / "r.csv").exists()
