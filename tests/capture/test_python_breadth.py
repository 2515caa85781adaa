"""Python-language breadth (issue #14): itertools, deques, dict views, operator
getters, cached functions, namedtuple methods, max/min over sizes, function
attributes, dataclass field writes.  Each program is captured whole under
``fullgraph=True`` and compared with eager on two input sets."""
from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import operator
import sys

import pytest
import torch

import kiln
from kiln.testing import CompileCounter

from .capture_harness import Case, parametrize, run_case


def x1(r):
    return (r.randn(3, 4),)


def xy(r):
    return r.randn(3, 4), r.randn(3, 4)


# -- itertools --------------------------------------------------------------------------
def it_count(x):
    return [x * c for _, c in zip(range(3), itertools.count(2, 3))]


def it_count_loop_break(x):
    for i in itertools.count(1):
        x = x + i
        if i >= 3:
            break
    return x


def it_chain(x, y):
    return sum(itertools.chain([x, y], (x * 2,), range(2))), list(itertools.chain.from_iterable([[x], (y, x + y)]))


def it_combinatorics(x, y):
    pairs = [a * b for a, b in itertools.combinations([x, y, x + y], 2)]
    perms = [a - b for a, b in itertools.permutations((x, y), 2)]
    return pairs, perms


def it_product_generator(x, y):
    g = (x * i for i in range(2))
    return [a + b for a, b in itertools.product(g, [y, 1])], list(itertools.product([1, 2], repeat=2))


def it_compress_islice(x, y):
    picked = list(itertools.compress([x, y, x + y], [1, 0, True]))
    return picked, list(itertools.islice(itertools.count(), 1, 7, 2)), list(itertools.islice([x, y, x], 2))


def it_zip_longest_accumulate(x, y):
    return list(itertools.zip_longest([x, y], [1], fillvalue=0)), list(itertools.accumulate([x, y, x])), \
        list(itertools.accumulate([1, 2, 3], initial=10))


def it_repeat(x):
    return list(itertools.repeat(x + 1, 3)), [x * k for k, _ in zip(itertools.repeat(2), range(2))]


def it_zip_consumes_like_python(x):
    it = iter([x, x + 1, x + 2])
    pairs = list(zip(it, [0]))          # zip pulls x, then x + 1 from `it` and stops at the list's end
    return pairs, list(it)


def it_chain_escapes(x):
    return itertools.chain([x], [x + 1])


ITERTOOLS = [
    Case("it_count", it_count, x1, 1, 3),
    Case("it_count_loop_break", it_count_loop_break, x1, 1, 3),
    Case("it_chain", it_chain, xy, 1, 7),
    Case("it_combinatorics", it_combinatorics, xy, 1, 6),
    Case("it_product_generator", it_product_generator, xy, 1, 6),
    Case("it_compress_islice", it_compress_islice, xy, 1, 1),
    Case("it_zip_longest_accumulate", it_zip_longest_accumulate, xy, 1, 2),
    Case("it_repeat", it_repeat, x1, 1, 3),
    Case("it_zip_consumes_like_python", it_zip_consumes_like_python, x1, 1, 2),
]


# -- max / min ------------------------------------------------------------------------------
def mm_numbers_and_sizes(x):
    n = x.shape[0]
    return max(n, 2, x.shape[1]), min([n, 5], key=lambda v: -v), max([], default=3), min(x.size(), default=0), \
        x * max(1.5, n), max((3, "a"), (3, "b")), min(x.shape, key=lambda d: (d % 2, d))


MAXMIN = [
    Case("mm_numbers_and_sizes", mm_numbers_and_sizes, x1, 1, 1),
]


# -- dicts: fromkeys, views -------------------------------------------------------------------
def d_fromkeys(x):
    return dict.fromkeys(["a", "b"], x), collections.OrderedDict.fromkeys("ab"), \
        collections.defaultdict.fromkeys([1, 2], 0)


