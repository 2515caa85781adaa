"""Helper module for test_globals_across_modules: a lazy module (PEP 562 ``__getattr__``)
that makes a global the first time it is asked for and keeps it, as lazy-import
packages do."""
from __future__ import annotations

made = []


def reset():
    globals().pop("table", None)
    made.clear()


def __getattr__(name):
    if name != "table":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    made.append(name)
    value = globals()["table"] = 4.0
    return value
