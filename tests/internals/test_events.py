"""``kiln.events``: one call per thing Kiln does, feeding metrics, the trace and the logs.

The table is the contract: every kind a site reports is a row, a ``later`` field is
computed once and only when a sink that is on reads it, and compile-time code reports
through ``event`` rather than touching the counters or the trace's compile-time records
itself (the test reads the source, as the layer test does).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import kiln
from kiln import events
from kiln.config import config
from kiln.metrics import metrics

SRC = Path(__file__).resolve().parents[2] / "src" / "kiln"


def test_a_later_field_is_computed_once_and_only_when_read(monkeypatch, capsys):
    calls = []

    def expensive():
        calls.append(1)
        return "guard text"

    monkeypatch.setattr(config, "logs", frozenset())
    before = metrics.recompiles
    events.event("recompile", code=test_a_later_field_is_computed_once_and_only_when_read.__code__,
                 failing=events.later(expensive), args=(), kwargs={}, params=None)
    assert metrics.recompiles == before + 1
    assert calls == []                      # no log on, trace off: never computed
    monkeypatch.setattr(config, "logs", frozenset({"recompiles"}))
    events.event("recompile", code=test_a_later_field_is_computed_once_and_only_when_read.__code__,
                 failing=events.later(expensive), args=(), kwargs={}, params=None)
    assert calls == [1]                     # read by the log, once
    assert "[kiln]" in capsys.readouterr().out


def test_fields_compute_later_values_on_first_read_only():
    n = []
    f = events.Fields(a=events.later(lambda: n.append(1) or 5), b=2)
    assert f["a"] == 5 and f["a"] == 5 and f["b"] == 2
    assert n == [1]


def test_every_kind_a_site_reports_is_a_row():
    used = set()
    for path in SRC.rglob("*.py"):
        used |= set(re.findall(r"\bevent\(\s*\"(\w+)\"", path.read_text()))
    assert used, "the sites were not found"
    assert used <= set(events.KINDS), f"kinds reported but not in events.KINDS: {used - set(events.KINDS)}"
    assert not set(events.KINDS) - used, f"rows no site reports: {set(events.KINDS) - used}"


def test_an_unknown_kind_is_refused():
    with pytest.raises(KeyError):
        events.event("no_such_kind")


def test_compile_time_sites_report_through_event_only():
    # the counters of kiln.metrics and the trace's compile-time records are written by
    # events.py alone; tools that time or check things (bench, accuracy) emit their own
    # records with trace.emit, which is not a compile-time event
    counters = re.compile(r"\bmetrics\.(frames_captured|graphs|ops|recompiles|eager_fallbacks|backend_fallbacks|"
                          r"ddp_split_graphs|ddp_stages)\s*\+=|\bmetrics\.breaks\.append")
    records = re.compile(r"\btrace\.(capture_start|capture_end|graph|entry|graph_break|fallback|recompile|"
                         r"recompile_limit|backend_compile|backend_fallback)\(")
    bad = []
    for path in SRC.rglob("*.py"):
        if path.name in ("events.py", "metrics.py", "trace.py"):
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if counters.search(line) or records.search(line):
                bad.append(f"{path.relative_to(SRC)}:{i}: {line.strip()}")
    assert not bad, "sites that report around kiln.events:\n" + "\n".join(bad)


def test_one_compile_feeds_the_counters_once():
    kiln.reset()
    metrics.reset()

    def f(x):
        return x.sin() + 1

    fast = kiln.compile(f, backend="eager")
    for n in (3, 3):
        x = torch.randn(n)
        torch.testing.assert_close(fast(x), f(x))
    assert metrics.graphs == 1 and metrics.frames_captured == 1 and metrics.ops == 2
    assert metrics.recompiles == 0