def d_views(d):
    k, vals, its = d.keys(), d.values(), d.items()
    s = 0
    for key in k:
        s = s + d[key]
    for v in vals:
        s = s + v
    for _, v in its:
        s = s * v
    d["c"] = 1                                   # the views are live: they see the new key
    return s, "a" in k, "c" in k, len(vals), len(its), k & {"a", "z"}, k | {"q"}, k - {"a"}, {"a"} ^ k, \
        ("c", 1) in its, list(k), list(its)[-1], k.isdisjoint(["z"])


def d_view_escapes(x):
    d = {"a": x + 1}
    return d.keys(), type(d.values()), list(d.values()), d


DICTS = [
    Case("d_fromkeys", d_fromkeys, x1, 0, 0),
    Case("d_views", d_views, lambda r: ({"a": r.randn(3), "b": r.randn(3)},), 1, 6),
    Case("d_view_escapes", d_view_escapes, x1, 1, 1),
]


# -- operator / sys ----------------------------------------------------------------------------
def op_getters(x, y):
    g, a, m = operator.itemgetter(1, 0), operator.attrgetter("shape", "T.shape"), operator.methodcaller("sum", 0)
    return g([x, y]), a(x), m(y), operator.itemgetter("k")({"k": x}), type(g), \
        operator.length_hint([1, 2, 3]), operator.length_hint(iter((x, y))), sys.intern("ab")


def op_getter_as_key(x, y):
    pairs = [(3, x), (1, y), (2, x + y)]
    return sorted(pairs, key=operator.itemgetter(0)), max(pairs, key=operator.itemgetter(0))[0]


OPERATOR = [
    Case("op_getters", op_getters, xy, 1, 2),
    Case("op_getter_as_key", op_getter_as_key, xy, 1, 1),
]


# -- function and class attributes ---------------------------------------------------------------
def _helper(a, b=3):
    return a


def fn_attributes(x):
    try:
        _helper.nope
        r = 0
    except AttributeError:
        r = 1
    inner = lambda a, k=2: a  # noqa: E731
    return _helper.__name__, _helper.__qualname__, _helper.__module__, _helper.__class__, _helper.__defaults__, \
        type(x).__name__, x.__class__.__name__, x + r, inner.__defaults__, inner.__module__, \
        hasattr(inner, "zz"), getattr(_helper, "zz", None)


ATTRS = [
    Case("fn_attributes", fn_attributes, x1, 1, 1),
]


# -- namedtuples with methods, dataclass / ModelOutput field writes ---------------------------------
Pair = collections.namedtuple("Pair", "a b")


class Scaled(Pair):
    @property
    def total(self):
        return self.a + self.b

    def scaled(self, k):
        return Scaled(self.a * k, self.b)


def nt_methods(x, y):
    q = Scaled(x, y)
    r = q._replace(b=x)
    return q.total, q.scaled(2), r, type(r), r._asdict(), Scaled._fields, q._fields, Pair(x, 1)._asdict()


def nt_input_methods(q):
    return q.total, q.scaled(3), q._replace(a=1)


@dataclasses.dataclass
class Fields:
    a: torch.Tensor
    b: object = None


def dc_field_writes(x):
    o = Fields(x + 1)
    o.b = x * 2
    o.a = o.b - 1
    return o, o.b + 1


def dc_frozen_write_raises(x):
    o = Frozen(x)
    try:
        o.a = x + 1
    except dataclasses.FrozenInstanceError:
        return x - 1
    return o.a


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: torch.Tensor


OBJECTS = [
    Case("nt_methods", nt_methods, xy, 1, 2),
    Case("nt_input_methods", nt_input_methods, lambda r: (Scaled(r.randn(2), r.randn(2)),), 1, 2),
    Case("dc_field_writes", dc_field_writes, x1, 1, 4),
    Case("dc_frozen_write_raises", dc_frozen_write_raises, x1, 1, 2),
]


