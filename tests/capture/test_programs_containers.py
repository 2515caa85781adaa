"""Tuples, lists, dicts, sets, slices; building, indexing, unpacking, membership,
mutation (of containers made in the frame and of containers passed in), and string
formatting of constants."""
from __future__ import annotations

import collections

import torch

from .capture_harness import Case, I, parametrize, run_case


def x1(r):
    return (r.randn(3, 4),)


def xy(r):
    return r.randn(3, 4), r.randn(3, 4)


def three(r):
    return [r.randn(2, 3) for _ in range(3)]


# -- tuples -------------------------------------------------------------------------------
def tuple_build_index(x):
    t = (x, x + 1, 2)
    return t[1] * t[2], t[-1], t[0]


def tuple_concat_repeat(x, y):
    t = (x,) * 2 + (y,)
    return t, len(t), t.index(x), ("a", 1, "a").count("a"), [2, x].index(2)


def tuple_slices(x, y):
    t = (x, y, x * 2, y * 2)
    return t[1:], t[::-1], t[:-1:2]


def tuple_input(t):
    a, b = t
    return a @ b.T, t[0]


def tuple_compare_constants(x):
    if (1, 2) < (1, 3) and (2,) + (3,) == (2, 3):
        return x + 1
    return x


def nested_tuple_unpack(x, y):
    a, (b, c) = x, (y, x + y)
    (d, e), f = (a * 2, b), c
    return d + e + f


TUPLES = [
    Case("tuple_build_index", tuple_build_index, x1, 1, 2),
    Case("tuple_concat_repeat", tuple_concat_repeat, xy, 0, 0),
    Case("tuple_slices", tuple_slices, xy, 1, 2),
    Case("tuple_input", tuple_input, lambda r: ((r.randn(2, 3), r.randn(4, 3)),), 1, 2),
    Case("tuple_compare_constants", tuple_compare_constants, x1, 1, 1),
    Case("nested_tuple_unpack", nested_tuple_unpack, xy, 1, 4),
]


# -- lists ----------------------------------------------------------------------------------
def list_methods(x):
    xs = [x]
    xs.append(x + 1)
    xs.extend([x * 2, x * 3])
    xs.insert(1, x - 1)
    last = xs.pop()
    first = xs.pop(0)
    xs.reverse()
    return xs, last - first, len(xs)


def list_input_read(xs):
    return xs[0] + xs[-1], xs[1:], len(xs)


def list_input_mutated(xs):
    xs.append(xs[0] * 2)      # the caller's list changes: replayed after the graph
    xs[1] = xs[1] + 1
    return len(xs)


def list_of_lists(x):
    grid = [[x, x + 1], [x + 2]]
    grid[1].append(grid[0][1] * 2)
    grid[0][0] = grid[1][0]
    return grid


def list_slices_assign(x, y):
    xs = [x, y, x + y, x - y]
    xs[1:3] = [y * 2]
    del xs[0]
    return xs, xs[::-1], xs[-2:]


def list_inplace_ops(x):
    xs = [x]
    xs += [x + 1]
    xs = xs * 2
    xs += (x * 3,)
    return xs


def list_index_count_remove(x):
    names = ["a", "b", "c", "b"]
    i = names.index("c")
    n = names.count("b")
    names.remove("b")
    return x * i + n, names


def list_sort_constants(x):
    nums = [3, 1, 2]
    nums.sort()
    words = sorted(["pear", "fig", "apple"], key=len, reverse=True)
    return x * nums[0] + nums[-1], words


def list_clear_copy(x):
    a = [x, x + 1]
    b = a.copy()
    a.clear()
    return a, b, b is a


def list_equality(x):
    if [1, 2] == [1, 2] and [1] != [2] and list((1, 2)) == [1, 2]:
        return x * 2
    return x


def swap_values(x, y):
    x, y = y, x
    a, b, c = y, x, y
    return x - y, a + b + c


LISTS = [
    Case("list_methods", list_methods, x1, 1, 5),
    Case("list_input_read", list_input_read, lambda r: (three(r),), 1, 1),
    Case("list_input_mutated", list_input_mutated, lambda r: (three(r),), 1, 2),
    Case("list_of_lists", list_of_lists, x1, 1, 3),
    Case("list_slices_assign", list_slices_assign, xy, 1, 3),
    Case("list_inplace_ops", list_inplace_ops, x1, 1, 2),
    Case("list_index_count_remove", list_index_count_remove, x1, 1, 2),
    Case("list_sort_constants", list_sort_constants, x1, 1, 2),
    Case("list_clear_copy", list_clear_copy, x1, 1, 1),
    Case("list_equality", list_equality, x1, 1, 1),
    Case("swap_values", swap_values, xy, 1, 3),
]


