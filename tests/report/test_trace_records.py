"""Issue #16: the structured trace.  A function with a break inside an inlined call and
a recompile writes records of the expected kinds and fields; the trace off writes
nothing; an unwritable trace directory warns once and never breaks the user's call."""
import json
import warnings

import pytest
import torch

import kiln
from kiln import trace
from kiln.debug.accuracy import compare, fp64_copy

from .traced_example import f


def read_records(directory):
    out = []
    for path in sorted(directory.glob("kiln-trace-*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines()]
    return out


@pytest.fixture
def trace_dir(tmp_path):
    kiln.config.trace_dir = str(tmp_path / "trace")
    yield tmp_path / "trace"
    kiln.config.trace_dir = ""
    trace.close()


def test_records_for_a_break_and_a_recompile(trace_dir):
    cf = kiln.compile(f)
    assert cf(torch.ones(3), 1) == f(torch.ones(3), 1)
    cf(torch.ones(4, 2), 1)       # a new shape: every frame recompiles
    records = read_records(trace_dir)
    kinds = [r["kind"] for r in records]
    assert kinds[0] == "session"
    for kind in ("capture_start", "capture_end", "graph", "guards", "glue", "break", "recompile", "backend_compile"):
        assert kind in kinds, kind
    assert kinds.count("capture_start") == kinds.count("capture_end")
    for r in records:
        assert isinstance(r["t"], float)

    # the break is recorded in f (not counted: helper is compiled as its own frame) and in helper (counted)
    breaks = [r for r in records if r["kind"] == "break"]
    counted = [b for b in breaks if b["counted"]]
    assert counted and all(b["reason"] == "print() has a side effect Kiln does not capture" for b in counted)
    assert counted[0]["location"].endswith("traced_example.py:7")
    assert "print(" in counted[0]["source_line"]
    nested = [b for b in breaks if not b["counted"]]
    assert nested and [s["line"] for s in nested[0]["stack"]] == [13, 7]   # f's call line, then helper's print
    assert nested[0]["stack"][0]["source"] == "y = helper(y)"

    # every record made during a capture names it; a capture's end has its times and entry
    starts = {r["capture"]: r for r in records if r["kind"] == "capture_start"}
    ends = {r["capture"]: r for r in records if r["kind"] == "capture_end"}
    assert starts.keys() == ends.keys()
    for cid, end in ends.items():
        assert end["status"] == "compiled" and end["entry"]
        assert end["wall_s"] >= end["backend_s"] >= 0
    for b in breaks:
        assert b["span"] in starts
    f_starts = [r for r in starts.values() if r["frame"]["qualname"] == "f"]
    assert [s["entry_index"] for s in f_starts] == [0, 1]

    graphs = [r for r in records if r["kind"] == "graph"]
    first_f = next(g for g in graphs if g["entry"] == ends[f_starts[0]["capture"]]["entry"])
    assert first_f["op_counts"] == {"sin": 1, "add": 1}
    assert "torch.sin" in first_f["code"]
    assert first_f["inputs"][0] == {"source": "x", "shape": [3], "dtype": "float32", "device": "cpu",
                                    "requires_grad": False}
    lines = next(v for k, v in first_f["lines"].items() if k.endswith("traced_example.py"))
    assert lines == {"12": 2}

    guards = [r for r in records if r["kind"] == "guards"]
    assert all(g["source"].startswith("def ___guard_") and g["count"] > 0 for g in guards)
    glue = [r for r in records if r["kind"] == "glue"]
    assert any("# graph break at" in g["source"] for g in glue)

    recompile = next(r for r in records if r["kind"] == "recompile" and r["frame"]["qualname"] == "f")
    assert recompile["failed_guard"] == "x.dim(): 1 -> 2"     # what changed, both sides
    assert recompile["new_values"] == {"x": "Tensor(float32, shape=(4, 2), cpu)", "n": "1"}

    compiles = [r for r in records if r["kind"] == "backend_compile"]
    assert all(c["backend"] == "eager" and c["seconds"] >= 0 and c["error"] is None for c in compiles)


def test_fallback_and_backend_failure_are_recorded(trace_dir):
    def broken_backend(gm, example_inputs):
        raise RuntimeError("boom")

    def g(x):
        return torch.cos(x) + 1

    def gen(x):
        yield x

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kiln.compile(g, backend=broken_backend)(torch.ones(2))
        list(kiln.compile(gen)(torch.ones(2)))
    records = read_records(trace_dir)
    failed = next(r for r in records if r["kind"] == "backend_compile")
    assert failed["error"] == "RuntimeError: boom"
    fb = next(r for r in records if r["kind"] == "backend_fallback")
    assert fb["when"] == "while compiling" and fb["backend"] == "broken_backend"
    eager = next(r for r in records if r["kind"] == "fallback")
    assert eager["frame"]["name"] == "gen" and "generator" in eager["reason"]
    end = [r for r in records if r["kind"] == "capture_end"][-1]
    assert end["status"] == "eager fallback" and end["entry"] is None


def test_trace_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert kiln.config.trace_dir == ""
    assert kiln.compile(f)(torch.ones(3), 1) == f(torch.ones(3), 1)
    assert not trace.active()
    assert list(tmp_path.iterdir()) == []


def test_unwritable_trace_dir_warns_and_the_call_still_works(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    kiln.config.trace_dir = str(blocker / "trace")
    try:
        with pytest.warns(RuntimeWarning, match="trace could not be written"):
            assert kiln.compile(f)(torch.ones(3), 1) == f(torch.ones(3), 1)
    finally:
        kiln.config.trace_dir = ""
    assert not trace.active()


def test_config_trace_dir_is_checked(tmp_path):
    with pytest.raises(TypeError):
        kiln.config.trace_dir = 3
    kiln.config.trace_dir = tmp_path
    assert kiln.config.trace_dir == str(tmp_path)
    kiln.config.trace_dir = ""


def test_accuracy_results_are_recorded(trace_dir):
    x = torch.randn(4)
    report = compare(x, x.clone(), fp64_copy(x), name="out")
    assert report.ok
    (record,) = [r for r in read_records(trace_dir) if r["kind"] == "accuracy"]
    assert record["name"] == "out" and record["ok"] is True and record["compared"] == 1
