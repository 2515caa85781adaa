"""Placeholder API while the capture core is written: runs eagerly."""
from __future__ import annotations
import functools


def compile(fn=None, *, backend="eager", fullgraph=False):
    if fn is None:
        return lambda f: compile(f, backend=backend, fullgraph=fullgraph)
    return fn


def reset():
    pass


def disable(fn):
    return fn


def graph_break():
    pass
