"""A set passed in and changed by the frame ends with eager's very hash table.

A set's iteration order, where a later insert lands and what ``pop()`` returns follow
its history (table size, deleted slots, the search position ``pop`` keeps), not only its
items.  So Kiln writes a changed input set back by doing to the real set what the frame
did, in order, never by clearing and refilling it; and ``pop()`` on a set passed in, whose
result depends on state Python does not show, runs as Python (a graph break there).
Ints hash to themselves, so the histories below give the same tables in every process.
"""
from __future__ import annotations

import torch

import kiln
from kiln.metrics import metrics
from kiln.testing import CompileCounter


def worn_set():
    """Ints colliding modulo the table size, then removals: a table with deleted slots
    whose order differs from a fresh set of the same items."""
    s = set()
    for k in (197, 388, 215, 20, 132, 261, 248, 207, 155, 244, 183, 298):
        s.add(k)
    for k in (20, 155, 215, 132, 244):
        s.discard(k)
    return s


def changes(x, s):
    s.add(160)
    s.discard(261)
    s.add(3)
    s.update([192, 35, 4])
    s -= {298}
    return x + len(s)


def _run_both(fn, make_set, after):
    counter = CompileCounter()
    fast = kiln.compile(fn, backend=counter)
    for seed in (0, 1):
        x = torch.randn(3, generator=torch.Generator().manual_seed(seed))
        a, b = make_set(), make_set()
        expected, got = fn(x, a), fast(x, b)
        torch.testing.assert_close(got, expected)
        assert list(a) == list(b), f"iteration order differs: eager {list(a)}, compiled {list(b)}"
        after(a), after(b)
        assert list(a) == list(b), "a later insert or pop lands differently"
    return counter


def _later_inserts_and_pops(s):
    for k in (224, 5, 256, 36):
        s.add(k)
    popped = [s.pop() for _ in range(3)]
    s.add(popped[0] + 1000)


def test_a_changed_input_set_keeps_eager_table():
    kiln.reset()
    fresh = set(worn_set())
    assert list(fresh) != list(worn_set()), "the test needs a set whose history shows in its order"
    counter = _run_both(changes, worn_set, _later_inserts_and_pops)
    assert counter.frame_count == 1 and counter.op_count == 1


def pops(x, s):
    first = s.pop()
    s.add(first + 500)
    return x * first


def test_pop_of_an_input_set_runs_as_python():
    kiln.reset()
    metrics.reset()

    def with_pops(s):
        s.pop()                   # moves the search position eager's next pop starts from
        return s

    counter = _run_both(pops, lambda: with_pops(worn_set()), _later_inserts_and_pops)
    assert counter.frame_count == 1 and counter.op_count == 1   # the multiplication, after the break
    assert len(metrics.breaks) >= 1


def reinit(x, s):
    s.__init__([7, 39, 71])
    s.add(103)
    return x - len(s)


def test_set_init_on_an_input_set_replays_as_clear_then_adds():
    kiln.reset()
    counter = _run_both(reinit, worn_set, _later_inserts_and_pops)
    assert counter.frame_count == 1 and counter.op_count == 1
