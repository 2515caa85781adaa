"""The table-driven suite as a whole: at least 250 distinct programs, every one with
exact graph and op counts, spread over the themes."""
from __future__ import annotations

from . import (test_programs_builtins, test_programs_containers, test_programs_control, test_programs_functions,
               test_programs_misc, test_programs_modules, test_programs_ops, test_programs_refused)
from .capture_harness import Case

THEMES = [test_programs_ops, test_programs_containers, test_programs_control, test_programs_functions,
          test_programs_modules, test_programs_builtins, test_programs_misc]


def test_at_least_250_programs_with_exact_counts():
    cases = [c for m in THEMES for c in m.CASES]
    assert len(cases) >= 250, len(cases)
    assert all(isinstance(c, Case) and isinstance(c.graphs, int) and isinstance(c.ops, int) for c in cases)
    names = [c.name for c in cases] + [r.name for r in test_programs_refused.REFUSALS]
    assert len(names) == len(set(names)), "program names must be unique across the suite"
    assert all(len(m.CASES) >= 20 for m in THEMES)