def test_model_output_field_and_item_writes():
    modeling_outputs = pytest.importorskip("transformers.modeling_outputs")

    def f(x):
        o = modeling_outputs.BaseModelOutputWithPooling(last_hidden_state=x + 1)
        o.pooler_output = x * 2
        o["hidden_states"] = (x,)
        return o, o.pooler_output + 1, o.to_tuple()[1]

    kiln.reset()
    counter = CompileCounter()
    x = torch.randn(3, 4)
    got, want = kiln.compile(f, backend=counter, fullgraph=True)(x), f(x)
    assert counter.frame_count == 1
    assert list(got[0].keys()) == list(want[0].keys()) == ["last_hidden_state", "pooler_output", "hidden_states"]
    assert got[0].hidden_states[0] is x
    for a, b in ((got[0].pooler_output, want[0].pooler_output), (got[1], want[1]), (got[2], want[2])):
        torch.testing.assert_close(a, b)


# -- collections.deque --------------------------------------------------------------------------
def dq_methods(x):
    d = collections.deque([x], maxlen=3)
    d.append(x + 1)
    d.appendleft(x - 1)
    d.append(x * 2)                 # full: drops x - 1 from the left
    a, b = d.pop(), d.popleft()
    d.extend([x, x + 3])
    e = collections.deque(range(5))
    e.rotate(2)
    e.extendleft([9, 8])
    return a, b, len(d), d[0], d[-1], list(d), d.maxlen, type(d), list(e), e.maxlen, 3 in e, e.index(4)


def dq_escapes(x):
    d = collections.deque([1, 2], maxlen=4)
    d.appendleft(0)
    return d, x + len(d)


def dq_empty_pop_raises(x):
    d = collections.deque()
    try:
        d.popleft()
    except IndexError:
        return x + 1
    return x


DEQUES = [
    Case("dq_methods", dq_methods, x1, 1, 4),
    Case("dq_escapes", dq_escapes, x1, 1, 1),
    Case("dq_empty_pop_raises", dq_empty_pop_raises, x1, 1, 1),
]


# -- functools.lru_cache / functools.cache ---------------------------------------------------------
@functools.lru_cache
def _doubled(n):
    return n * 2


@functools.cache
def _sine(t):
    return t.sin()


@functools.lru_cache(maxsize=None)
def _lower_mask(n):
    return torch.ones(n, n).tril()


def lru_calls(x):
    a, b = _sine(x), _sine(x)            # one traced call: a repeat is a hit, the same tensor
    return x * _doubled(3), a + b, _lower_mask(3) @ x, a is b


CACHED = [
    Case("lru_calls", lru_calls, lambda r: (r.randn(3, 4),), 1, 4),
]


def test_cached_constant_call_returns_the_cached_object():
    kiln.reset()
    x = torch.randn(3, 3)

    def f(x):
        return _lower_mask(3), x + 1

    mask, _ = kiln.compile(f, backend=CompileCounter(), fullgraph=True)(x)
    assert mask is _lower_mask(3)


_CALLS: list = []


@functools.lru_cache
def _logged(n):
    _CALLS.append(n)                      # a side effect: eager runs it on a miss only
    return n + 1


def test_cached_function_with_side_effects_runs_as_python():
    kiln.reset()
    _logged.cache_clear()
    _CALLS.clear()

    def f(x):
        return x * _logged(2) + _logged(2)

    compiled = kiln.compile(f, backend=CompileCounter())
    x = torch.randn(3)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), f(x))
    assert _CALLS == [2] and kiln.metrics.eager_fallbacks == 0


def test_compile_of_an_lru_cache_wrapped_function():
    @functools.lru_cache(maxsize=None)
    def plus(x, k):
        return x + k

    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(plus, backend=counter, fullgraph=True)
    x = torch.randn(3)
    a, b = compiled(x, 1), compiled(x, 1)
    assert a is b                          # a hit returns the cached tensor, as eager does
    torch.testing.assert_close(a, x + 1)
    torch.testing.assert_close(compiled(x, 2), x + 2)
    assert compiled.cache_info().hits == 1 and counter.frame_count >= 1


