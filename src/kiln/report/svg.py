"""The report's timeline: one row per compiled frame, a bar per capture, the backend's
compile steps drawn over it.  Plain SVG text, so the page needs no script or library.

The x axis is the trace's own clock (seconds since the traced process started its
trace), so gaps between bars are time spent running the program, not compiling.
"""
from __future__ import annotations

import math
from html import escape

WIDTH = 1100
LABEL_W = 260
ROW_H = 20
AXIS_H = 28
CAPTURE_FILL = "#7aa6d6"
BACKEND_FILL = "#e08a3c"
FALLBACK_FILL = "#c94c4c"


def _ticks(span: float) -> list[float]:
    """Tick positions at a round step (1, 2 or 5 times a power of ten), about six over ``span``."""
    if span <= 0:
        return [0.0]
    raw = span / 6
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(span / step) + 1)]


def timeline(report) -> str:
    """The SVG for ``report`` (a collect.Report); an empty string when nothing was captured."""
    frames = [f for f in report.frames if f.captures]
    if not frames:
        return ""
    t0 = min(c.start for f in frames for c in f.captures)
    t1 = max((c.end if c.end is not None else c.start) for f in frames for c in f.captures)
    span = max(t1 - t0, 1e-6)
    plot_w = WIDTH - LABEL_W - 20
    height = AXIS_H + ROW_H * len(frames) + 10

    def x(t: float) -> float:
        return LABEL_W + (t - t0) / span * plot_w

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">']
    for tick in _ticks(span):
        tx = x(t0 + tick)
        out.append(f'<line x1="{tx:.1f}" y1="{AXIS_H - 6}" x2="{tx:.1f}" y2="{height - 6}" stroke="#ddd"/>')
        out.append(f'<text x="{tx:.1f}" y="{AXIS_H - 10}" text-anchor="middle" fill="#555">'
                   f'{tick:.3g} s</text>')
    for row, frame in enumerate(frames):
        y = AXIS_H + row * ROW_H
        label = frame.title if len(frame.title) <= 40 else frame.title[:37] + "..."
        out.append(f'<text x="{LABEL_W - 6}" y="{y + ROW_H - 6}" text-anchor="end">'
                   f'<title>{escape(frame.title)} ({escape(frame.location)})</title>{escape(label)}</text>')
        for c in frame.captures:
            end = c.end if c.end is not None else c.start
            w = max(x(end) - x(c.start), 1.5)
            fill = CAPTURE_FILL if c.status == "compiled" else FALLBACK_FILL
            wall = f"{c.wall_s * 1e3:.1f} ms" if c.wall_s is not None else "unfinished"
            tip = f"{frame.title} entry {c.entry_index}: capture {wall}, backend compile {c.backend_s * 1e3:.1f} ms"
            out.append(f'<rect x="{x(c.start):.1f}" y="{y + 3}" width="{w:.1f}" height="{ROW_H - 6}" '
                       f'fill="{fill}"><title>{escape(tip)} ({escape(c.status)})</title></rect>')
            for start, seconds, _record in c.backend_compiles:
                bw = max(x(start + seconds) - x(start), 1.0)
                out.append(f'<rect x="{x(start):.1f}" y="{y + 7}" width="{bw:.1f}" height="{ROW_H - 14}" '
                           f'fill="{BACKEND_FILL}"><title>backend compile {seconds * 1e3:.1f} ms</title></rect>')
    out.append("</svg>")
    return "\n".join(out)


def legend() -> str:
    items = [(CAPTURE_FILL, "capture (wall time, including backend compile)"),
             (BACKEND_FILL, "backend compile step"), (FALLBACK_FILL, "capture that ended in an eager fallback")]
    return " ".join(f'<span class="swatch" style="background:{c}"></span>{escape(t)}' for c, t in items)
