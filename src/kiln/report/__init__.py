"""``kiln report``: a self-contained HTML page of what Kiln did, built from the trace.

* :mod:`~kiln.report.collect` reads ``kiln-trace-*.jsonl`` records into a Report;
* :mod:`~kiln.report.html` renders it (with :mod:`~kiln.report.svg`'s timeline,
  :mod:`~kiln.report.sources`' coloured source and :mod:`~kiln.report.hints`);
* :mod:`~kiln.report.command` is the command line, including running a script's
  function under the trace first.
"""
from __future__ import annotations

from .collect import Report, load
from .html import render


def write_report(trace_dir: str, out_path: str, title: str | None = None) -> Report:
    """Render the trace in ``trace_dir`` to ``out_path``; returns the Report."""
    report = load(trace_dir)
    if title:
        report.title = title
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(render(report))
    return report


__all__ = ["Report", "load", "render", "write_report"]
