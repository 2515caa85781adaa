"""Turn result rows into the things people read: a summary, a rich table, a CSV.

Why one row per model in the table, whatever the number of frontends: the point of
``--frontend both`` is to read Kiln and torch.compile side by side, so their columns
sit next to each other in the same row.  The full detail (every field of every
row) is in the CSV; the table keeps what fits a terminal.
"""
from __future__ import annotations

import csv
import math
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field, fields

from rich import box
from rich.table import Table

from ..runtime import native
from .noise import MARK, is_noisy, noise_lines, noise_reasons, startup_lines
from .results import COLUMNS, PASS, SKIPPED, Result

STATUS_STYLE = {"pass": "green", "skipped": "dim", "timeout": "yellow", "fail_accuracy": "magenta"}


@dataclass
class Summary:
    frontend: str
    total: int = 0
    ran: int = 0          # total minus skipped
    passed: int = 0
    statuses: Counter = field(default_factory=Counter)
    geomean_speedup: float | None = None
    speedups: int = 0     # rows the geomean is over
    graphs: int = 0
    breaks: int = 0
    recompiles: int = 0
    capture_s: float = 0.0
    overhead_us: float | None = None   # median over rows
    wall_s: float = 0.0

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.ran if self.ran else None


def geomean(values) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def count_row(s, row) -> None:
    """Add one row to the totals every summary keeps (the static and the dynamic one)."""
    s.statuses[row.status] += 1
    s.ran += row.status != SKIPPED
    s.passed += row.status == PASS
    s.graphs += row.graphs or 0
    s.breaks += row.breaks or 0
    s.recompiles += row.recompiles or 0
    s.wall_s += row.wall_s or 0.0


def summarize(rows: list[Result]) -> dict[str, Summary]:
    """Per-frontend totals, in the order the frontends first appear."""
    out: dict[str, Summary] = {}
    for row in rows:
        s = out.setdefault(row.frontend, Summary(row.frontend))
        s.total += 1
        count_row(s, row)
        s.capture_s += row.capture_s or 0.0
    for fe, s in out.items():
        mine = [r for r in rows if r.frontend == fe]
        speedups = [r.speedup for r in mine if r.status == PASS and r.speedup]
        s.geomean_speedup, s.speedups = geomean(speedups), len(speedups)
        overheads = [r.overhead_us for r in mine if r.overhead_us is not None]
        s.overhead_us = statistics.median(overheads) if overheads else None
    return out


