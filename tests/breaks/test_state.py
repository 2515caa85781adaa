"""What crosses a break: live locals of many kinds, values on the stack, containers and
dataclasses returned, and side effects made before the break (applied once, in order
with the prints)."""
from __future__ import annotations

import collections
import dataclasses

import torch

import kiln

from .harness import check, log, randn, seeds, shout


def one(shape=(3,)):
    return lambda s: (randn(s, *shape),)


class Box:
    def __init__(self, v):
        self.v = v


def helper(t):
    return t * 10


def test_many_live_locals_of_many_kinds():
    def f(x):
        t = x + 1
        n = 3
        fl = 0.5
        s = "name"
        lst = [t, n, "a"]
        tup = (t * 2, None)
        d = {"k": t - 1, "n": n}
        box = Box(t)
        nothing = None
        fn = helper
        dev = x.device
        dt = x.dtype
        sh = x.shape
        print("break with many locals")
        return (t * n * fl, s, lst[0] + lst[1], tup[0], d["k"] * d["n"], box.v, nothing, fn(t),
                dev, dt, sh)

    check(f, seeds(one()), graphs=2, breaks=1)


def test_locals_mutated_after_break():
    def f(x):
        items = [x]
        table = {"a": x}
        box = Box(0)
        print("mutate after")
        items.append(x * 2)
        table["b"] = x * 3
        box.v = len(items)
        return items, table, box

    check(f, seeds(one()), graphs=1, breaks=1)


def test_value_on_stack_binary_op():
    def f(x):
        a = x.sin()
        return a + helper(shout(x, "arg"))

    # `a` is on the stack while shout() prints; shout() gets a tensor, so it is compiled
    # as its own frame and breaks at its print
    check(f, seeds(one()), graphs=2, breaks=1)


def test_break_inside_call_argument_list():
    def combine(a, b, c, scale=1):
        return (a + b + c) * scale

    def f(x):
        return combine(x * 2, shout(x - 1, "middle"), x / 2, scale=3)

    check(f, seeds(one()), graphs=2, breaks=1)


def test_break_inside_list_tuple_and_dict_displays():
    def f(x):
        lst = [x + 1, shout(x * 2, "in list"), x - 1]
        tup = (x.sum(), shout(x.mean(), "in tuple"))
        dct = {"a": x, "b": shout(x.max(), "in dict"), "c": 7}
        return lst, tup, dct

    # the frame breaks at each shout() (the items before it wait on the stack), shout()
    # breaks at its print (compiled twice: a (3,) tensor, then 0-d ones); graphs: up to
    # the first shout, up to the second, x.max(); the dict is built without tensor work
    check(f, seeds(one()), graphs=3, breaks=2)


def test_break_inside_fstring_of_constants():
    def f(x, n):
        label = f"n={n} {'ok' if n > 1 else 'low'} {kiln.graph_break() or ''}!"
        return x * n, label

    check(f, [(randn(0, 3), 2), (randn(1, 3), 2)], graphs=1, breaks=1)


def test_break_in_fstring_argument():
    def f(x):
        y = x + 1
        msg = f"shape={tuple(y.shape)} value={shout(3, 'fmt')}"
        return y * 2, msg

    check(f, seeds(one()), graphs=2, breaks=1)


def test_break_inside_comparison_chain_and_unpacking():
    def pair(t):
        print("pair")
        return t, t * 2

    def f(x):
        a, b = pair(x + 1)
        first, *rest = [a, b, shout(x, "rest")]
        return first + rest[0] + rest[1]

    check(f, seeds(one()), graphs=3, breaks=2)


@dataclasses.dataclass
class Result:
    loss: torch.Tensor
    parts: list
    note: str = ""


Pair = collections.namedtuple("Pair", ["left", "right"])


def test_returns_a_dataclass_after_break():
    def f(x):
        loss = (x ** 2).mean()
        print("loss computed")
        return Result(loss=loss * 2, parts=[x.sum(), loss], note="done")

    check(f, seeds(one((2, 3))), graphs=2, breaks=1)


def test_dataclass_made_before_break_returned_after():
    def f(x):
        r = Result(loss=x.sum(), parts=[])
        print("made result")
        r.parts.append(x * 2)
        r.note = "filled"
        return r

    check(f, seeds(one()), graphs=2, breaks=1)


def test_returns_namedtuple_and_nested_containers():
    def f(x):
        p = Pair(x + 1, x - 1)
        kiln.graph_break()
        return {"pair": p, "list": [p.left * 2, (p.right, None)], "n": 3}

    check(f, seeds(one()), graphs=2, breaks=1)


