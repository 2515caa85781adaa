"""Iterators on Values: ``IteratorValue`` (the unrolled loop's iterator), iterators that
read their container live (lists, dicts), the lazy adaptors (``zip``, ``map``,
``enumerate``, ``filter``), endless iterators, real iterators carried in from outside
the frame, and the ``itertools`` constructors.

Loops over them are unrolled like the rest of Kiln's loops.  Three rules keep that exact:

* **Pull, don't list.**  Items are taken one at a time (``IteratorValue.next``), so an
  endless source (``count()``, ``repeat(x)``), a generator or a shared iterator is
  consumed exactly as far as Python would consume it, and an adaptor's function runs
  once per item taken, in step with the loop body.
* **Read containers live.**  An iterator over a list or dict sees what the loop body
  changes, as CPython's does (a dict that changes size raises ``RuntimeError``).
* **Escaping keeps the type.**  An iterator that leaves the frame is rebuilt as the
  type eager would have made: an adaptor over its rebuilt sources, a list or dict
  iterator over the rebuilt container advanced as far, an ``itertools`` kind over the
  items the trace computed (``runtime.iterators.REBUILDERS``); a kind that cannot be rebuilt from its
  items (``combinations``, ``permutations``, ``product``, a set's iterator) does not
  escape: the frame runs as Python.  The kind of ``iter(v)`` and ``reversed(v)`` is asked
  of Python (``iterator_type``), not assumed.
"""
from __future__ import annotations

import gc
import itertools
import operator

from ...exc import Unsupported
from ...runtime import REBUILDERS, SEQUENCE_ITERATORS as _SEQUENCE_ITERATORS, advanced, remaining_items
from ..basics import CallSource, ItemSource
from .base import ConstantValue, Value, check_iterable, const, raise_python
from .containers import DictValue, DictViewValue, ListValue, TupleValue

_UNROLL_LIMIT = 100_000   # items an unrolled loop may take from an endless iterator


class IteratorValue(Value):
    """An iterator being consumed by an unrolled loop: a list of items and a cursor.

    ``kind`` is the iterator type eager would have made (``map``, ``zip``, ``filter``,
    ``enumerate``); one that escapes the frame is rebuilt as that type, over the items
    the trace computed."""

    def __init__(self, items: list, kind: type | None = None):
        self.items = list(items)
        self.index = 0
        self.kind = kind

    def python_type(self):
        return self.kind or type(iter([]))

    def next(self, tx):
        if self.index >= len(self.items):
            return None
        v = self.items[self.index]
        self.index += 1
        return v

    def took(self, item):
        """Record an item a subclass's ``next`` produced (they are kept for escaping)."""
        self.items.append(item)
        self.index = len(self.items)
        return item

    def unpack(self, tx):
        """The items left, taken through ``next`` (so every kind takes them its own way)."""
        rest = []
        while (item := self.next(tx)) is not None:
            rest.append(item)
        return rest

    def contents(self):
        return self.items[self.index:]

    def reconstruct(self, cg):
        rest = self.items[self.index:]
        inner = ", ".join(cg.expr(i) for i in rest)
        items = f"({inner}{',' if len(rest) == 1 else ''})"
        rebuild = getattr(self, "rebuilder", None) or REBUILDERS.get(self.python_type())
        if rebuild is None:
            raise Unsupported(f"a {self.python_type().__name__} iterator leaving the frame (Kiln cannot "
                              f"rebuild one of that type)")
        # one object however many places hold it (the loop's stack slot and a local `it`)
        return cg.new_object(self, f"{cg.ref(rebuild)}({items})")


