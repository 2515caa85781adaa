"""Issue #16: the HTML report.  Rendering from records (what each section shows), from
a real trace of a small function, and the page's self-containment."""
import json
import re

import torch

import kiln
from kiln import trace
from kiln.report import collect, html, sources, svg, write_report
from kiln.report.hints import hint_for

from .traced_example import f


def _session(pid=1):
    return {"kind": "session", "t": 0.0, "span": None, "pid": pid, "wall_time": 1000.0}


def _records(tmp_path):
    src = tmp_path / "user.py"
    src.write_text("import torch\n\ndef g(x):\n    y = x.sin()\n    print(y)\n    return y + 1\n")
    frame = {"name": "g", "qualname": "g", "file": str(src), "line": 3}
    loc = f"{src}:5"
    return src, [
        _session(),
        {"kind": "capture_start", "t": 1.0, "span": None, "capture": 1, "frame": frame, "cache": 7,
         "entry_index": 0, "backend": "eager"},
        {"kind": "break", "t": 1.1, "span": 1, "reason": "print() has a side effect Kiln does not capture",
         "location": loc, "source_line": "print(y)", "stack": [{"file": str(src), "line": 5, "location": loc,
                                                                 "source": "print(y)"}],
         "depth": 0, "counted": True},
        {"kind": "backend_compile", "t": 1.3, "span": 1, "entry": "g_1", "backend": "eager", "seconds": 0.1,
         "error": None},
        {"kind": "graph", "t": 1.35, "span": 1, "entry": "g_1", "code": "def forward(self, x):\n    sin = x.sin()",
         "op_count": 1, "op_counts": {"sin": 1}, "inputs": [{"source": "x", "shape": [2, 3], "dtype": "float32",
                                                              "device": "cpu", "requires_grad": False}],
         "lines": {str(src): {"4": 1}}},
        {"kind": "guards", "t": 1.36, "span": 1, "entry": "g_1", "source": "def ___guard_g_1(x):\n    return True",
         "count": 3},
        {"kind": "glue", "t": 1.37, "span": 1, "entry": "g_1", "source": "def ___glue_g_1(x):\n    pass"},
        {"kind": "capture_end", "t": 1.5, "span": None, "capture": 1, "status": "compiled", "entry": "g_1",
         "wall_s": 0.5, "backend_s": 0.1},
        {"kind": "recompile", "t": 2.0, "span": None, "frame": frame, "failed_guard": "expected x.shape == (2, 3)",
         "new_values": {"x": "Tensor(float32, shape=(4,), cpu)"}},
        {"kind": "capture_start", "t": 2.0, "span": None, "capture": 2, "frame": frame, "cache": 7,
         "entry_index": 1, "backend": "eager"},
        {"kind": "capture_end", "t": 2.25, "span": None, "capture": 2, "status": "compiled", "entry": "g_2",
         "wall_s": 0.25, "backend_s": 0.0},
        {"kind": "bench_result", "t": 3.0, "span": None, "model": "m", "overhead_us": 12.5},
    ]


def test_collect_pairs_records_with_captures(tmp_path):
    _, records = _records(tmp_path)
    report = collect.build([records])
    assert len(report.frames) == 1 and len(report.frames[0].captures) == 2
    first, second = report.frames[0].captures
    assert first.entry == "g_1" and first.graph["op_counts"] == {"sin": 1} and first.guards["count"] == 3
    assert first.backend_compiles[0][1] == 0.1 and first.backend_s == 0.1
    assert second.recompile["failed_guard"] == "expected x.shape == (2, 3)"
    assert [b.location.endswith("user.py:5") for b in report.breaks] == [True]
    assert report.capture_wall_s == 0.75 and report.backend_s == 0.1
    assert [r["kind"] for r in report.extras] == ["bench_result"]


