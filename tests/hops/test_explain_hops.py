"""kiln.explain nests bodies under their operator; KILN_LOGS=graph prints them; a body
Kiln cannot trace is a break whose reason names the operator."""
from __future__ import annotations

import torch
from torch._higher_order_ops.map import map as hop_map

import kiln
from kiln.config import config


def nested(x, xs):
    y = torch.cond(x.sum() > 0, lambda a: hop_map(lambda r: r.sin(), a), lambda a: a.cos(), (xs,))
    return y + 1


def test_explain_nests_subgraphs_under_their_operator():
    x, xs = torch.randn(3), torch.randn(2, 3)
    report = kiln.explain(nested)(x, xs)
    torch.testing.assert_close(report.result, nested(x, xs))
    text = str(report)
    assert report.graph_count == 1 and report.break_count == 0
    assert "cond -> cond_true: 2 ops (map_impl x1, getitem x1)" in text
    assert "  map_impl -> map_body: 1 ops (sin x1)" in text
    assert "cond -> cond_false: 1 ops (cos x1)" in text


def test_graph_log_prints_bodies(capsys, monkeypatch):
    monkeypatch.setattr(config, "logs", frozenset({"graph"}))
    kiln.compile(nested, fullgraph=True)(torch.randn(3), torch.randn(2, 3))
    out = capsys.readouterr().out
    assert ".cond_true:" in out and ".cond_true.map_body:" in out and ".cond_false:" in out


def test_untraceable_body_break_reason_in_explain():
    def f(x):
        def body(a):
            kiln.graph_break()
            return a * 2
        return hop_map(body, x) + 1
    x = torch.randn(2, 3)
    report = kiln.explain(f)(x)
    torch.testing.assert_close(report.result, f(x))
    assert report.break_count == 1
    assert "Kiln cannot trace the body of `map`" in report.breaks[0].reason
