"""The table and summary of ``kiln bench --dynamic`` (rows: :class:`DynamicResult`).

Same layout as the static report (``report.py``): one row per model, a block of
columns per frontend so Kiln and torch.compile sit side by side, a summary line per
frontend under the table.  The columns are the series' own: graphs, recompiles and
recompile-limit hits over the whole series, its wall time compiled and eager, and
the accuracy of every call.  Under the summary, when both frontends ran, one line
compares Kiln with torch.compile over the models where both finished the series.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .noise import startup_lines
from .report import _fmt, _status, add_frontend_blocks, compact_table, break_lines, count_row
from .results import FAIL_ACCURACY, PASS, DynamicResult

#: rows whose series ran to the end (their counts and times cover every call)
FINISHED = (PASS, FAIL_ACCURACY)


@dataclass
class DynamicSummary:
    frontend: str
    ran: int = 0          # rows minus skipped
    passed: int = 0
    statuses: Counter = field(default_factory=Counter)
    graphs: int = 0
    breaks: int = 0
    recompiles: int = 0
    limit_hits: int = 0
    series_s: float = 0.0
    eager_series_s: float = 0.0
    calls: int = 0
    accuracy_fails: int = 0
    checked_calls: int = 0
    wall_s: float = 0.0


def summarize(rows: list[DynamicResult]) -> dict[str, DynamicSummary]:
    """Per-frontend totals over every row, in the order the frontends first appear."""
    out: dict[str, DynamicSummary] = {}
    for r in rows:
        s = out.setdefault(r.frontend, DynamicSummary(r.frontend))
        count_row(s, r)
        s.limit_hits += r.limit_hits or 0
        s.series_s += r.series_s or 0.0
        s.eager_series_s += r.eager_series_s or 0.0
        s.calls += r.calls or 0
        if r.accuracy_fails is not None:
            s.accuracy_fails += r.accuracy_fails
            s.checked_calls += r.calls or 0
    return out


def _accuracy(r: DynamicResult) -> str:
    if r.accuracy == "fail" and r.accuracy_fails is not None:
        return f"fail {r.accuracy_fails}/{r.calls}"
    return r.accuracy or "-"


def build_table(rows: list[DynamicResult], title: str = "kiln bench --dynamic"):
    """A rich Table: model, what the series varies, then one block per frontend."""
    frontends = list(dict.fromkeys(r.frontend for r in rows))
    table = compact_table(title)
    table.add_column("model", no_wrap=True)
    table.add_column("varies", no_wrap=True)
    table.add_column("shapes", justify="right", no_wrap=True)
    per_frontend = [("status", None), ("graphs", "right"), ("breaks", "right"), ("recomp", "right"),
                    ("limit", "right"), ("series s", "right"), ("eager s", "right"), ("acc", None)]
    def lead(label, group):
        known = next((r for r in group.values() if r.varies), None)
        return [label, known.varies if known else "-", _fmt(known.shapes if known else None, "d")]

    def cells(r):
        return [_status(r), _fmt(r.graphs, "d"), _fmt(r.breaks, "d"), _fmt(r.recompiles, "d"),
                _fmt(r.limit_hits, "d"), _fmt(r.series_s, ".2f"), _fmt(r.eager_series_s, ".3f"), _accuracy(r)]

    return add_frontend_blocks(table, rows, frontends, per_frontend, lead, cells)


def comparison_line(rows: list[DynamicResult], ours: str = "kiln", theirs: str = "torch") -> str | None:
    """Kiln against torch.compile over the models where both finished the series, or None."""
    by_model: dict[tuple, dict[str, DynamicResult]] = {}
    for r in rows:
        by_model.setdefault((r.model, r.device), {})[r.frontend] = r
    both = [(g[ours], g[theirs]) for g in by_model.values()
            if ours in g and theirs in g and g[ours].status in FINISHED and g[theirs].status in FINISHED]
    if not both:
        return None
    g_ours, g_theirs = sum(a.graphs or 0 for a, _ in both), sum(b.graphs or 0 for _, b in both)
    t_ours, t_theirs = sum(a.series_s or 0.0 for a, _ in both), sum(b.series_s or 0.0 for _, b in both)
    ratio = f" ({ours}/torch.compile {t_ours / t_theirs:.2f}x)" if t_theirs > 0 else ""
    return (f"{ours} vs torch.compile over the {len(both)} model(s) both finished: graphs {g_ours} vs {g_theirs}; "
            f"series time {t_ours:.2f} s vs {t_theirs:.2f} s{ratio}")


def summary_lines(rows: list[DynamicResult]) -> list[str]:
    """One line per frontend, the comparison, then what did not pass and top break reasons."""
    lines = []
    for fe, s in summarize(rows).items():
        other = ", ".join(f"{k} {v}" for k, v in sorted(s.statuses.items()) if k != PASS)
        acc = f"accuracy ok on {s.checked_calls - s.accuracy_fails}/{s.checked_calls} calls" \
            if s.checked_calls else "accuracy not checked"
        lines.append(f"{fe}: passed {s.passed}/{s.ran}" + (f" [{other}]" if other else "")
                     + f"; graphs {s.graphs}, breaks {s.breaks}, recompiles {s.recompiles}, "
                     f"limit hits {s.limit_hits}; series {s.series_s:.2f} s over {s.calls} calls "
                     f"(eager {s.eager_series_s:.2f} s); {acc}; wall {s.wall_s:.1f} s")
    compare = comparison_line(rows)
    if compare:
        lines.append(compare)
    lines += startup_lines(rows)      # imports only: the series' first compile is in series s
    problems = [r for r in rows if r.status != PASS and r.reason]
    if problems:
        lines += ["", "not passing:"]
        lines += [f"  {r.model} [{r.frontend}] {r.status}: {r.reason}" for r in problems]
    return lines + break_lines(rows)