# -- set(), set.__init__, subclasses of list / dict / set, plain classes --------------------------
class Bag(dict):
    kind = "bag"

    def total(self):
        return sum(self.values())

    @property
    def size(self):
        return len(self)


class Tags(set):
    pass


class Stack(list):
    def total(self):
        return sum(self)


class Point:
    def __init__(self, a, b=2):
        self.a, self.b = a, b

    def scaled(self):
        return self.a * self.b


def sub_containers(x):
    s = set()
    s.__init__([1, 2])
    d = Bag(a=x, b=x + 1)
    d["c"] = x
    st = Stack([x, x])
    st.append(x * 2)
    return s, set([1, 2, 2]), set(range(3)), d, d.total(), d.size, d.kind, Tags([1]), st.total(), st, \
        Point(x).scaled(), isinstance(d, Bag), type(st)


SUBCLASSES = [
    Case("sub_containers", sub_containers, x1, 1, 9),
]


# -- iterators over lists and dicts read them live ------------------------------------------------
def live_list_growth(x):
    queue = [x, x + 1]
    for v in queue:
        if len(queue) < 4:
            queue.append(v * 2)          # visited by the same loop, as in eager
    it = iter(queue)
    next(it)
    return queue, list(it)


def live_dict_values(x):
    d = {"a": x, "b": x + 1}
    seen = []
    for k, v in d.items():
        seen.append(v)
        d["b"] = v * 3                   # rewritten before the loop reaches it
    try:
        for k in d:
            d[k + "!"] = x
    except RuntimeError:
        seen.append(x - 1)               # dictionary changed size during iteration
    return seen


LIVE = [
    Case("live_list_growth", live_list_growth, x1, 1, 3),
    Case("live_dict_values", live_dict_values, x1, 1, 4),
]


def lazy_zip_stops_early(x):
    it = iter([x, x + 1, x + 2])
    for a, b in zip(it, range(5)):
        if b == 0:
            break                          # zip pulled one item from `it`, no more
    return a, list(it)


def lazy_map_interleaves(x):
    out = []
    for y in map(lambda v: out.append("f") or v * 2, [x, x + 1, x + 2]):
        out.append("body")
        if len(out) > 3:
            break                          # map's function ran twice, not three times
    return y, out


def lazy_enumerate_generator(x):
    g = (x * i for i in range(5))
    for i, v in enumerate(g, 1):
        if i == 2:
            break
    return v, list(g), list(filter(None, [0, 1, 2])), list(filter(lambda t: t > 1, range(4)))


LAZY = [
    Case("lazy_zip_stops_early", lazy_zip_stops_early, x1, 1, 2),
    Case("lazy_map_interleaves", lazy_map_interleaves, x1, 1, 4),
    Case("lazy_enumerate_generator", lazy_enumerate_generator, x1, 1, 5),
]


def _zip_escapes(x, y):
    z = zip(iter([x, y, x + y]), [1, 2, 3])
    next(z)
    return z, enumerate([x, y], 5), map(len, [[1], [1, 2]])


def test_adaptors_escape_as_adaptors_over_their_sources():
    kiln.reset()
    x, y = torch.randn(2), torch.randn(2)
    z, e, m = kiln.compile(_zip_escapes, backend=CompileCounter(), fullgraph=True)(x, y)
    assert (type(z), type(e), type(m)) == (zip, enumerate, map)
    rest = list(z)
    assert [k for _, k in rest] == [2, 3]
    torch.testing.assert_close(rest[1][0], x + y)
    assert [i for i, _ in e] == [5, 6] and list(m) == [1, 2]


@parametrize(ITERTOOLS + MAXMIN + DICTS + OPERATOR + ATTRS + OBJECTS + DEQUES + CACHED + SUBCLASSES + LIVE + LAZY)
def test_capture(case):
    run_case(case)


def test_itertools_chain_escapes_as_a_chain():
    kiln.reset()
    counter = CompileCounter()
    x = torch.randn(2)
    out = kiln.compile(it_chain_escapes, backend=counter, fullgraph=True)(x)
    assert type(out) is itertools.chain
    assert [t.tolist() for t in out] == [x.tolist(), (x + 1).tolist()]