class LazyIteratorValue(IteratorValue):
    """An iterator whose items are made on demand by ``produce(i) -> Value | None``
    (``count``, ``repeat`` without a count): nothing is computed that is not taken."""

    def __init__(self, produce, kind: type, rebuild=None):
        super().__init__([], kind)
        self.produce = produce
        self.rebuild = rebuild        # (cg, number of items taken) -> expression, or None

    def next(self, tx):
        item = self.produce(len(self.items))
        if item is None:
            return None
        return self.took(item)

    def unpack(self, tx):
        rest = []
        while (item := self.next(tx)) is not None:
            rest.append(item)
            if len(rest) > _UNROLL_LIMIT:
                raise Unsupported(f"iterating over an endless {self.kind.__name__} to its end")
        return rest

    def contents(self):
        return []

    def reconstruct(self, cg):
        if self.rebuild is None:
            raise Unsupported(f"an {self.kind.__name__} iterator escaping the compiled region")
        return cg.new_object(self, self.rebuild(cg, len(self.items)))


# -- iterators that came in from outside the frame ----------------------------------------------
def iterated_containers(it) -> list:
    """The mutable containers a built-in iterator walks (a list, a dict, a set), which
    it reads live: a change the trace makes to one must be seen by the next item."""
    t = type(it)
    if t in (enumerate, zip):
        return [c for inner in it.__reduce__()[1][:1 if t is enumerate else None] for c in iterated_containers(inner)]
    # a list iterator's __reduce__ hands back the list; dict and set iterators refer to theirs
    found = it.__reduce__()[1][0] if t is type(iter([])) and it.__reduce__()[1] else None
    if found is None and t in _SEQUENCE_ITERATORS:
        found = next((r for r in gc.get_referents(it) if isinstance(r, (dict, set))), None)
    return [found] if isinstance(found, (list, dict, set)) else []


CARRIED_ITERATOR_TYPES = _SEQUENCE_ITERATORS | {enumerate, zip}


class CarriedIteratorValue(IteratorValue):
    """A real iterator read from outside the frame: typically the iterator of a ``for``
    loop handed to a continuation at a graph break.  Items are read as the trace takes
    them (``remaining_items(it)[i]``), each guarded only as far as it was taken (``at
    least i+1 items left``; ``exactly i`` when the loop ran out), so every iteration of a
    loop whose body breaks reuses one entry.  The glue advances the real iterator by the
    items taken (a side effect, replayed after the values that read them), and the
    iterator itself is passed on as it is."""

    def __init__(self, obj, source, real_rest: tuple):
        super().__init__([], type(obj))
        self.source = source
        self.real_rest = real_rest
        self.walks = iterated_containers(obj)
        self.rest_source = CallSource(id(remaining_items), source, (), fn=remaining_items)
        self.obj_id = id(obj)

    def describe(self):
        return f"{self.kind.__name__} object at {self.source.describe()}"

    @property
    def consumed(self) -> int:
        return len(self.items)

    def next(self, tx):
        i = len(self.items)
        src, guards = self.rest_source, tx.state.guards
        # the entry now depends on how many items are left: a loop's continuation is
        # picked by that (see runtime.steps.LoopExitPicker)
        tx.state.probed_iterators.add(self.obj_id)
        for container in self.walks:
            known = tx.state.known_value(container)
            if known is not None and getattr(known, "dirty", False):
                # the items read when the trace began are stale: eager's iterator would see the change
                raise Unsupported(f"{self.describe()}: the loop changed the container it iterates")
        if i >= len(self.real_rest):
            guards.add("len", src, f"len({{v}}) == {i}", f"{self.describe()} has {i} item(s) left")
            return None
        guards.add("len", src, f"len({{v}}) > {i}", f"{self.describe()} has more than {i} item(s) left")
        tx.state.side_effects.mutated(self)
        item = tx.wrap(self.real_rest[i], ItemSource(src, i))
        return self.took(item)

    def contents(self):
        return []

    def reconstruct(self, cg):
        return cg.source_expr(self.source)