# -- unpacking, starred -----------------------------------------------------------------------
def starred_unpack(xs):
    first, *middle, last = xs
    return first + last, middle


def starred_head(x, y):
    *init, tail = (x, y, x + y)
    head, *rest = init
    return tail * 2, rest, head


def star_call(a, b, c):
    def add3(p, q, r):
        return p + q * r
    args = (a, b)
    return add3(*args, c), add3(*[a, b, c]), add3(*(a,), *(b, c))


def star_build(x, y):
    a = [x, y]
    b = (x * 2,)
    return [*a, *b], (*b, *a, y), {*range(3), *[5, 6]}


def dict_star_call(x):
    def scale(t, *, factor, shift=0):
        return t * factor + shift
    kw = {"factor": 2.0}
    more = {"shift": 1.0}
    return scale(x, **kw), scale(x, **kw, **more), scale(x, **{**kw, "shift": -1.0})


UNPACK = [
    Case("starred_unpack", starred_unpack, lambda r: ([r.randn(2) for _ in range(4)],), 1, 1),
    Case("starred_head", starred_head, xy, 1, 2),
    Case("star_call", star_call, lambda r: (r.randn(2), r.randn(2), r.randn(2)), 1, 6),
    Case("star_build", star_build, xy, 1, 1),
    Case("dict_star_call", dict_star_call, x1, 1, 6),
]


# -- dicts ------------------------------------------------------------------------------------
def dict_build_read(x, y):
    d = {"a": x, "b": y, 3: x + y}
    return d["a"] * d[3], d.get("b"), d.get("zz", 7), len(d), "a" in d, "q" not in d


def dict_methods(x):
    d = {}
    d["one"] = x
    d.setdefault("two", x + 1)
    d.setdefault("one", 100)
    d.update({"three": x * 3}, four=x * 4)
    popped = d.pop("two")
    missing = d.pop("nope", None)
    return list(d.keys()), list(d.values()), list(d.items()), popped, missing


def dict_input_read(d):
    return d["w"] @ d["x"], sorted(d)


def dict_input_mutated(d):
    d["sum"] = d["w"].sum() + d["x"].sum()
    del d["w"]
    return len(d)


def dict_output(x, y):
    return {"sum": x + y, "diff": x - y, "nested": {"prod": [x * y]}}


def dict_merge(x):
    a = {"p": x, "q": 1}
    b = {"q": 2, "r": x + 1}
    c = a | b
    a |= {"s": 3}
    return c, a, {**b, "p": 0}


def dict_tensor_values_loop(d):
    total = None
    for k in sorted(d):
        total = d[k] if total is None else total + d[k]
    return total


def dict_copy_clear(x):
    d = {"a": x, "b": x + 1}
    e = d.copy()
    d.clear()
    return d, e, dict(e), dict([("k", x)]), dict(a=1, b=x)


def ordered_dict_input(d):
    return [v * 2 for v in d.values()], list(d)


def defaultdict_local(x):
    groups = collections.defaultdict(list)
    for i, name in enumerate(["a", "b", "a"]):
        groups[name].append(x * i)
    return groups["a"], len(groups["b"]), dict(groups)["b"]


def dict_int_keys(xs):
    d = {i: t for i, t in enumerate(xs)}
    return d[2] - d[0], max(d), 1 in d


DICTS = [
    Case("dict_build_read", dict_build_read, xy, 1, 2),
    Case("dict_methods", dict_methods, x1, 1, 3),
    Case("dict_input_read", dict_input_read, lambda r: ({"w": r.randn(2, 3), "x": r.randn(3, 2)},), 1, 1),
    Case("dict_input_mutated", dict_input_mutated, lambda r: ({"w": r.randn(2, 3), "x": r.randn(3, 2)},), 1, 3),
    Case("dict_output", dict_output, xy, 1, 3),
    Case("dict_merge", dict_merge, x1, 1, 1),
    Case("dict_tensor_values_loop", dict_tensor_values_loop,
         lambda r: ({"b": r.randn(2), "a": r.randn(2), "c": r.randn(2)},), 1, 2),
    Case("dict_copy_clear", dict_copy_clear, x1, 1, 1),
    Case("ordered_dict_input", ordered_dict_input,
         lambda r: (collections.OrderedDict([("z", r.randn(2)), ("y", r.randn(2))]),), 1, 2),
    Case("defaultdict_local", defaultdict_local, x1, 1, 3),
    Case("dict_int_keys", dict_int_keys, lambda r: ([r.randn(2) for _ in range(3)],), 1, 1),
]


