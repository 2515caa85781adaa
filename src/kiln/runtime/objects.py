"""Objects the glue builds again: an exception a frame holds at a graph break.

A break inside an ``except`` block hands the handler's exception to the continuation;
the glue makes it again from its class, arguments and attributes (one object for every
place that holds it).  Which objects an entry rebuilds is decided at compile time
(``capture.values.exceptions``).
"""
from __future__ import annotations


def rebuild_exception(cls, args, attrs):
    """``cls(*args)`` with the attributes ``attrs`` set on it."""
    exc = cls(*args)
    for k, v in attrs.items():
        setattr(exc, k, v)
    return exc
