"""kiln.comparison finds each kind of difference it is asked about, and only those.

The harnesses of every test directory compare through it, so a rule it forgets (say
``requires_grad``) would let every test pass a compiler that gets it wrong: each rule is
checked here on a hand-made pair that differs in exactly that way.
"""
from __future__ import annotations

import collections
import dataclasses

import pytest
import torch

from kiln.comparison import REPORT_WALK, InputWatch, Rules, aliasing, differences, roots_aliasing_differences, walk


def aspects(expected, actual, rules=Rules()):
    return [d.aspect for d in differences(expected, actual, rules)]


def test_equal_structures_have_no_differences():
    t = torch.arange(6.0).reshape(2, 3)
    value = {"a": [t, (1, 2.5, "s")], "b": None, "c": collections.deque([t], maxlen=3)}
    assert differences(value, {"a": [t.clone(), (1, 2.5, "s")], "b": None,
                               "c": collections.deque([t.clone()], maxlen=3)}) == []


@pytest.mark.parametrize("expected, actual, aspect", [
    (torch.zeros(2), torch.zeros(3), "shape"),
    (torch.zeros(2), torch.zeros(2, dtype=torch.float64), "dtype"),
    (torch.zeros(2, requires_grad=True), torch.zeros(2), "requires_grad"),
    (torch.zeros(2), torch.ones(2), "value"),
    ((1, 2), [1, 2], "type"),
    (1, 1.0, "type"),
    ([1, 2], [1, 2, 3], "structure"),
    ({"a": 1}, {"b": 1}, "structure"),
    (collections.deque([1], maxlen=2), collections.deque([1], maxlen=3), "value"),
    (range(0, 3), range(0, 3, 2), "value"),
    (torch.float32, torch.float64, "value"),
])
def test_each_difference_is_found(expected, actual, aspect):
    assert aspects(expected, actual) == [aspect]


def test_is_leaf_and_strides_only_where_asked():
    leaf = torch.zeros(2, 3, requires_grad=True)
    made = leaf * 1
    assert aspects(leaf, made) == []
    assert aspects(leaf, made, Rules(is_leaf=True)) == ["is_leaf"]
    t = torch.zeros(2, 3)
    assert aspects(t, t.t().contiguous().t()) == []
    assert aspects(t, t.t().contiguous().t(), Rules(strides=True)) == ["stride"]


def test_exact_and_tolerance_and_nan():
    a = torch.tensor([1.0, float("nan")])
    b = torch.tensor([1.0 + 1e-7, float("nan")])
    assert aspects(a, b) == []
    assert aspects(a, b, Rules(exact=True)) == ["value"]
    assert aspects(a, a.clone(), Rules(exact=True)) == []
    assert aspects(a, a.clone(), Rules(exact=True, equal_nan=False)) == ["value"]
    assert aspects(a, a.clone(), Rules(equal_nan=False)) == ["value"]
    assert aspects(float("nan"), float("nan")) == []
    assert aspects(float("nan"), float("nan"), Rules(equal_nan=False)) == ["value"]
    assert aspects(1.0, 1.0 + 1e-9) == ["value"]
    assert aspects(1.0, 1.0 + 1e-9, Rules(float_rtol=1e-6)) == []


@dataclasses.dataclass
class Point:
    x: object
    y: object


class Holder:
    def __init__(self, t):
        self.t = t
        self._hidden = 0


def test_objects_modules_and_cycles():
    assert aspects(Point(1, torch.zeros(1)), Point(1, torch.ones(1))) == ["value"]
    h, g = Holder(torch.zeros(1)), Holder(torch.zeros(1))
    g._hidden = 1
    assert aspects(h, g) == ["value"]
    m, n = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    n.load_state_dict(m.state_dict())
    assert aspects(m, n) == []
    n.training = False
    assert aspects(m, n) == ["value"]
    a, b = [1], [1]
    a.append(a)
    b.append(b)
    assert differences(a, b) == []
    assert [p for p, _ in walk(a, "r")] == ["r[0]", "r[1]"]


def test_callables_and_names():
    def make():
        return lambda: 0
    assert aspects(make(), make()) == ["value"]
    assert aspects(make(), make(), Rules(callables_by_name=True)) == []
    assert aspects(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)) == ["value", "value"]   # weight, bias
    sub = type("Sub", (torch.nn.Linear,), {})
    m = torch.nn.Linear(1, 1)
    s = sub(1, 1)
    s.load_state_dict(m.state_dict())
    assert aspects(m, s) == ["type"]
    assert aspects(m, s, Rules(module_subclass=True)) == []


def test_report_walk_looks_only_into_containers_and_dataclasses():
    paths = [p for p, _ in walk({"logits": torch.zeros(1), "h": Holder(1), "p": Point(1, 2)}, "output", REPORT_WALK)]
    assert paths == ["output.logits", "output.h", "output.p.x", "output.p.y"]


def test_aliasing_storage_views_and_identity():
    x = torch.zeros(4)
    names = ("inputs", "result")
    assert roots_aliasing_differences(names, ([x], x.view(2, 2)), ([x], x.view(2, 2)), [x], [x]) == []
    found = roots_aliasing_differences(names, ([x], x.view(2, 2)), ([x], x.clone().view(2, 2)), [x], [x])
    assert any("share storage in eager but not" in f for f in found)
    assert roots_aliasing_differences(names, ([x], x), ([x], x.view(4)), [x], [x]) != []
    assert roots_aliasing_differences(names, ([x], x), ([x], x.view(4)), [x], [x], views=False, identity=False) == []
    assert aliasing((x[:0],), ("r",)).storage == [None]
    assert aliasing((x[:0],), ("r",), empty_tensors_alias=True).storage != [None]


def test_input_watch_sees_changes_and_version_bumps():
    a, b, c = torch.zeros(2), torch.zeros(2), torch.zeros(2, 1)
    watch = InputWatch([a, b, c])
    a.add_(1)
    b.add_(0)
    c.t_()
    assert watch.changes() == (("input[0]", "input[2]"), ("input[0]", "input[1]", "input[2]"))
