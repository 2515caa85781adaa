"""Helper module for test_globals_across_modules: the second module down.

``globals_other`` calls into it, so a frame compiled in the test module reaches these
globals two modules deep: through its functions (``global``) and as
``globals_other.globals_inner.level``."""
from __future__ import annotations

level = 0


def reset():
    global level
    level = 0


def bump(x):
    global level
    level += 10
    return x + level


def read(x):
    return x * level