def _max_of_sizes(x):
    n = x.shape[0]
    return max(n, 2, x.shape[1]), min(n, 7), int(n), min(x.shape, key=lambda d: -d), max([], default=n), x + 1


def test_max_min_of_symbolic_sizes_follow_the_input():
    kiln.reset()
    counter = CompileCounter()
    fn = kiln.compile(_max_of_sizes, backend=counter, fullgraph=True, dynamic=True)
    for rows in (3, 5, 9):
        x = torch.randn(rows, 4)
        got, want = fn(x), _max_of_sizes(x)
        assert got[:5] == want[:5] and type(got[0]) is int
        torch.testing.assert_close(got[5], want[5])


def _getter_escapes(x):
    return operator.itemgetter(1, 0), operator.attrgetter("shape"), operator.methodcaller("sum", 0), x + 1


def test_operator_getters_escape_as_the_same_getters():
    kiln.reset()
    x = torch.randn(3, 4)
    g, a, m, _ = kiln.compile(_getter_escapes, backend=CompileCounter(), fullgraph=True)(x)
    assert (type(g), type(a), type(m)) == (operator.itemgetter, operator.attrgetter, operator.methodcaller)
    assert g([1, 2]) == (2, 1) and a(x) == x.shape
    torch.testing.assert_close(m(x), x.sum(0))


class _Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a):
        self.a = a
        self.b = a * 2


def _slotted(x):
    s = _Slotted(x)
    try:
        s.c = 1                            # no __dict__: AttributeError, as in eager
    except AttributeError:
        s.b = s.b + 1
    return s, s.a + s.b


def test_slotted_class_made_in_the_frame():
    kiln.reset()
    counter = CompileCounter()
    x = torch.randn(3)
    got, want = kiln.compile(_slotted, backend=counter, fullgraph=True)(x), _slotted(x)
    assert type(got[0]) is _Slotted and counter.frame_count == 1
    for a, b in ((got[0].a, want[0].a), (got[0].b, want[0].b), (got[1], want[1])):
        torch.testing.assert_close(a, b)


def dq_input(d, x):
    d.append(x * 2)                      # full: the oldest item leaves, in the caller's deque too
    return d[0] + d[-1], len(d), d.maxlen


def test_deque_from_outside_is_updated_in_place():
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(dq_input, backend=counter, fullgraph=True)
    for _ in range(2):
        items, x = [torch.randn(2), torch.randn(2)], torch.randn(2)
        eager_d, compiled_d = collections.deque(items, maxlen=2), collections.deque(items, maxlen=2)
        want, got = dq_input(eager_d, x), compiled(compiled_d, x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:] and compiled_d.maxlen == 2 and len(compiled_d) == 2
        for a, b in zip(compiled_d, eager_d):
            torch.testing.assert_close(a, b)
    assert counter.frame_count == 1


class _Tagged:
    def __new__(cls, *args):
        obj = super().__new__(cls)
        obj.tag = "made"
        return obj

    def __init__(self, a):
        self.a = a


class _Once:
    instance = None

    def __new__(cls):
        if cls.instance is None:
            cls.instance = super().__new__(cls)
        return cls.instance


def _own_new(x):
    t = _Tagged(x)
    return t.tag, t.a + 1, _Once() is _Once(), type(t)


def test_class_with_a_python_new_made_in_the_frame():
    kiln.reset()
    _Once.instance = None
    counter = CompileCounter()
    compiled = kiln.compile(_own_new, backend=counter, fullgraph=True)
    x = torch.randn(3)
    got = compiled(x)
    made = _Once.instance
    _Once.instance = None
    want = _own_new(x)
    assert got[0] == want[0] and got[2:] == want[2:] and isinstance(made, _Once)
    torch.testing.assert_close(got[1], want[1])
    assert compiled(x)[2] is True and _Once.instance is not None
