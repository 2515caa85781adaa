"""Warnings that point at the user's code, not at Kiln's.

A warning raised deep in Kiln (a backend's fallback to eager, a frame run eagerly) is
about the user's call: ``warnings.warn`` with a fixed ``stacklevel`` points at whichever
Kiln frame happens to be that many levels up (``kiln/backends/policy.py:87``), since the
depth differs between a first call, a later call and a continuation.  ``warn`` counts
the frames instead: it skips every frame of Kiln's package and of the code Kiln
generates (``<kiln glue ...>``, guards), and attributes the warning to the first frame
past them, the user's (as ``skip_file_prefixes`` does on 3.12+, on every version).
"""
from __future__ import annotations

import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_GENERATED = "<kiln"


def is_kiln_file(filename: str) -> bool:
    return filename.startswith(_PACKAGE) or filename.startswith(_GENERATED)


def warn(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` attributed to the user's frame nearest to
    the call (a frame outside Kiln and its generated code)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and is_kiln_file(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1 if frame is not None else 2)