def test_page_shows_summary_source_frames_and_breaks(tmp_path):
    src, records = _records(tmp_path)
    page = html.render(collect.build([records]))
    # summary bar: each figure with its own label
    stats = dict(re.findall(r'data-stat="([^"]+)"><b>([^<]*)</b>', page))
    assert stats["graphs"] == "1" and stats["graph breaks"] == "1" and stats["recompiles"] == "1"
    assert stats["capture time"] == "750.0 ms" and stats["backend compile"] == "100.0 ms"
    assert stats["tracing + codegen"] == "650.0 ms" and stats["per-call overhead"] == "12.5 µs"
    # the break: listed with file:line, its reason hidden until clicked, a hint
    assert f'data-location="{src}:5"' in page
    assert re.search(r'id="break-1-body" hidden>.*print\(\) has a side effect', page)
    assert "Printing is a Python side effect" in page
    # source: line 4 coloured by graph g_1, line 5 has the break marker
    assert re.search(r'<div class="ln g0" data-line="4" title="g_1: 1 ops">', page)
    assert re.search(r'data-line="5"[^>]*>.*?class="break-marker"', page)
    # frames: guards, graph and glue as code; recompile history with old and new values
    assert "def ___guard_g_1(x)" in page and "def ___glue_g_1(x)" in page and "sin = x.sin()" in page
    assert "expected x.shape == (2, 3)" in page and "Tensor(float32, shape=(4,), cpu)" in page
    assert "<svg" in page and "backend compile 100.0 ms" in page


def test_page_is_self_contained(tmp_path):
    _, records = _records(tmp_path)
    page = html.render(collect.build([records]))
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "<link" not in page and "@import" not in page and "url(" not in page


def test_page_escapes_user_text(tmp_path):
    src, records = _records(tmp_path)
    records[2]["reason"] = "<script>alert(1)</script>"
    page = html.render(collect.build([records]))
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_report_of_a_real_trace(tmp_path):
    kiln.config.trace_dir = str(tmp_path / "trace")
    try:
        cf = kiln.compile(f)
        cf(torch.ones(3), 1)
        cf(torch.ones(5), 1)
    finally:
        kiln.config.trace_dir = ""
        trace.close()
    out = tmp_path / "r.html"
    report = write_report(str(tmp_path / "trace"), str(out), title="small")
    page = out.read_text()
    # helper is captured twice (the new shape), and each capture counts its break, as kiln.metrics does
    assert len(report.graph_breaks) == 2 == kiln.metrics.breaks.__len__()
    assert all(b.location.endswith("traced_example.py:7") for b in report.graph_breaks)
    assert len(report.recompiles) == 4       # each of the four frames sees a new shape
    assert "traced_example.py:7" in page and 'class="call-marker"' in page   # f's line 13 calls helper
    assert "<title>small</title>" in page


def test_timeline_ticks_and_hints():
    assert svg._ticks(1.0)[:3] == [0.0, 0.2, 0.4]
    assert "library code" in hint_for("call to numpy.stack, which Kiln does not model",
                                      torch.__file__)
    assert "library code" not in hint_for("x", "/home/user/model.py")


def test_sessions_appended_to_one_file_are_kept_apart(tmp_path):
    _, records = _records(tmp_path)
    later = [dict(r, wall_time=2000.0) if r["kind"] == "session" else r for r in records]
    trace_dir = tmp_path / "t"
    trace_dir.mkdir()
    (trace_dir / "kiln-trace-1.jsonl").write_text("\n".join(json.dumps(r) for r in records + later) + "\n")
    report = collect.load(str(trace_dir))
    assert len(report.captures) == 4 and len(report.sessions) == 2
    assert report.captures[-1].start - report.captures[0].start == 1001.0


def test_long_files_show_the_interesting_lines_with_context(tmp_path):
    sf = sources.SourceFile("x.py", [f"line {i}" for i in range(1, 1001)], graphs={500: ["g"]})
    shown = sf.shown()
    assert shown == [None, 497, 498, 499, 500, 501, 502, 503, None]
    assert sources.short_path("/v/lib/python3.11/site-packages/transformers/x.py") == "transformers/x.py"


def test_timeline_has_a_row_per_frame_and_marks_backend_time(tmp_path):
    _, records = _records(tmp_path)
    chart = svg.timeline(collect.build([records]))
    assert chart.startswith("<svg") and chart.endswith("</svg>")
    assert chart.count("<rect") == 3       # two captures of one frame, one backend compile step
    assert "g entry 0: capture 500.0 ms, backend compile 100.0 ms" in chart
    assert svg.timeline(collect.Report()) == ""