def _fmt(value, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _status(row: Result | None) -> str:
    if row is None:
        return "-"
    style = STATUS_STYLE.get(row.status, "red")
    return f"[{style}]{row.status}[/{style}]"


def group_rows(rows: list[Result]):
    """``[(label, {frontend: row})]`` in first-seen order, one entry per model and device."""
    devices = {r.device for r in rows}
    groups: dict[tuple, dict[str, Result]] = {}
    for r in rows:
        groups.setdefault((r.model, r.device), {})[r.frontend] = r
    return [(m if len(devices) == 1 else f"{m} ({d})", g) for (m, d), g in groups.items()]


def build_table(rows: list[Result], title: str = "kiln bench"):
    """A rich Table: shared columns, then one block of columns per frontend.

    With two frontends the block is kept narrow enough for a 120-column terminal:
    graphs, breaks and recompiles share one ``g/b/r`` cell, and the first-call, overhead
    and accuracy columns are left to the CSV (accuracy failures show in the status).
    A speedup marked ``~`` comes from noisy timings (``bench.noise``).
    """
    frontends = list(dict.fromkeys(r.frontend for r in rows))
    single = len(frontends) == 1
    table = compact_table(title)
    table.add_column("model", overflow="fold")   # the one column that may wrap, should the rest not fit
    noisy = noise_reasons(rows)
    # eager is timed in every worker (interleaved with the compiled calls), so each
    # frontend's speedup is against its own eager column.
    counts = [("graphs", "right"), ("breaks", "right"), ("recomp", "right")] if single else [("g/b/r", "right")]
    per_frontend = [("status", None), *counts, ("eager ms" if single else "eager\nms", "right"), ("ms", "right"),
                    ("speedup", "right"), ("capture s" if single else "capture\ns", "right")]
    if single:
        per_frontend += [("1st call s", "right"), ("ovh µs", "right"), ("acc", None)]

    def cells(r):
        if single:
            out = [_fmt(r.graphs, "d"), _fmt(r.breaks, "d"), _fmt(r.recompiles, "d")]
        else:
            out = ["-" if r.graphs is None else "/".join(_fmt(v, "d") for v in (r.graphs, r.breaks, r.recompiles))]
        speedup = _fmt(r.speedup, ".2f", "x")
        if is_noisy(noisy, r):
            speedup = MARK + speedup
        out = [_status(r), *out, _fmt(r.eager_ms, ".2f"), _fmt(r.compiled_ms, ".2f"), speedup,
               _fmt(r.capture_s, ".2f")]
        if single:
            out += [_fmt(r.first_call_s, ".2f"), _fmt(r.overhead_us, ".1f"), r.accuracy or "-"]
        return out

    return add_frontend_blocks(table, rows, frontends, per_frontend, lambda label, group: [label], cells)


def compact_table(title: str) -> Table:
    """A table without vertical rules, one space either side of each cell: the lines
    between columns cost a column each, which two frontends' blocks cannot spare.
    Headers may take several lines (``"eager\\nms"``): a header, not a value, is what
    makes most of these columns wide."""
    return Table(title=title, header_style="bold", show_lines=False, box=box.SIMPLE_HEAD, show_edge=False,
                 pad_edge=False, padding=(0, 0, 0, 1))


def add_frontend_blocks(table, rows, frontends, per_frontend, lead_cells, frontend_cells):
    """One block of ``per_frontend`` columns per frontend, and one row per model: its
    ``lead_cells(label, group)`` then each frontend's ``frontend_cells(row)`` ("-" where
    that frontend has no row)."""
    single = len(frontends) == 1
    for fe in frontends:
        for name, justify in per_frontend:
            table.add_column(name if single else f"{fe}\n{name}", justify=justify or "left", no_wrap=True)
    for label, group in group_rows(rows):
        cells = lead_cells(label, group)
        for fe in frontends:
            r = group.get(fe)
            cells += ["-"] * len(per_frontend) if r is None else frontend_cells(r)
        table.add_row(*cells)
    return table


def overhead_ratio(rows: list[Result]) -> tuple[float, int] | None:
    """Geomean of Kiln's per-call overhead over torch.compile's, on the models (and
    modes) where both were measured; None when there are none."""
    by_key: dict = {}
    for r in rows:
        if r.overhead_us is not None and r.status == PASS:
            by_key.setdefault((r.model, r.mode, r.backend), {})[r.frontend] = r.overhead_us
    ratios = [d["kiln"] / d["torch"] for d in by_key.values() if d.get("kiln") and d.get("torch")]
    return (geomean(ratios), len(ratios)) if ratios else None


def summary_lines(rows: list[Result]) -> list[str]:
    """Plain-text summary: one line per frontend, then failures and top break reasons."""
    lines = []
    for fe, s in summarize(rows).items():
        rate = "-" if s.pass_rate is None else f"{100 * s.pass_rate:.0f}%"
        gm = "-" if s.geomean_speedup is None else f"{s.geomean_speedup:.2f}x over {s.speedups}"
        other = ", ".join(f"{k} {v}" for k, v in sorted(s.statuses.items()) if k != PASS)
        lines.append(f"{fe}: passed {s.passed}/{s.ran} ({rate})" + (f" [{other}]" if other else "")
                     + f"; geomean speedup {gm}; graphs {s.graphs}, breaks {s.breaks}, recompiles {s.recompiles}; "
                     f"capture {s.capture_s:.2f} s; overhead {_fmt(s.overhead_us, '.1f', ' µs/call')}; "
                     f"wall {s.wall_s:.1f} s")
    ratio = overhead_ratio(rows)
    if ratio is not None:
        lines.append(f"per-call overhead kiln/torch: geomean {ratio[0]:.2f}x over {ratio[1]} model(s) "
                     f"(each model's compiled call minus its graphs' time; Kiln's guards: "
                     f"{native.active_path()}, KILN_NO_C=1 for Python)")
    lines += startup_lines(rows)
    problems = [r for r in rows if r.status != PASS and r.reason]
    if problems:
        lines.append("")
        lines.append("not passing:")
        lines += [f"  {r.model} [{r.frontend}] {r.status}: {r.reason}" for r in problems]
    unchecked = [r for r in rows if r.status == PASS and r.accuracy == "unavailable"]
    if unchecked:
        lines.append("")
        lines.append(f"accuracy not checked for {len(unchecked)} passing row(s): {unchecked[0].reason}")
    return lines + noise_lines(rows) + break_lines(rows)


def break_lines(rows) -> list[str]:
    """Each frontend's most frequent graph-break reasons, per model that broke."""
    lines = []
    for fe in dict.fromkeys(r.frontend for r in rows):
        broken = [r for r in rows if r.frontend == fe and r.top_breaks]
        if broken:
            lines += ["", f"top graph-break reasons [{fe}]:"]
            lines += [f"  {r.model}: {r.top_breaks}" for r in broken]
    return lines


def write_csv(rows: list[Result], path: str) -> None:
    """Every field of every row, one row per (model, frontend, device).

    The columns are the row type's fields (``Result``, or ``DynamicResult`` for
    ``--dynamic`` runs).
    """
    columns = [f.name for f in fields(type(rows[0]))] if rows else COLUMNS
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in asdict(row).items()})


def read_csv(path: str) -> list[Result]:
    """Rows back from :func:`write_csv` (numbers parsed), e.g. to re-plot a saved run."""
    ints = {"graphs", "breaks", "recompiles"}
    floats = {"eager_ms", "compiled_ms", "speedup", "first_call_s", "capture_s", "overhead_us", "eager_spread",
              "compiled_spread", "import_s", "first_compile_s", "wall_s"}
    rows = []
    with open(path, newline="") as fh:
        for raw in csv.DictReader(fh):
            data = {}
            for k, v in raw.items():
                if k in ints:
                    data[k] = int(v) if v != "" else None
                elif k in floats:
                    data[k] = float(v) if v != "" else None
                else:
                    data[k] = v
            rows.append(Result.from_dict(data))
    return rows
