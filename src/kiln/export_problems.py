"""Why a program cannot be exported, all at once, each with the user's line and a hint.

A whole-program capture stops at its first problem (``fullgraph``).  Fixing one only to
meet the next is slow, so when ``kiln.export`` fails the program is surveyed once more
the way ``kiln.compile`` would run it: with graph breaks, so the capture resumes after
each problem and every one is recorded (``metrics.breaks``: reason, ``file:line``,
source line).  The survey runs the program — on a deep copy of the module and copies
of the inputs, with its prints captured, and the parameters and buffers of modules a
function names through its globals or cells put back after — because the code after a
break is captured when it is first reached.  Problems that only the export refuses (Python side effects,
which ``kiln.compile`` replays) are the first error's, which leads the list.

Each problem gets a hint from a short table of the families export meets (a branch on
a tensor's value: ``torch.cond``; a print; a Python attribute as state: a buffer).
"""
from __future__ import annotations

import contextlib
import copy
import io

import torch
from torch.utils._pytree import tree_map

from .api import compile as kiln_compile
from .exc import Unsupported
from .metrics import BreakRecord, metrics

#: (substring of the reason, hint); the first match wins
_HINTS: tuple = (
    ("branching on the value of a tensor",
     "a branch on a tensor's value cannot be one graph: write it as torch.cond(pred, true_fn, false_fn, "
     "operands), which keeps both branches in the exported program"),
    ("depends on tensor data",
     "a Python value computed from tensor data cannot be one graph: keep it a tensor (torch.where, "
     "torch.cond) instead of reading it into Python"),
    ("data in Python",
     "reading tensor data into Python (tolist, numpy) cannot be one graph: keep the computation in torch ops"),
    ("print",
     "printing is Python at run time: remove it, or guard it with `if not torch.compiler.is_compiling():`"),
    ("changes Python state",
     "an exported program keeps tensor state only: make the value a buffer (register_buffer) changed in place"),
    ("numpy", "NumPy runs as Python: use the torch op instead"),
    ("does not model", "Kiln cannot look inside this C function: call a torch op instead, or "
                       "torch.compiler.disable it outside the exported part"),
    ("global state", "seeding and other process state cannot be in an exported program: set it before calling"),
)


def hint_for(reason: str) -> str | None:
    for pattern, hint in _HINTS:
        if pattern in reason:
            return hint
    return None


class ExportUnsupported(Unsupported):
    """``kiln.export`` could not make the program one graph.  ``problems``: every
    ``(reason, location, source line, hint)`` found, the first error first; the message
    lists them all.  ``location`` / ``source_line`` are the first problem's."""

    def __init__(self, problems: list):
        self.problems = problems
        lines = [f"kiln.export: the program cannot be one graph ({len(problems)} problem"
                 f"{'s' if len(problems) != 1 else ''}):"]
        for i, (reason, location, source_line, hint) in enumerate(problems, 1):
            lines.append(f"  {i}. {reason}")
            if location:
                lines.append(f"     at {location}")
            if source_line:
                lines.append(f"       {source_line.strip()}")
            if hint:
                lines.append(f"     hint: {hint}")
        super().__init__("\n".join(lines))
        first = problems[0]
        self.location, self.source_line = first[1], first[2]


def explain_failure(f, args, kwargs, first: Unsupported) -> ExportUnsupported:
    """Every problem of ``f(*args, **kwargs)``, ``first`` (the whole capture's error) first."""
    problems = [(first.reason, first.location, first.source_line, hint_for(first.reason))]
    seen = {(first.location, first.reason)}
    for record in _survey(f, args, kwargs):
        key = (record.location, record.reason)
        if key in seen or record.location is None:
            continue
        seen.add(key)
        problems.append((record.reason, record.location, record.source_line, hint_for(record.reason)))
    return ExportUnsupported(problems)


def _survey(f, args, kwargs) -> list[BreakRecord]:
    """The graph breaks of one run of ``f`` compiled with breaks allowed (on copies)."""
    target = copy.deepcopy(f) if isinstance(f, torch.nn.Module) else f
    copied = tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, (args, kwargs))

    def counting(gm, example_inputs):     # a backend of its own: caches apart from the user's
        return gm.forward

    before = len(metrics.breaks)
    saved = _module_state(_modules_reached(target))
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            kiln_compile(target, backend=counting)(*copied[0], **copied[1])
    except Exception:     # the program itself raises (eager would too): what was found still counts
        pass
    finally:
        with torch.no_grad():
            for tensor, value in saved:
                tensor.copy_(value)
    return list(metrics.breaks[before:])


def _modules_reached(fn) -> list:
    """The modules a function names directly (its globals and closure cells): a function
    is surveyed as it is, and these are the state it may change."""
    if not hasattr(fn, "__code__"):
        return []
    found = [fn.__globals__.get(name) for name in fn.__code__.co_names]
    found += [cell.cell_contents for cell in (fn.__closure__ or ()) if _filled(cell)]
    return [m for m in found if isinstance(m, torch.nn.Module)]


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _module_state(modules: list) -> list:
    """(tensor, copy of its value) for every parameter and buffer of ``modules``."""
    return [(t, t.detach().clone()) for m in modules for t in [*m.parameters(), *m.buffers()]]
