"""Worker subprocesses: a crash or a hang costs one row, never the run."""
from __future__ import annotations

from kiln.bench import driver, skips
from kiln.bench.results import Result, RunOptions
from kiln.bench.worker import PHASE_TAG, RESULT_TAG

OPTS = RunOptions(repeat=2, warmup=2)


def test_crashes_end_their_row_only(bench_plugins):
    jobs = driver.plan(["crash_eager", "crash_compiled", "tiny"], ["torch"], OPTS, ["cpu"])
    seen = []
    rows = driver.run_all(jobs, timeout=120, on_result=lambda job, row: seen.append(row.status))
    by_model = {r.model: r for r in rows}
    assert seen == [r.status for r in rows]

    crash = by_model["crash_eager"]
    assert crash.status == "eager_fail"
    assert "SIGSEGV" in crash.reason and "phase eager" in crash.reason

    aborted = by_model["crash_compiled"]
    assert aborted.status == "fail_run"
    assert "SIGABRT" in aborted.reason and "phase compile" in aborted.reason

    assert by_model["tiny"].status == "pass"   # the run went on
    assert all(r.wall_s is not None and r.backend == "eager" for r in rows)


def test_a_hang_is_a_timeout_row(bench_plugins):
    job = driver.plan(["hang"], ["kiln"], OPTS, ["cpu"])[0]
    row = driver.run_job(job, timeout=6)
    assert row.status == "timeout" and "no result after 6 s" in row.reason
    assert (row.model, row.frontend) == ("hang", "kiln")
    assert 6 <= row.wall_s < 30


def test_skip_list_skips_unless_no_skip(monkeypatch):
    monkeypatch.setattr(skips, "SKIPS", [skips.Skip("mlp", "known to explode", frontend="kiln")])
    ran = []
    monkeypatch.setattr(driver, "run_job", lambda job, timeout, **kw: ran.append(job.frontend) or job.blank(status="pass"))
    jobs = driver.plan(["mlp"], ["kiln", "torch"], OPTS, ["cpu"])

    rows = driver.run_all(jobs, timeout=5)
    assert [(r.frontend, r.status, r.reason) for r in rows] == [("kiln", "skipped", "known to explode"),
                                                               ("torch", "pass", "")]
    assert ran == ["torch"]

    ran.clear()
    rows = driver.run_all(jobs, timeout=5, no_skip=True)
    assert [r.status for r in rows] == ["pass", "pass"] and ran == ["kiln", "torch"]


def test_skip_entries_match_on_their_fields():
    entry = skips.Skip("bert", "why", mode="training")
    assert entry.matches("bert", "kiln", "training", "eager", "cpu")
    assert not entry.matches("bert", "kiln", "inference", "eager", "cpu")
    assert not entry.matches("gpt2", "kiln", "training", "eager", "cpu")
    assert all(e.reason.strip() for e in skips.SKIPS), "every skip needs a reason"


def test_worker_protocol_ignores_stray_output():
    row = Result("m", "kiln", "eager", "inference", "float32", "cpu", status="pass")
    stdout = f"hello {RESULT_TAG}\n{PHASE_TAG} eager\nnoise\n{PHASE_TAG} compile\n{RESULT_TAG} {row.to_json()}\n"
    phase, payload = driver.parse_output(stdout)
    assert phase == "compile" and Result.from_dict(payload) == row
    assert driver.parse_output("just noise") == (None, None)


def test_plan_orders_frontends_side_by_side():
    jobs = driver.plan(["a", "b"], ["kiln", "torch"], OPTS, ["cpu", "cuda"])
    assert [(j.opts.device, j.model, j.frontend) for j in jobs][:4] == [
        ("cpu", "a", "kiln"), ("cpu", "a", "torch"), ("cpu", "b", "kiln"), ("cpu", "b", "torch")]
    assert len(jobs) == 8