# -- sets ---------------------------------------------------------------------------------------
def set_ops(x):
    a = {1, 2, 3}
    b = set([3, 4])
    a.add(10)
    a.discard(1)
    u, i, d = a | b, a & b, a - b
    return x * len(u) + len(i), sorted(d), 3 in a, 1 in a, a.issuperset({2}), frozenset(b) == {3, 4}


def set_of_strings(x, names):
    seen = set()
    out = []
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(x * len(n))
    return out, len(seen)


SETS = [
    Case("set_ops", set_ops, x1, 1, 2),
    Case("set_of_strings", set_of_strings, lambda r: (r.randn(2), ["ab", "c", "ab"]), 1, 2),
    Case("set_union_methods", lambda x: x * len({1, 2}.union([3]).difference({1})), x1, 1, 1),
]


# -- membership and len ------------------------------------------------------------------------
def membership(x, mode):
    hits = 0
    if mode in ("relu", "gelu"):
        hits += 1
    if mode in ["tanh"]:
        hits += 10
    if "el" in mode:
        hits += 100
    if 2 in range(5):
        hits += 1000
    return x * hits


def lengths(x, xs, d):
    return x * (len(xs) + len(d) + len("hello") + len((1, 2)) + len(range(2, 9, 3)) + len({7, 8}))


MEMBERSHIP = [
    Case("membership", membership, lambda r: I(r.randn(3), "gelu"), 1, 1),
    Case("lengths", lengths, lambda r: (r.randn(2), [1, 2, 3], {"a": 1}), 1, 1),
]


# -- string formatting of constants ----------------------------------------------------------------
def fstrings(x, n, name):
    key = f"{name}_{n:03d}_{n!r}_{2.5:.2f}"
    d = {key: x}
    return d[f"{name}_{n:03d}_{n!r}_2.50"] * 2, key


def percent_and_format(x, n):
    a = "%s-%d-%.1f" % ("layer", n, 1.25)
    b = "{}:{name}".format(n, name="w")
    c = "/".join(["p", str(n), repr("q")])
    return x + len(a) + len(b) + len(c), a, b, c


def string_methods(x, s):
    parts = s.split(".")
    if parts[-1].startswith("w") and s.upper().endswith("WEIGHT"):
        return x * len(parts), s.replace(".", "/"), s[2:], "-" * 3, s.strip("l")
    return x, s


STRINGS = [
    Case("fstrings", fstrings, lambda r: I(r.randn(2), 7, "blk"), 1, 1),
    Case("percent_and_format", percent_and_format, lambda r: I(r.randn(2), 4), 1, 3),
    Case("string_methods", string_methods, lambda r: I(r.randn(2), "layer.0.weight"), 1, 1),
]


# -- aliasing of results ------------------------------------------------------------------------
def same_tensor_twice(x):
    y = x + 1
    return y, y, [y, x], {"y": y}


def return_input_container(xs, x):
    xs.append(x)
    return xs, x


def nested_output(x, y):
    return [(x + y, {"a": [y * 2, (x,)]}), None, "tag", 3.5]


def constants_of_every_kind(x):
    consts = (None, True, 3, 2.5, 1 + 2j, "s", b"b", ..., (1, (2, "x")), frozenset({1}), -0.0)
    k = 0
    for c in consts:
        if c is not None and c is not ... and not isinstance(c, (complex, bytes)):
            k += 1
    return x * k, consts, {"nested": ((1, 2), [3.5])}


def list_input_slice_assign(xs, x):
    xs[1:] = [x, x * 2]
    del xs[0]
    return len(xs)


ALIASING = [
    Case("same_tensor_twice", same_tensor_twice, x1, 1, 1),
    Case("return_input_container", return_input_container, lambda r: ([r.randn(2)], r.randn(2)), 0, 0),
    Case("nested_output", nested_output, xy, 1, 2),
]

CONSTANTS = [
    Case("constants_of_every_kind", constants_of_every_kind, x1, 1, 1),
    Case("list_input_slice_assign", list_input_slice_assign, lambda r: (three(r), r.randn(2, 3)), 1, 1),
]

CASES = TUPLES + LISTS + UNPACK + DICTS + SETS + MEMBERSHIP + STRINGS + ALIASING + CONSTANTS


@parametrize(CASES)
def test_program(case):
    run_case(case)