class ListIteratorValue(IteratorValue):
    """``iter(lst)`` for a list Value: like CPython's list iterator it reads the list at
    each step (items appended by the loop body are visited) and stays exhausted once it
    ran out; escaping, it is a real iterator over the rebuilt list, advanced as far."""

    def __init__(self, lst):
        super().__init__([], type(iter([])))
        self.lst = lst
        self.done = False

    def next(self, tx):
        if self.done or self.index >= len(self.lst.items):
            self.done = True
            return None
        item = self.lst.items[self.index]
        self.index += 1
        return item

    def contents(self):
        return [self.lst]

    def reconstruct(self, cg):
        if self.done:
            return cg.new_object(self, "iter([])")
        return cg.new_object(self, f"{cg.ref(advanced)}(iter({cg.expr(self.lst)}), {self.index})")


class DictIteratorValue(IteratorValue):
    """``iter(d)`` / ``iter(d.keys())`` / ``.values()`` / ``.items()``: like CPython's dict
    iterators it reads the dict at each step (a value rewritten by the loop body is seen)
    and raises ``RuntimeError`` if the dict changed size; escaping, it is a real iterator
    over the rebuilt view, advanced as far."""

    def __init__(self, view, size: int):
        super().__init__([], type(iter(getattr({}, view.kind)())))
        self.view = view
        self.size = size

    def next(self, tx):
        if len(self.view.d.items) != self.size:
            self.size = -1      # CPython's iterator stays broken after that
            raise_python(RuntimeError, "dictionary changed size during iteration")
        if self.index >= self.size:
            return None
        item = self.view.unpack(tx)[self.index]
        self.index += 1
        return item

    def contents(self):
        return [self.view]

    def reconstruct(self, cg):
        return cg.new_object(self, f"{cg.ref(advanced)}(iter({cg.expr(self.view)}), {self.index})")


class AdaptorValue(IteratorValue):
    """``zip`` / ``map`` / ``enumerate`` / ``filter`` as Python runs them: each item is
    made when it is taken, from items pulled from the sources at that moment (so a loop
    that stops early leaves the rest of a shared iterator or generator unconsumed, and
    ``map``'s function runs once per item taken, in step with the loop body).  One that
    escapes is the same adaptor over its sources, rebuilt as far as they were consumed."""

    def __init__(self, kind: type, sources: list, fn=None, start: int = 0, outer=None):
        super().__init__([], kind)
        self.sources, self.fn, self.start = sources, fn, start
        self.outer = outer   # chain.from_iterable: the iterator the sources are still taken from

    def next(self, tx):
        item = self._make(tx)
        return None if item is None else self.took(item)

    def _make(self, tx):
        if self.kind is itertools.chain:
            # each source is turned into an iterator when the chain reaches it, as Python does
            while self.sources or self.outer is not None:
                if not self.sources:
                    taken = self.outer.next(tx)
                    if taken is None:
                        return None
                    self.sources.append(taken)
                self.sources[0] = as_iterator(tx, self.sources[0])
                v = self.sources[0].next(tx)
                if v is not None:
                    return v
                self.sources.pop(0)
            return None
        if self.kind is itertools.starmap:
            row = self.sources[0].next(tx)
            return None if row is None else self.fn.call(tx, row.unpack(tx), {})
        if self.kind in (filter, itertools.filterfalse):
            wanted = self.kind is filter
            while (v := self.sources[0].next(tx)) is not None:
                keep = v if self.fn is None else self.fn.call(tx, [v], {})
                if keep.truth(tx) is wanted:
                    return v
            return None
        row = []
        for src in self.sources:
            v = src.next(tx)
            if v is None:
                return None
            row.append(v)
        if self.kind is map:
            return self.fn.call(tx, row, {})
        if self.kind is enumerate:
            return TupleValue([const(self.start + len(self.items)), row[0]])
        return TupleValue(row)

    def contents(self):
        return [*self.sources, *([self.fn] if self.fn is not None else []),
                *([self.outer] if self.outer is not None else [])]

    def reconstruct(self, cg):
        sources = [cg.expr(s) for s in self.sources]
        if self.outer is not None:
            chain = cg.ref(itertools.chain)
            return cg.new_object(self, f"{chain}.from_iterable({chain}(({''.join(s + ', ' for s in sources)}), "
                                       f"{cg.expr(self.outer)}))")
        if self.kind is enumerate:
            args = [sources[0], repr(self.start + len(self.items))]
        elif self.kind in (map, filter, itertools.filterfalse, itertools.starmap):
            args = [cg.expr(self.fn) if self.fn is not None else "None", *sources]
        else:
            args = sources
        return cg.new_object(self, f"{cg.ref(self.kind)}({', '.join(args)})")


