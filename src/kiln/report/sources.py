"""Which source lines went into which graph, and where the breaks are, per file.

The trace gives, for every graph, the ``file -> line -> op count`` of the lines that
produced its ops (each level of the inlined-call stack counts, so the user's call
line is coloured as well as the library line inside it).  Breaks give their own line
and the call lines that led there.  This module reads the files and picks the lines
to show: whole files when they are short, otherwise the interesting lines with some
context around them.
"""
from __future__ import annotations

import linecache
import os
from dataclasses import dataclass, field

from .hints import is_library

CONTEXT = 3           # lines shown around an interesting line in a long file
WHOLE_FILE = 250      # files up to this many lines are shown whole


@dataclass
class SourceFile:
    path: str
    text: list                                        # the file's lines, without newlines
    graphs: dict = field(default_factory=dict)        # line -> [graph entry names]
    ops: dict = field(default_factory=dict)           # line -> {graph: op count}
    breaks: dict = field(default_factory=dict)        # line -> [Break] breaking at this line
    calls: dict = field(default_factory=dict)         # line -> [Break] whose inlined stack passes here

    @property
    def library(self) -> bool:
        return is_library(self.path)

    def shown(self) -> list:
        """The line numbers to show, in order; a None stands for skipped lines."""
        n = len(self.text)
        if n <= WHOLE_FILE:
            return list(range(1, n + 1))
        wanted = set()
        for line in {*self.graphs, *self.breaks, *self.calls}:
            wanted.update(range(max(1, line - CONTEXT), min(n, line + CONTEXT) + 1))
        out, previous = [], 0
        for line in sorted(wanted):
            if line != previous + 1:
                out.append(None)
            out.append(line)
            previous = line
        if previous != n:
            out.append(None)
        return out


def gather(report) -> list[SourceFile]:
    """The files the report's graphs and breaks touch; the user's files first."""
    files: dict = {}

    def get(path: str) -> SourceFile | None:
        if path not in files:
            lines = linecache.getlines(path)
            files[path] = SourceFile(path, [l.rstrip("\n") for l in lines]) if lines else None
        return files[path]

    for c in report.captures:
        if c.graph is None:
            continue
        for path, per_line in (c.graph.get("lines") or {}).items():
            sf = get(path)
            if sf is None:
                continue
            for line, count in per_line.items():
                line = int(line)
                names = sf.graphs.setdefault(line, [])
                if c.entry not in names:
                    names.append(c.entry)
                sf.ops.setdefault(line, {})[c.entry] = count
    for b in report.breaks:
        if b.file and b.line:
            sf = get(b.file)
            if sf is not None:
                sf.breaks.setdefault(b.line, []).append(b)
        for level in b.stack[:-1]:
            if level.get("file") and level.get("line") and level.get("location") != b.location:
                sf = get(level["file"])
                if sf is not None:
                    sf.calls.setdefault(level["line"], []).append(b)
    # a break inside a callee compiled as its own frame is counted there; the caller's
    # record of it still knows the call lines that led to it
    counted = {b.location: b for b in report.breaks}
    for c in report.captures:
        for r in c.breaks:
            b = counted.get(r.get("location"))
            if r.get("counted", True) or b is None:
                continue
            for level in (r.get("stack") or [])[:-1]:
                if level.get("file") and level.get("line"):
                    sf = get(level["file"])
                    if sf is not None and b not in sf.calls.get(level["line"], []):
                        sf.calls.setdefault(level["line"], []).append(b)
    found = [sf for sf in files.values() if sf is not None]
    # the user's own files, then files with breaks, then the ones most of the graphs came from
    return sorted(found, key=lambda sf: (sf.library, not sf.breaks, -len(sf.graphs), sf.path))


def short_path(path: str) -> str:
    """A path to show: from the package down for installed code, relative to the working directory
    for the user's files, otherwise as is."""
    parts = path.split(os.sep)
    if "site-packages" in parts:
        return "/".join(parts[len(parts) - parts[::-1].index("site-packages"):])
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel
