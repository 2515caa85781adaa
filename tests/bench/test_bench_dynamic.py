"""``kiln bench --dynamic``: the flag, sized inputs, the series runner, limit hits, the table."""
from __future__ import annotations

import csv
import subprocess
import sys

import pytest
import torch
from rich.console import Console

from kiln import cli
from kiln.bench import command, dynamic, dynamic_report, frontends, registry
from kiln.bench.results import DYNAMIC_COLUMNS, DynamicResult, RunOptions
from kiln.exc import KilnError

DYN = RunOptions(dynamic=True)
SHORT = ((8, 2), (9, 2), (12, 3))


def parse(*argv):
    return cli.build_parser().parse_args(["bench", *argv])


# -- the flag ------------------------------------------------------------------------------

def test_dynamic_flag_maps_to_run_options():
    assert command._check(parse("--only", "mlp"))[2].dynamic is False
    models, frontends_, opts, _ = command._check(parse("--dynamic", "--only", "mlp,bert", "--frontend", "both"))
    assert models == ["mlp", "bert"] and frontends_ == ["kiln", "torch"]
    assert opts.dynamic is True and opts.accuracy and opts.backend == "eager"
    assert RunOptions.from_json(opts.to_json()) == opts      # crosses to the worker intact


def test_dynamic_with_plot_is_a_usage_error(capsys):
    assert cli.main(["bench", "--dynamic", "--plot", "x.png"]) == 2
    assert "--plot" in capsys.readouterr().err


# -- sized inputs ----------------------------------------------------------------------------

def test_quick_suite_has_sized_inputs_and_default_inputs_are_unchanged():
    for spec in registry.select("quick"):
        assert spec.sized_inputs is not None, spec.name
    bert, t5, mlp = registry.get("bert"), registry.get("t5"), registry.get("mlp")
    gen = lambda: torch.Generator().manual_seed(0)   # noqa: E731
    assert bert.inputs(False, gen())["input_ids"].shape == (2, 32)
    assert torch.equal(bert.inputs(False, gen())["input_ids"], bert.sized_inputs(32, 2)(False, gen())["input_ids"])
    kw = bert.sized_inputs(7, 3)(True, gen())
    assert kw["input_ids"].shape == kw["attention_mask"].shape == kw["labels"].shape == (3, 7)
    assert t5.sized_inputs(9, 2)(False, gen())["decoder_input_ids"].shape == (2, 4)
    assert t5.inputs(True, gen())["labels"].shape == (2, 16)
    assert mlp.sized_inputs(31, 5)(True, gen())["x"].shape == (5, 256)    # no sequence: batch only
    assert mlp.inputs(False, gen())["x"].shape == (8, 256)
    assert registry.get("lstm").sized_inputs(5, 3)(False, gen())["x"].shape == (3, 5, 64)


def test_varies_and_shapes_describe_the_series():
    inputs = dynamic.series_inputs(registry.get("bert"), False)
    assert len(inputs) == len(dynamic.SERIES) and dynamic.varies(inputs) == "seq,batch"
    mlp = dynamic.series_inputs(registry.get("mlp"), False)
    assert dynamic.varies(mlp) == "batch"
    assert len({dynamic.shape_key(kw) for kw in mlp}) == len({b for _, b in dynamic.SERIES})
    assert dynamic.varies([{"x": torch.ones(2, 3)}, {"x": torch.ones(2, 4)}]) == "seq"


# -- the runner, in process ---------------------------------------------------------------------

def test_kiln_series_on_mlp_passes_with_every_field():
    row = dynamic.run_series("mlp", "kiln", DYN)
    assert row.status == "pass", row.reason
    assert row.accuracy == "ok" and row.accuracy_fails == 0
    assert row.calls == len(dynamic.SERIES) and row.varies == "batch" and row.shapes == 4
    assert row.graphs >= 1 and row.recompiles is not None and row.limit_hits == 0 and row.breaks == 0
    assert row.series_s > 0 and row.eager_series_s > 0
    # 2 (static) -> 4 (batch becomes symbolic) -> 3 (same graph) -> 1 (specialised)
    assert (row.graphs, row.recompiles) == (3, 2)


def test_kiln_series_on_a_sequence_model():
    row = dynamic.run_series("transformer_encoder", "kiln", DYN, series=SHORT)
    assert row.status == "pass", row.reason
    assert row.varies == "seq,batch" and row.calls == 3 and row.shapes == 3 and row.accuracy == "ok"


class FakeFrontend:
    """Compiles by wrapping a function we control; limit hits are watched as Kiln does."""

    name = "fake"

    def __init__(self, wrap=lambda fn: fn):
        self.wrap = wrap

    def backend_label(self, backend):
        return backend

    def reset(self):
        pass

    def compile(self, fn, backend):
        return self.wrap(fn)

    def is_frontend_error(self, exc):
        return isinstance(exc, KilnError)

    def stats(self):
        return {"graphs": 1, "breaks": 0, "top_breaks": "", "recompiles": 0}

    watch_limits = frontends.KilnFrontend.watch_limits


@pytest.fixture
def fake(monkeypatch):
    def install(**kw):
        monkeypatch.setitem(frontends._FRONTENDS, "fake", lambda: FakeFrontend(**kw))
        return "fake"
    return install