def test_list_side_effect_before_break_applied_once():
    def f(x, out):
        out.append(1)
        log("appended")
        print("printed after append", len(out))
        out.append(x * 2)
        return len(out)

    check(f, [(randn(0, 3), [0]), (randn(1, 3), [5])], graphs=1, breaks=1)


def test_attribute_side_effect_before_break():
    holder = Box(0)

    def f(x):
        holder.v = holder.v + 1
        log("set", holder.v)
        print("holder is", holder.v)
        holder.v = holder.v * 10
        return x + holder.v

    # setup resets holder.v so that both input sets (and the repeat) see the same values
    check(f, seeds(one()), graphs=1, breaks=1, setup=lambda: setattr(holder, "v", 0), state=lambda: holder.v)


COUNTER = {"calls": 0}
TOTAL = 0


def test_global_side_effects_before_and_after_break():
    def f(x):
        global TOTAL
        COUNTER["calls"] += 1
        TOTAL = TOTAL + 1
        log("before", TOTAL)
        print("calls", COUNTER["calls"], "total", TOTAL)
        TOTAL = TOTAL + 100
        log("after", TOTAL)
        return x * 2

    def setup():
        global TOTAL
        TOTAL = 0
        COUNTER["calls"] = 0

    check(f, seeds(one()), graphs=1, breaks=1, setup=setup, state=lambda: (TOTAL, dict(COUNTER)))


def test_side_effects_interleaved_with_several_prints():
    def f(x, out):
        out.append("a")
        print("1:", out)
        out.append("b")
        log(len(out))
        print("2:", out)
        out.extend(["c", "d"])
        log(len(out))
        print("3:", out)
        return x + len(out)

    check(f, [(randn(0, 3), []), (randn(1, 3), [])], graphs=1, breaks=3)


def test_input_tensor_mutated_before_and_after_break():
    def f(x):
        x.add_(1)
        print("mutated once")
        x.mul_(2)
        return x.sum()

    check(f, seeds(one()), graphs=2, breaks=1)


def test_dict_passed_in_mutated_across_break():
    def f(x, state):
        state["seen"] = state.get("seen", 0) + 1
        kiln.graph_break()
        state["last"] = x.sum()
        del state["drop"]
        return state["seen"]

    # the second dict has other keys: the frame recompiles (and breaks again); the
    # continuation's entry is reused
    check(f, [(randn(0, 3), {"drop": 1}), (randn(1, 3), {"drop": 2, "seen": 4})], graphs=1, breaks=1,
          total_breaks=2)


def test_tensor_method_waiting_on_the_stack():
    def f(x, y):
        return x.add(shout(y, "y")) * 2

    # x.add is on the stack during the break: the continuation gets a real bound
    # method (a new object per call) and still traces it as the tensor's method.
    # Breaks: f at the call, shout() (compiled: it gets a tensor) at its print
    check(f, seeds(lambda s: (randn(s, 3), randn(s + 5, 3))), graphs=1, breaks=1)


def test_torch_function_and_list_waiting_on_the_stack():
    import torch.nn.functional as F

    def f(x, y):
        a = torch.cat([x, shout(y, "y")]) * 2
        return F.relu(shout(a, "a")) + torch.tensor(shout(4.0, "const")).sqrt()

    # f breaks at each shout(); shout() is compiled for the tensors (once per shape: 2
    # breaks) and runs as Python for the float.  Graphs: cat * 2, relu, the tail
    check(f, seeds(lambda s: (randn(s, 3), randn(s + 5, 3))), graphs=3, breaks=3)


def test_submodule_waiting_on_the_stack():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(shout(x * 2)) + 1

    check(M(), seeds(lambda s: (randn(s, 2, 3),)), graphs=2, breaks=1, module=True)


def test_break_feeding_a_subscript_assignment():
    def f(x):
        t = torch.zeros_like(x)
        t[0] = shout(x[1], "set")
        t[1:] = x[:-1] * 2
        return t

    check(f, seeds(one()), graphs=2, breaks=1)


def test_break_in_keyword_only_call():
    def g(x, *, scale, tag):
        print(tag)
        return x * scale

    def f(x):
        return g(x + 1, tag="kw", scale=2.0) - 1

    # f breaks at the keyword call (KW_NAMES/PRECALL/CALL); g is compiled: print first
    check(f, seeds(one()), graphs=3, breaks=1)
