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


from .constructs import all_constructs, ci_constructs, uncovered
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
