"""Rendering a collect.Report as one self-contained HTML page.

Why one file with inline CSS and a few lines of inline script: the page is sent
around (CI artefacts, issue attachments) and opened from disk, often offline, so it
must not fetch anything.  Everything works without the script too, except opening a
break's details in place (the breaks list at the top always shows them).

Sections, in order: the summary bar; the graph breaks; the timeline; the source files
with each line coloured by the graph it went into and break markers in the margin;
per compiled frame its cache entries (guards, graph, glue, times) and recompile
history; anything else the trace holds (benchmark figures, accuracy results).
docs/report.md describes the page for users.
"""
from __future__ import annotations

from html import escape

from . import svg
from .hints import hint_for
from .sources import gather, short_path

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; background: #fafafa; }
header { background: #2d3e50; color: #fff; padding: 12px 20px; position: sticky; top: 0; z-index: 2; }
header h1 { font-size: 18px; margin: 0 0 8px 0; }
.summary { display: flex; flex-wrap: wrap; gap: 8px; }
.stat { background: #3e5368; border-radius: 4px; padding: 4px 10px; }
.stat b { font-size: 16px; display: block; }
.stat span { font-size: 11px; color: #cfd8e3; }
.stat.bad { background: #8a3b3b; }
main { padding: 10px 20px 40px; }
section { margin-top: 24px; }
h2 { font-size: 17px; border-bottom: 1px solid #ccc; padding-bottom: 4px; }
pre, code, .src { font: 12px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; }
pre { background: #fff; border: 1px solid #ddd; padding: 8px; overflow-x: auto; }
.break { background: #fff; border: 1px solid #ddd; border-left: 4px solid #c94c4c; margin: 6px 0; }
.break-toggle { all: unset; cursor: pointer; display: block; padding: 6px 10px; width: calc(100% - 20px); }
.break-toggle:hover, .break-marker:hover { background: #f3e6e6; }
.break-body { padding: 4px 12px 10px; border-top: 1px dashed #ddd; }
.break-body .reason { font-weight: 600; }
.hint { background: #fff8e0; border-left: 3px solid #e0b93c; padding: 4px 8px; margin-top: 6px; }
.loc { font-family: ui-monospace, monospace; color: #555; }
.file { background: #fff; border: 1px solid #ddd; margin: 8px 0; }
.file > summary { padding: 6px 10px; cursor: pointer; background: #eef1f4; }
.src { overflow-x: auto; }
.ln { display: flex; white-space: pre; }
.ln .no { width: 52px; text-align: right; color: #999; padding-right: 6px; flex: none; user-select: none; }
.ln .margin { width: 22px; flex: none; text-align: center; }
.ln .text { flex: 1; padding-left: 4px; }
.gap { color: #aaa; padding-left: 60px; }
.break-marker { all: unset; cursor: pointer; color: #c94c4c; font-weight: bold; }
.call-marker { all: unset; cursor: pointer; color: #c94c4c; }
.inline-break { white-space: normal; margin: 2px 0 6px 80px; font-family: system-ui, sans-serif;
                background: #fff; border: 1px solid #e3c4c4; padding: 6px 10px; }
.legend span.g { display: inline-block; padding: 1px 6px; margin: 2px; border-radius: 3px; }
.swatch { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; vertical-align: middle; }
.frame { background: #fff; border: 1px solid #ddd; padding: 6px 12px; margin: 10px 0; }
.frame h3 { margin: 4px 0; font-size: 15px; }
.entry { margin: 6px 0; border-top: 1px solid #eee; }
.entry > summary { cursor: pointer; padding: 4px 0; }
table { border-collapse: collapse; margin: 4px 0; }
td, th { border: 1px solid #ddd; padding: 2px 8px; text-align: left; vertical-align: top; font-size: 13px; }
th { background: #f0f0f0; }
small { color: #666; }
"""

# Opens a break's details in place.  The ``#kiln-test-click`` hook clicks every break
# marker and list entry once, so a headless browser's DOM dump shows them opened.
SCRIPT = """
function kilnToggle(id) {
  var el = document.getElementById(id);
  if (!el) return;
  if (el.hasAttribute('hidden')) el.removeAttribute('hidden'); else el.setAttribute('hidden', '');
}
document.querySelectorAll('[data-toggle]').forEach(function (b) {
  b.addEventListener('click', function () { kilnToggle(b.getAttribute('data-toggle')); });
});
if (location.hash === '#kiln-test-click') {
  var clicked = 0;
  document.querySelectorAll('[data-toggle]').forEach(function (b) { b.click(); clicked++; });
  document.body.setAttribute('data-test-clicked', String(clicked));
}
"""


def _ms(seconds) -> str:
    return "?" if seconds is None else f"{seconds * 1e3:.1f} ms"


def _s(seconds) -> str:
    return "?" if seconds is None else (f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.1f} ms")


def _graph_colours(report) -> dict:
    """Graph entry name -> index of its colour (CSS class g<i>)."""
    return {name: i for i, name in enumerate(report.graph_names())}


def _colour_css(n: int) -> str:
    rules = []
    for i in range(n):
        hue = (i * 137.508) % 360
        rules.append(f".g{i} {{ background: hsl({hue:.0f} 70% 86%); }}")
    return "\n".join(rules)


def render(report) -> str:
    """The whole page for ``report``."""
    colours = _graph_colours(report)
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(report.title)}</title>",
        f"<style>{CSS}\n{_colour_css(len(colours))}</style></head><body>",
        "<header>", f"<h1>{escape(report.title)}</h1>", summary_bar(report), "</header><main>",
        breaks_section(report),
        timeline_section(report),
        sources_section(report, colours),
        frames_section(report, colours),
        extras_section(report),
        "</main>",
        f"<script>{SCRIPT}</script>",
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)


# -- summary -------------------------------------------------------------------------

def _stat(value, label: str, tip: str, bad: bool = False) -> str:
    cls = "stat bad" if bad else "stat"
    return (f'<div class="{cls}" title="{escape(tip)}" data-stat="{escape(label)}">'
            f"<b>{escape(str(value))}</b><span>{escape(label)}</span></div>")


def _overhead(report) -> list:
    """Per-call figures from the records that measured them (bench runs, kiln report --measure)."""
    out = []
    for r in report.extras:
        if r.get("kind") == "bench_result" and "overhead_us" in r:
            if r["overhead_us"] is None:     # said so, not left out: the page shows what was asked
                out.append(_stat("not measured", "per-call overhead",
                                 "kiln bench measures it on inference rows with timing on; a difference "
                                 "below the timing noise is not reported as a figure"))
            else:
                out.append(_stat(f"{r['overhead_us']:.1f} µs", "per-call overhead",
                                 "one compiled call of the model minus calling its compiled graphs "
                                 "directly (guards, glue, resumed frames; kiln bench's probe)"))
        if r.get("kind") == "measure":
            out.append(_stat(f"{r['compiled_ms']:.2f} / {r['eager_ms']:.2f} ms", "call: compiled / eager",
                             f"median wall time of one call over {r.get('calls')} interleaved calls each"))
    return out


def summary_bar(report) -> str:
    tracing = report.capture_wall_s - report.backend_s
    stats = [
        _stat(len(report.graphs), "graphs", "graphs handed to a backend"),
        _stat(len(report.graph_breaks), "graph breaks", "breaks counted by kiln.metrics (as kiln explain lists)",
              bad=bool(report.graph_breaks)),
        _stat(len(report.fallbacks), "eager fallbacks", "frames that run eagerly because capture failed",
              bad=bool(report.fallbacks)),
        _stat(len(report.recompiles), "recompiles", "captures of a frame that already had an entry",
              bad=bool(report.recompiles)),
        _stat(len(report.backend_fallbacks), "backend fallbacks", "graphs run eagerly because the backend failed",
              bad=bool(report.backend_fallbacks)),
        _stat(sum(g.get("op_count", 0) for g in report.graphs), "ops", "ops in all graphs"),
        _stat(len(report.captures), "captures", "captures (cache entries attempted), all frames"),
        _stat(_s(report.capture_wall_s), "capture time",
              "wall time of every capture, from guard miss to cache entry, including backend compile"),
        _stat(_s(report.backend_s), "backend compile", "time in the backends' compile steps (part of capture time)"),
        _stat(_s(tracing), "tracing + codegen", "capture time minus backend compile time"),
        *_overhead(report),
    ]
    return '<div class="summary">' + "".join(stats) + "</div>"


# -- breaks ---------------------------------------------------------------------------

def _break_body(b) -> str:
    rows = [f'<div class="reason">{escape(b.reason)}</div>',
            f'<div>at <span class="loc">{escape(b.location or "?")}</span></div>']
    if b.source_line:
        rows.append(f"<pre>{escape(b.source_line)}</pre>")
    if len(b.stack) > 1:
        rows.append("<div>Inlined calls, outermost first:</div><ol>")
        for level in b.stack:
            text = f" <code>{escape(level['source'])}</code>" if level.get("source") else ""
            rows.append(f'<li><span class="loc">{escape(level.get("location") or "?")}</span>{text}</li>')
        rows.append("</ol>")
    if b.frame:
        rows.append(f"<div>In frame <code>{escape(b.frame.get('qualname') or b.frame.get('name') or '?')}"
                    f"</code> ({escape(b.kind)})</div>")
    if getattr(b, "fix", None):
        rows.append(f'<div class="hint">Fix: {escape(b.fix)}</div>')
    rows.append(f'<div class="hint">{escape(hint_for(b.reason, b.file))}</div>')
    return "".join(rows)


def breaks_section(report) -> str:
    out = ['<section id="breaks"><h2>Graph breaks and eager fallbacks</h2>']
    if not report.breaks:
        out.append("<p>None: every frame was captured whole.</p>")
    for b in report.breaks:
        label = "eager fallback" if b.kind == "fallback" else "break"
        out.append(f'<div class="break" id="break-{b.index}" data-location="{escape(b.location or "")}">'
                   f'<button class="break-toggle" data-toggle="break-{b.index}-body">'
                   f'{b.index}. <span class="loc" title="{escape(b.location or "")}">'
                   f'{escape(short_path(b.location or "?"))}</span> — {label}: '
                   f"{escape(b.reason)}</button>"
                   f'<div class="break-body" id="break-{b.index}-body" hidden>{_break_body(b)}</div></div>')
    out.append("</section>")
    return "\n".join(out)


def timeline_section(report) -> str:
    chart = svg.timeline(report)
    if not chart:
        return ""
    return (f'<section id="timeline"><h2>Timeline</h2><div>{svg.legend()}</div>'
            f"<p><small>One row per compiled frame; x is seconds since the trace started.</small></p>"
            f"{chart}</section>")


# -- sources --------------------------------------------------------------------------

def _line(sf, no: int, colours: dict) -> str:
    graphs = sf.graphs.get(no, [])
    cls = f" g{colours[graphs[0]]}" if graphs and graphs[0] in colours else ""
    tip = ""
    if graphs:
        tip = "; ".join(f"{g}: {sf.ops.get(no, {}).get(g, 0)} ops" for g in graphs)
    margin, inline = "", []
    for b in sf.breaks.get(no, []):
        margin += (f'<button class="break-marker" title="{escape(b.reason)}" '
                   f'data-toggle="src-break-{b.index}-{no}" data-break="{b.index}">&#9679;</button>')
        inline.append(f'<div class="inline-break" id="src-break-{b.index}-{no}" hidden>{_break_body(b)}</div>')
    for b in sf.calls.get(no, []):
        if b in sf.breaks.get(no, []):
            continue
        margin += (f'<button class="call-marker" title="a call that breaks inside: {escape(b.reason)}" '
                   f'data-toggle="src-call-{b.index}-{no}" data-break="{b.index}">&#9675;</button>')
        inline.append(f'<div class="inline-break" id="src-call-{b.index}-{no}" hidden>{_break_body(b)}</div>')
    text = sf.text[no - 1] if no <= len(sf.text) else ""
    row = (f'<div class="ln{cls}" data-line="{no}" title="{escape(tip)}"><span class="no">{no}</span>'
           f'<span class="margin">{margin}</span><span class="text">{escape(text)}</span></div>')
    return row + "".join(inline)


def sources_section(report, colours: dict) -> str:
    files = gather(report)
    if not files:
        return ""
    legend = "".join(f'<span class="g g{i}">{escape(name)}</span>' for name, i in colours.items())
    out = ['<section id="sources"><h2>Source</h2>',
           "<p><small>Each line is coloured by the (first) graph its ops went into; hover for every graph "
           "and op count. &#9679; marks a break (click it), &#9675; a call whose callee breaks.</small></p>",
           f'<div class="legend">{legend}</div>']
    for sf in files:
        tag = " <small>(library)</small>" if sf.library else ""
        out.append(f'<details class="file" open data-file="{escape(sf.path)}"><summary>'
                   f'<span class="loc" title="{escape(sf.path)}">{escape(short_path(sf.path))}</span>{tag}'
                   f'</summary><div class="src">')
        for no in sf.shown():
            out.append('<div class="gap">&#8942;</div>' if no is None else _line(sf, no, colours))
        out.append("</div></details>")
    out.append("</section>")
    return "\n".join(out)


# -- frames ---------------------------------------------------------------------------

def _op_table(graph: dict) -> str:
    counts = sorted(graph.get("op_counts", {}).items(), key=lambda kv: -kv[1])
    rows = "".join(f"<tr><td><code>{escape(k)}</code></td><td>{v}</td></tr>" for k, v in counts)
    return f"<table><tr><th>op</th><th>count</th></tr>{rows}</table>"


def _inputs_table(graph: dict) -> str:
    rows = []
    for i in graph.get("inputs", []):
        shape = "x".join(str(d) for d in i.get("shape", [])) or "scalar"
        rows.append(f"<tr><td><code>{escape(i.get('source', '?'))}</code></td><td>{escape(i.get('dtype', '?'))}"
                    f"</td><td>{escape(shape)}</td><td>{escape(i.get('device', ''))}</td>"
                    f"<td>{'yes' if i.get('requires_grad') else ''}</td></tr>")
    head = "<tr><th>input (source)</th><th>dtype</th><th>shape</th><th>device</th><th>requires_grad</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def _entry(c, colours: dict) -> str:
    swatch = ""
    if c.entry in colours:
        swatch = f' <span class="g g{colours[c.entry]}">{escape(c.entry)}</span>'
    ops = c.graph.get("op_count", 0) if c.graph else 0
    guards = c.guards.get("count", 0) if c.guards else 0
    name = swatch or f" <code>{escape(c.entry or '-')}</code>"
    head = (f"Entry {c.entry_index}:{name} — {escape(c.status)}, "
            f"capture {_ms(c.wall_s)} (backend compile {_ms(c.backend_s)}), {guards} guards, {ops} ops")
    body = []
    if c.recompile:
        body.append(f"<div>Recompiled because the last entry's guard failed: "
                    f"<code>{escape(c.recompile.get('failed_guard') or '?')}</code></div>")
    if c.fallback:
        body.append(f'<div class="hint">Eager fallback: {escape(c.fallback.get("reason", ""))}</div>')
    for b in c.breaks:
        counted = "" if b.get("counted", True) else " (counted in the callee's own frame)"
        body.append(f'<div>Graph break{counted}: {escape(b["reason"])} at '
                    f'<span class="loc">{escape(b.get("location") or "?")}</span></div>')
    if c.guards:
        body.append(f"<h4>Guards ({guards})</h4><pre>{escape(c.guards.get('source', ''))}</pre>")
    if c.graph:
        body.append(f"<h4>Graph ({ops} ops)</h4>{_op_table(c.graph)}{_inputs_table(c.graph)}"
                    f"<pre>{escape(c.graph.get('code', '').strip())}</pre>")
    for start, seconds, rec in c.backend_compiles:
        err = f", failed: {escape(rec['error'])}" if rec.get("error") else ""
        body.append(f"<div>Backend <code>{escape(rec.get('backend', '?'))}</code> compiled "
                    f"<code>{escape(rec.get('entry', '?'))}</code> in {_ms(seconds)}{err}</div>")
    if c.glue:
        body.append(f"<h4>Glue</h4><pre>{escape(c.glue.get('source', ''))}</pre>")
    return (f'<details class="entry" data-entry="{escape(c.entry or "")}"><summary>{head}</summary>'
            f'{"".join(body)}</details>')


def _recompile_history(frame) -> str:
    rows = []
    for c in frame.captures:
        if not c.recompile:
            continue
        values = ", ".join(f"{k} = {v}" for k, v in (c.recompile.get("new_values") or {}).items())
        rows.append(f"<tr><td>{c.entry_index}</td><td><code>{escape(c.recompile.get('failed_guard') or '?')}"
                    f"</code></td><td><code>{escape(values)}</code></td></tr>")
    if not rows:
        return ""
    return ("<h4>Recompile history</h4><table><tr><th>entry</th><th>guard that failed (old value)</th>"
            f"<th>this call's arguments (new values)</th></tr>{''.join(rows)}</table>")


def frames_section(report, colours: dict) -> str:
    if not report.frames:
        return '<section id="frames"><h2>Compiled frames</h2><p>Nothing was captured.</p></section>'
    out = ['<section id="frames"><h2>Compiled frames</h2>']
    for i, frame in enumerate(report.frames, 1):
        wall = sum(c.wall_s or 0 for c in frame.captures)
        backends = ", ".join(sorted({c.backend for c in frame.captures}))
        out.append(f'<div class="frame" id="frame-{i}"><h3><code>{escape(frame.title)}</code> '
                   f'<small><span class="loc">{escape(frame.location)}</span> · backend {escape(backends)} · '
                   f"{len(frame.captures)} entr{'y' if len(frame.captures) == 1 else 'ies'} · "
                   f"capture {_ms(wall)}</small></h3>")
        out.append(_recompile_history(frame))
        out.extend(_entry(c, colours) for c in frame.captures)
        out.append("</div>")
    for r in report.recompile_limits:
        out.append(f'<div class="hint">{escape(r.get("message", ""))}</div>')
    out.append("</section>")
    return "\n".join(out)


# -- everything else ------------------------------------------------------------------

def extras_section(report) -> str:
    if not report.extras:
        return ""
    out = ['<section id="extras"><h2>Other records</h2>']
    for r in report.extras:
        fields = {k: v for k, v in r.items() if k not in ("kind", "span")}
        rows = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>" for k, v in fields.items())
        out.append(f'<h4>{escape(r.get("kind", "?"))}</h4><table data-kind="{escape(r.get("kind", ""))}">'
                   f"{rows}</table>")
    out.append("</section>")
    return "\n".join(out)
