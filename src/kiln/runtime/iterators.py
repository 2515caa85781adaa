"""What guards and glue ask of real iterators, and the iterators the glue rebuilds.

An iterator carried into a frame (the iterator of a ``for`` loop handed to a
continuation at a graph break) is read by its guards on every call
(``remaining_items(it)[i]``: the items left, read without advancing it), advanced by
the glue by the items the trace took, and asked by a loop-exit picker whether it has
items left (``has_items``).  An iterator the frame made that escapes it is rebuilt by
the glue as the type eager would have made, over the items the trace computed
(``REBUILDERS``), or advanced as far over a rebuilt container (``advanced``).

Which of these an entry calls is decided at compile time (``capture.values.iterators``);
what runs per call is here.
"""
from __future__ import annotations

import collections
import itertools
import operator

# the built-in iterators over a sequence or a dict/set, whose remaining items their
# ``__reduce__`` reads without advancing them
SEQUENCE_ITERATORS = frozenset(type(i) for i in (
    iter(()), iter([]), iter(range(0)), iter(""), iter({}), iter({}.values()), iter({}.items()), iter(set())))


def remaining_items(it):
    """The items a built-in iterator has left, read without advancing it (through its
    ``__reduce__``, which pickling uses for the same purpose), or None for a kind whose
    items cannot be read that way (``map``, ``filter``: they would call a function)."""
    t = type(it)
    if t in SEQUENCE_ITERATORS:
        red = it.__reduce__()
        start = red[2] if len(red) > 2 else 0
        return tuple(red[1][0])[start:] if red[1] else ()
    if t is enumerate:
        inner, count = it.__reduce__()[1]
        rest = remaining_items(inner)
        return None if rest is None else tuple((count + i, v) for i, v in enumerate(rest))
    if t is zip:
        red = it.__reduce__()
        if len(red) > 2 and red[2]:
            return None   # zip(strict=True): running out early raises, which replay would not
        rests = [remaining_items(i) for i in red[1]]
        return None if any(r is None for r in rests) else tuple(zip(*rests))
    return None


def has_items(it) -> bool:
    """Whether ``remaining_items(it)`` would be non-empty, without building it: what a
    step function asks of the iterator of a loop around its break to pick the
    continuation (``runtime.steps.LoopExitPicker``), once per iteration.  True for kinds
    whose items cannot be read (the continuation breaks at their ``FOR_ITER`` anyway)."""
    t = type(it)
    if t in SEQUENCE_ITERATORS:
        return operator.length_hint(it) > 0
    if t is enumerate:
        return has_items(it.__reduce__()[1][0])
    if t is zip:
        red = it.__reduce__()
        if len(red) > 2 and red[2]:
            return True
        return all(has_items(i) for i in red[1])
    return True


def advanced(it, n: int):
    """``it`` after taking ``n`` items (a list or dict iterator the trace advanced)."""
    next(itertools.islice(it, n, n), None)
    return it


def _keep(x):
    return True


def _drop(x):
    return False


def _as_zip(items):
    return zip(*zip(*items)) if items else zip()


def _as_enumerate(items):
    return enumerate([v for _, v in items], items[0][0]) if items else enumerate(())


def _range_of(items):
    """The range whose items these are (they came from one)."""
    if len(items) < 2:
        return range(items[0], items[0] + 1) if items else range(0)
    step = items[1] - items[0]
    return range(items[0], items[-1] + step, step)


def _set_iterator(items):
    """A set's iterator over these items in this order; a set built again may order them
    differently, and then the order wins over the type."""
    s = set(items)
    return iter(s) if list(s) == list(items) else iter(items)


def _second(a, b):
    return b


def _identity(x):
    return x


# How an escaping iterator of each kind is rebuilt over the items the trace computed
# (the same type as eager's).
REBUILDERS = {
    map: lambda items: map(_identity, items), filter: lambda items: filter(_keep, items),
    itertools.filterfalse: lambda items: itertools.filterfalse(_drop, items),
    zip: _as_zip, enumerate: _as_enumerate,
    itertools.chain: lambda items: itertools.chain(items),
    itertools.compress: lambda items: itertools.compress(items, itertools.repeat(True)),
    itertools.islice: lambda items: itertools.islice(items, None),
    itertools.accumulate: lambda items: itertools.accumulate(items, _second),
    itertools.repeat: lambda items: itertools.repeat(items[0], len(items)) if items else itertools.repeat(None, 0),
    itertools.zip_longest: lambda items: itertools.zip_longest(*zip(*items)) if items else itertools.zip_longest(),
    itertools.starmap: lambda items: itertools.starmap(_identity, ((i,) for i in items)),
    itertools.pairwise: lambda items: itertools.pairwise([p[0] for p in items] + [items[-1][1]] if items else ()),
    type(iter([])): lambda items: iter(list(items)), type(iter(())): iter,
    type(reversed([])): lambda items: reversed(list(reversed(items))),
    reversed: lambda items: reversed(tuple(reversed(items))),
    type(iter("")): lambda items: iter("".join(items)), type(iter("\u00e9")): lambda items: iter("".join(items)),
    type(iter(b"")): lambda items: iter(bytes(items)),
    type(iter(range(0))): lambda items: iter(_range_of(items)),
    type(iter(collections.deque())): lambda items: iter(collections.deque(items)),
    type(iter(set())): lambda items: _set_iterator(items),
}