def as_iterator(tx, v: Value) -> IteratorValue:
    """``iter(v)`` as a Value: an iterator is itself, a list is read live, anything else
    is unpacked."""
    if isinstance(v, IteratorValue):
        return v
    if type(v) is ListValue:
        return ListIteratorValue(v)
    if isinstance(v, DictValue):
        v = DictViewValue(v, "keys")
    if isinstance(v, DictViewValue):
        return DictIteratorValue(v, len(v.d.items))
    check_iterable(v)   # iter()'s own TypeError, raised in the program
    return IteratorValue(v.unpack(tx), iterator_type(iter, v))


def iterator_type(make, v: Value):
    """The type ``make(v)`` (``iter``, ``reversed``) gives for what ``v`` stands for,
    asked of Python: on the constant itself, else on an empty instance of its type (or
    of the first base that can make one: a namedtuple's iterator is a tuple's); None
    when Python cannot be asked."""
    if isinstance(v, ConstantValue):
        try:
            return type(make(v.value))
        except TypeError:
            return None
    if isinstance(v, DictViewValue):
        return type(make(getattr({}, v.kind)()))
    for klass in v.python_type().__mro__:
        if klass.__module__ in ("builtins", "collections"):
            try:
                return type(make(klass()))
            except TypeError:
                continue
    return None


def zip_rows(tx, values: list) -> list[list]:
    """The rows ``zip(*values)`` yields, pulled the way ``zip`` pulls them."""
    its = [as_iterator(tx, v) for v in values]
    rows = []
    while its:
        row = []
        for it in its:
            item = it.next(tx)
            if item is None:
                return rows
            row.append(item)
        rows.append(row)
        if len(rows) > _UNROLL_LIMIT:
            raise Unsupported("zip() over endless iterators")
    return rows


def _number(v: Value):
    if not isinstance(v, ConstantValue):
        raise Unsupported(f"itertools over {v.describe()} (not a constant number)")
    return v.value


def _count(tx, args, kwargs):
    start = _number(args[0] if args else kwargs.get("start", const(0)))
    step = _number(args[1] if len(args) > 1 else kwargs.get("step", const(1)))
    return LazyIteratorValue(lambda i: const(start + i * step), itertools.count,
                             lambda cg, n: f"{cg.ref(itertools.count)}({start + n * step!r}, {step!r})")


def _repeat(tx, args, kwargs):
    obj = args[0] if args else kwargs["object"]
    times = args[1] if len(args) > 1 else kwargs.get("times")
    if times is None:
        return LazyIteratorValue(lambda i: obj, itertools.repeat,
                                 lambda cg, n: f"{cg.ref(itertools.repeat)}({cg.expr(obj)})")
    return IteratorValue([obj] * max(0, _number(times)), itertools.repeat)


def _chain(tx, args, kwargs):
    return AdaptorValue(itertools.chain, list(args))


def _chain_from_iterable(tx, args, kwargs):
    return AdaptorValue(itertools.chain, [], outer=as_iterator(tx, args[0]))


def _combinatoric(fn):
    def handler(tx, args, kwargs):
        pool = as_iterator(tx, args[0]).unpack(tx)
        rest = [_number(a) for a in args[1:]] + [_number(kwargs[k]) for k in ("r",) if k in kwargs]
        try:
            combos = list(fn(pool, *rest))
        except (TypeError, ValueError) as e:     # a missing or negative r: eager raises the same
            raise_python(type(e), *e.args)
        return IteratorValue([TupleValue(list(t)) for t in combos], fn)
    return handler


