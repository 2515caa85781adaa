"""A ``for`` loop whose body breaks hands its iterator to the continuation: the
continuation reads the real iterator's remaining items (guarded only as far as it
takes them) and the glue advances it, so each iteration costs one break and all the
iterations share one cache entry, whatever the iterator's kind (before, every later
iteration broke again at ``FOR_ITER`` over the carried iterator)."""
from __future__ import annotations

import pytest
import torch

import kiln

from .harness import check, randn, seeds


def over_tuple(x, t):
    for v in t:
        print("step")
        x = x * 2 + v
    return x


def over_list(x, t):
    for v in list(t):
        print("step")
        x = x * 2 + v
    return x


def over_range(x, t):
    for i in range(len(t)):
        print("step", i)
        x = x * 2 + i
    return x


def over_dict_items(x, t):
    for k, v in {i: v for i, v in enumerate(t)}.items():
        print("key", k)
        x = x * 2 + v
    return x


def over_dict_values(x, t):
    for v in {i: v for i, v in enumerate(t)}.values():
        print("step")
        x = x * 2 + v
    return x


def over_zip(x, t):
    for a, b in zip(t, t[1:]):
        print("pair")
        x = x + a * b
    return x


def over_enumerate(x, t):
    for i, v in enumerate(t):
        print("index", i)
        x = x * 2 + v * i
    return x


def over_enumerate_zip(x, t):
    for i, (a, b) in enumerate(zip(t, t[1:])):
        print("pair", i)
        x = x + a * b + i
    return x


LOOPS = [over_tuple, over_list, over_range, over_dict_items, over_dict_values, over_zip, over_enumerate,
         over_enumerate_zip]


def tensors(n):
    return lambda s: (randn(s, 3), tuple(randn(s + 10 + i, 3) for i in range(n)))


@pytest.mark.parametrize("fn", LOOPS, ids=[f.__name__ for f in LOOPS])
def test_loop_with_a_print_per_iteration_resumes_compiled(fn):
    # the frame up to the first print, then one continuation for every later iteration
    check(fn, seeds(tensors(4)), graphs=2, breaks=2, min_prints=4)


def test_long_loop_does_not_hit_the_recompile_limit():
    check(over_tuple, seeds(tensors(20)), graphs=2, breaks=2)


def test_shorter_loop_on_a_later_call_reuses_the_continuation():
    # the frame itself unrolls the tuple (its length is guarded: one entry per length, no op
    # before the first print so no graph);
    # the continuation's entries (one more item / no more items) serve every length
    check(over_tuple, [tensors(4)(0), tensors(2)(1), tensors(6)(2)], graphs=2, breaks=2, total_graphs=2,
          total_breaks=4)


def test_an_iterator_used_after_the_loop_is_advanced_like_eager():
    def f(x, t):
        it = iter(t)
        n = 0
        for v in it:
            print("item")
            x = x + v
            n += 1
            if n == 2:
                break
        rest = list(it)
        return x, rest, len(rest), n

    check(f, seeds(tensors(5)), graphs=2, breaks=2)


def test_fullgraph_still_refuses_the_print():
    with pytest.raises(kiln.Unsupported):
        kiln.compile(over_tuple, fullgraph=True)(torch.ones(2), (torch.ones(2),))



def test_loop_that_grows_its_list_sees_the_new_items():
    def f(x, items):
        queue = list(items)
        for v in queue:
            print("visit")
            x = x + v
            if len(queue) < 4:
                queue.append(v * 2)      # eager's iterator yields the appended items too
        return x, len(queue)

    # once the body changed the list, the continuation stops before taking the next item
    # (the items it read at its start are stale) and FOR_ITER runs as Python
    check(f, seeds(lambda s: (randn(s, 3), [randn(s + 1, 3), randn(s + 2, 3)])), graphs=4, breaks=6)


def test_loop_that_rewrites_later_values_of_its_dict():
    def f(x, d):
        for k, v in d.items():
            print("key", k)
            x = x + v
            d["b"] = v * 3               # a later value changes before the loop reaches it
        return x

    check(f, seeds(lambda s: (randn(s, 3), {"a": randn(s + 1, 3), "b": randn(s + 2, 3)})), graphs=2, breaks=4)
