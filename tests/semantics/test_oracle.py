"""The semantics oracle in the test suite (see ``oracle.py``): every construct Kiln
models, over every value kind, compiled against CPython; 0 differences allowed.

One test per construct, so a difference names its construct; a summary of the whole
matrix (its size, the breaks left) is printed at the end of the module and written to
``$KILN_ORACLE_SUMMARY`` when that is set.  By default the CI selection runs
(``constructs.ci_constructs``); ``KILN_ORACLE_FULL=1`` runs every construct.
"""
from __future__ import annotations

import os
import warnings

import pytest

import subprocess
import sys
from pathlib import Path

from .constructs import CRASHING_BYTECODE, all_constructs, ci_constructs, uncovered
from .kinds import KINDS
from .oracle import Report, run_construct, summary

FULL = os.environ.get("KILN_ORACLE_FULL") == "1"
CONSTRUCTS = all_constructs() if FULL else ci_constructs()
_TOTAL = Report()


@pytest.fixture(scope="module", autouse=True)
def _matrix_summary():
    yield
    if _TOTAL.cells:
        text = summary(_TOTAL, top=200)
        print("\n" + text)
        path = os.environ.get("KILN_ORACLE_SUMMARY")
        if path:
            with open(path, "w") as f:
                f.write(text + "\n")


def test_every_table_entry_is_covered():
    assert uncovered() == [], "modelled by Kiln but never checked against CPython"


def test_matrix_is_large_enough():
    assert len(CONSTRUCTS) >= 60 and len(KINDS) >= 35


@pytest.mark.parametrize("construct", CONSTRUCTS, ids=[c.name for c in CONSTRUCTS])
def test_construct_matches_cpython(construct):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # breaks warn; they are recorded in the summary
        report = run_construct(construct, ci=not FULL)
    _TOTAL.merge(report)
    assert report.differences == []


_CRASH_CHECK = """
import warnings
warnings.simplefilter("ignore")
from tests.semantics.constructs import _expression
from tests.semantics.kinds import KINDS
from tests.semantics.oracle import Report, make_case, run_cell
report = Report()
for expr in {exprs!r}:
    c = _expression(expr, expr)
    case = make_case(c)
    for kind in KINDS:
        run_cell(c, case, kind, False, report)
        if kind.inside:
            run_cell(c, case, kind, True, report)
assert report.differences == [], report.differences
"""


@pytest.mark.xfail(strict=True, reason="a break on LIST_EXTEND / SET_UPDATE / DICT_UPDATE over a value Kiln "
                                       "cannot iterate crashes the interpreter (constructs.CRASHING_BYTECODE)")
def test_crashing_bytecode():
    """Run apart, in a child process: it takes the interpreter down.  When this passes
    (xfail strict fails), move ``CRASHING_BYTECODE`` back into ``BYTECODE``."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "src"), str(root)]))
    done = subprocess.run([sys.executable, "-c", _CRASH_CHECK.format(exprs=CRASHING_BYTECODE)], env=env,
                          cwd=root, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