def _product(tx, args, kwargs):
    repeat = _number(kwargs.get("repeat", const(1)))
    pools = [as_iterator(tx, a).unpack(tx) for a in args] * repeat
    return IteratorValue([TupleValue(list(t)) for t in itertools.product(*pools)], itertools.product)


def _compress(tx, args, kwargs):
    data = args[0] if args else kwargs["data"]
    selectors = args[1] if len(args) > 1 else kwargs["selectors"]
    return IteratorValue([d for d, s in zip_rows(tx, [data, selectors]) if s.truth(tx)], itertools.compress)


def _islice(tx, args, kwargs):
    """``islice(it, [start,] stop[, step])``: takes exactly the items the slice would pull."""
    if kwargs or not 2 <= len(args) <= 4:
        raise Unsupported("itertools.islice() with these arguments")
    bounds = slice(*[_number(a) if not (isinstance(a, ConstantValue) and a.value is None) else None
                     for a in args[1:]])
    src = as_iterator(tx, args[0])
    taken = []
    while bounds.stop is None or len(taken) < bounds.stop:
        item = src.next(tx)
        if item is None:
            break
        taken.append(item)
        if len(taken) > _UNROLL_LIMIT:
            raise Unsupported("itertools.islice() without a stop over an endless iterator")
    return IteratorValue(taken[slice(bounds.start, None, bounds.step)], itertools.islice)


def _zip_longest(tx, args, kwargs):
    fill = kwargs.get("fillvalue", const(None))
    its = [as_iterator(tx, a) for a in args]
    rows = []
    while True:
        row = [it.next(tx) for it in its]
        if all(i is None for i in row):
            break
        rows.append(TupleValue([fill if i is None else i for i in row]))
    return IteratorValue(rows, itertools.zip_longest)


def _accumulate(tx, args, kwargs):
    items = as_iterator(tx, args[0]).unpack(tx)
    func = args[1] if len(args) > 1 else kwargs.get("func")
    if isinstance(func, ConstantValue) and func.value is None:
        func = None
    initial = kwargs.get("initial")
    if isinstance(initial, ConstantValue) and initial.value is None:
        initial = None
    out = [] if initial is None else [initial]
    for item in items:
        if not out:
            out.append(item)
        elif func is None:
            out.append(tx.apply_operator(operator.add, out[-1], item))
        else:
            out.append(func.call(tx, [out[-1], item], {}))
    return IteratorValue(out, itertools.accumulate)


def _pairwise(tx, args, kwargs):
    items = as_iterator(tx, args[0]).unpack(tx)
    return IteratorValue([TupleValue([a, b]) for a, b in zip(items, items[1:])], itertools.pairwise)


def _filterfalse(tx, args, kwargs):
    fn, src = args
    return AdaptorValue(itertools.filterfalse, [as_iterator(tx, src)],
                        None if isinstance(fn, ConstantValue) and fn.value is None else fn)


def _starmap(tx, args, kwargs):
    fn, src = args
    return AdaptorValue(itertools.starmap, [as_iterator(tx, src)], fn)


ITERTOOLS = {
    itertools.count: _count, itertools.repeat: _repeat, itertools.chain: _chain,
    itertools.chain.from_iterable: _chain_from_iterable,
    itertools.combinations: _combinatoric(itertools.combinations),
    itertools.combinations_with_replacement: _combinatoric(itertools.combinations_with_replacement),
    itertools.permutations: _combinatoric(itertools.permutations), itertools.product: _product,
    itertools.compress: _compress, itertools.islice: _islice, itertools.zip_longest: _zip_longest,
    itertools.accumulate: _accumulate, itertools.pairwise: _pairwise, itertools.starmap: _starmap,
    itertools.filterfalse: _filterfalse,
}