def test_wrong_outputs_on_some_calls_are_fail_accuracy(fake):
    def wrong_at_batch_3(fn):
        return lambda **kw: fn(**kw) * (1.01 if kw["x"].shape[0] == 3 else 1.0)
    row = dynamic.run_series("mlp", fake(wrap=wrong_at_batch_3), DYN)
    assert row.status == "fail_accuracy" and row.accuracy == "fail" and row.accuracy_fails == 1
    assert row.reason.startswith("1/15 calls differ; first at seq 12, batch 3")
    assert row.series_s is not None     # the series ran to the end


def test_error_on_one_call_names_the_call(fake):
    def breaks_at_batch_4(fn):
        def run(**kw):
            if kw["x"].shape[0] == 4:
                raise KilnError("cannot capture this size")
            return fn(**kw)
        return run
    row = dynamic.run_series("mlp", fake(wrap=breaks_at_batch_4), DYN)
    assert row.status == "fail_compile" and row.calls == 12
    assert row.reason == "call 13 (seq 16, batch 4): KilnError: cannot capture this size"


def test_model_without_sized_inputs_is_skipped(fake, bench_plugins):
    row = dynamic.run_series("tiny", fake(), DYN)
    assert row.status == "skipped" and "sized_inputs" in row.reason


def test_limit_hits_are_counted_for_both_frontends():
    def f(x, s):
        return x + len(s)

    for name in ("kiln", "torch"):
        fe = frontends.get(name)
        fe.reset()
        compiled = fe.compile(f, "eager")
        with fe.watch_limits() as hits:
            for i in range(11):
                compiled(torch.ones(2), "a" * i)   # a new constant each call: a recompile each call
        stats = fe.stats()
        assert hits.count == 1, (name, hits.messages)
        assert (stats["graphs"], stats["recompiles"]) == (8, 7), name   # the refused attempt is not a recompile
        fe.reset()


# -- the report ---------------------------------------------------------------------------------

def _rows():
    def row(model, frontend, status="pass", graphs=2, series=1.0, fails=0):
        return DynamicResult(model, frontend, "eager", "inference", "float32", "cpu", status=status,
                             reason="" if status == "pass" else "2/15 calls differ; first at seq 5, batch 2: x",
                             varies="seq,batch", calls=15, shapes=15, graphs=graphs, breaks=0, recompiles=graphs - 1,
                             limit_hits=0, series_s=series, eager_series_s=0.25, accuracy="ok" if not fails else "fail",
                             accuracy_fails=fails, wall_s=5.0)
    return [row("bert", "kiln", graphs=3, series=1.5), row("bert", "torch", graphs=4, series=3.0),
            row("t5", "kiln", status="fail_accuracy", fails=2, series=0.5), row("t5", "torch", graphs=3, series=1.0)]


def test_table_has_the_dynamic_columns_side_by_side():
    console = Console(width=250, record=True)
    console.print(dynamic_report.build_table(_rows()))
    text = console.export_text()
    for column in ("varies", "shapes", "graphs", "recomp", "limit", "series s", "eager s", "acc"):
        assert column in text, column
    assert "fail 2/15" in text and "seq,batch" in text
    assert sum(1 for line in text.splitlines() if "bert" in line) == 1


def test_summary_totals_and_comparison():
    text = "\n".join(dynamic_report.summary_lines(_rows()))
    assert "kiln: passed 1/2 [fail_accuracy 1]; graphs 5, breaks 0, recompiles 3, limit hits 0; " \
           "series 2.00 s over 30 calls (eager 0.50 s); accuracy ok on 28/30 calls" in text
    assert "kiln vs torch.compile over the 2 model(s) both finished: graphs 5 vs 7; " \
           "series time 2.00 s vs 4.00 s (kiln/torch.compile 0.50x)" in text
    assert "t5 [kiln] fail_accuracy: 2/15 calls differ" in text


def test_csv_has_the_dynamic_columns(tmp_path):
    from kiln.bench import report
    path = tmp_path / "dynamic.csv"
    report.write_csv(_rows(), str(path))
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == DYNAMIC_COLUMNS
        lines = list(reader)
    assert len(lines) == 4 and lines[2]["accuracy_fails"] == "2" and lines[0]["series_s"] == "1.5"


@pytest.mark.slow
def test_end_to_end_dynamic_both_frontends_on_mlp(tmp_path):
    """Through fresh worker interpreters: table, summary with the comparison, CSV."""
    csv_path = tmp_path / "d.csv"
    proc = subprocess.run([sys.executable, "-m", "kiln.cli", "bench", "--only", "mlp", "--dynamic", "--frontend",
                           "both", "--output", str(csv_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "kiln: passed 1/1" in proc.stdout and "torch: passed 1/1" in proc.stdout
    assert "kiln vs torch.compile over the 1 model(s) both finished" in proc.stdout
    with open(csv_path, newline="") as fh:
        lines = list(csv.DictReader(fh))
    assert [(r["frontend"], r["status"], r["accuracy"], r["calls"]) for r in lines] == \
        [("kiln", "pass", "ok", "15"), ("torch", "pass", "ok", "15")]
    assert all(float(r["series_s"]) > 0 and float(r["wall_s"]) > 0 for r in lines)
