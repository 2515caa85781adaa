"""Objects the glue builds again: an exception a frame holds at a graph break, a set
with the hash table eager's has.

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


def replay_set(recipe, inputs=()):
    """A set (or frozenset) with the very hash table eager's has: made again by the
    operations that made it (``capture.values.sets``), since a set's table (and so its
    iteration order and where later inserts go) follows its history, not only its
    items.  ``recipe`` is ``(base, steps)``: the base makes the set, each step
    ``(method, args)`` changes it in place.  Args are ``("set", recipe)``,
    ``("const", object)`` or ``("input", i)``: ``inputs[i]``, a set passed to the frame."""
    base, steps = recipe
    kind = base[0]

    def arg(a):
        what, obj = a
        return replay_set(obj, inputs) if what == "set" else inputs[obj] if what == "input" else obj

    if kind == "new":               # inserting these keys in this order (a literal, set(list))
        s = (frozenset if base[1] else set)(base[2])
    elif kind == "make":            # set(x) / frozenset(x) of a set
        s = (frozenset if base[1] else set)(arg(base[2]))
    elif kind == "op":              # a | b, a & b, a - b, a ^ b
        s = base[1](arg(base[2]), arg(base[3]))
    else:                           # ("method", name, target, args): s.union(...), s.copy()...
        target = arg(base[2])
        s = getattr(target, base[1])(*[arg(a) for a in base[3]])
    for name, args in steps:
        getattr(s, name)(*[arg(a) for a in args])
    return s


def container_subclass(cls, items, attrs):
    """An instance of a user subclass of tuple/list/dict/set made in a frame, rebuilt with
    its base's own constructor (the subclass's ``__new__``/``__init__`` already ran while
    tracing, and may take other arguments) and then its instance attributes."""
    if issubclass(cls, tuple):
        obj = tuple.__new__(cls, items)
    else:
        base = next(b for b in (list, dict, set) if issubclass(cls, b))
        obj = base.__new__(cls)
        (list.extend if base is list else base.update)(obj, items)
    if attrs:
        obj.__dict__.update(attrs)
    return obj
