"""Helper module for test_globals_across_modules: a module with its own globals that
its functions change (``global``) and read, and that callers change as attributes.

``reset()`` puts every global back (and removes names the tests add), so eager and
compiled runs start from the same module state."""
from __future__ import annotations

from . import globals_inner

_variable = 0
scale = 1.0
hits = []
inner_globals = vars(globals_inner)   # another module's globals, kept as a dict
ADDED = ("brand_new", "first_new", "second_new")


def reset():
    global _variable, scale, hits
    _variable = 0
    scale = 1.0
    hits = []
    for name in ADDED:
        globals().pop(name, None)
    globals_inner.reset()


def update_global(x):
    global _variable
    _variable += 1
    return x * 2


def read_variable(x):
    return x * _variable


def read_scale(x):
    return x * scale


def set_scale(value):
    global scale
    scale = value


def reader():
    """A closure made here: its LOAD_GLOBALs read this module's dict too."""
    def read(x):
        return x - _variable
    return read


def bump_inner(x):
    """Two modules deep: inner writes its own global; this reads it back both ways."""
    y = globals_inner.bump(x)
    return y * globals_inner.level + globals_inner.read(x)


def set_inner(value):
    globals_inner.level = value


def rebind_hits(x):
    global hits
    hits = hits + [1]
    return x + len(hits)
