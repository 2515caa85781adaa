"""Breaks inside called code: inlined functions and methods at several depths (the
callee then runs as its own compiled frame), nn.Module submodules, closures, super(),
default arguments and *args/**kwargs."""
from __future__ import annotations

import torch
from torch import nn

import kiln

from .harness import check, log, randn, seeds


def one(shape=(3, 4)):
    return lambda s: (randn(s, *shape),)


def leaf(x):
    y = x * 2
    print("in leaf")
    return y + 1


def middle(x):
    return leaf(x - 1) * 3


def top(x):
    return middle(x + 1).relu()


def test_break_in_directly_called_function():
    def f(x):
        a = x.sin()
        b = leaf(a)
        return b + a

    # f: a graph before the call and one after; leaf: one before its print, one after
    check(f, seeds(one()), graphs=4, breaks=1)


def test_break_two_calls_deep():
    def f(x):
        return middle(x.cos()) + 1

    # f breaks at middle(); middle breaks at leaf(); leaf at its print: two graphs each
    check(f, seeds(one()), graphs=6, breaks=1)


def test_break_three_calls_deep():
    def f(x):
        return top(x) - x

    # f has no tensor work before top(): 1 + 2 (top) + 2 (middle) + 2 (leaf)
    check(f, seeds(one()), graphs=7, breaks=1)


def test_break_in_callee_called_twice():
    def f(x):
        return leaf(x) + leaf(x * 5)

    # f: nothing before the first call, x * 5 before the second, the sum after; leaf: two
    # graphs, reused by the second call
    check(f, seeds(one()), graphs=4, breaks=1)


class Scaler:
    def __init__(self, k):
        self.k = k
        self.calls = 0

    def apply(self, x):
        self.calls += 1
        y = x * self.k
        kiln.graph_break()
        return y - self.calls

    def twice(self, x):
        return self.apply(self.apply(x))


def test_break_in_method():
    s = Scaler(3)

    def f(x):
        return s.apply(x + 1).abs()

    check(f, seeds(one()), graphs=4, breaks=1, setup=lambda: setattr(s, "calls", 0), state=lambda: s.calls)


def test_break_in_method_calling_method():
    s = Scaler(2)

    def f(x):
        return s.twice(x) / 2

    # twice() has no tensor work; apply(): x * k, then y - calls: the int attribute is
    # baked in the first time, and its second value (the second apply() of the same
    # call) makes it a 0-d tensor input from then on (ShapePolicy.number_varies): one
    # more graph, reused for every later value; f: the division.
    # Breaks: f at twice(), twice() at both apply() calls, apply() once.
    check(f, seeds(one()), graphs=4, breaks=1, setup=lambda: setattr(s, "calls", 0), state=lambda: s.calls)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        print("block", tuple(h.shape))
        return torch.tanh(h)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = Block()
        self.b = Block()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        x = self.a(x)
        x = self.b(x) + x
        return self.head(x)


def test_break_in_submodule_forward():
    # Net breaks at both block calls; each block breaks at its print.  Block.forward is
    # one code object: block b gets an input that requires grad (block a's output), so
    # its first part recompiles, and the tanh continuation is shared: 2 + 1 + Net's tail
    check(Net(), seeds(lambda s: (randn(s, 2, 4),)), graphs=4, breaks=2, module=True)


def test_break_in_submodule_with_grad():
    net = Net()

    def f(x):
        out = net(x).sum()
        return out

    # inputs that require grad: outputs must too; both blocks share every entry here
    check(f, seeds(lambda s: (randn(s, 2, 4, requires_grad=True),)), graphs=4, breaks=1)


def test_break_in_closure_with_freevars():
    scale = torch.tensor(3.0)
    offset = 2

    def f(x):
        y = x * scale
        print("closure", offset)
        return y + offset

    check(f, seeds(one()), graphs=2, breaks=1)


def test_break_in_inner_function_made_in_frame():
    def f(x):
        k = x.shape[0]

        def inner(t):
            print("inner", k)
            return t * k

        return inner(x + 1) - 1

    # f has a cell variable (k).  f breaks at the call; inner(), a function made in the
    # frame, is not compiled as a callee (only functions that existed before tracing
    # are): it runs as plain Python, so t * k is not captured (gap)
    check(f, seeds(one()), graphs=2, breaks=1)


def test_closure_cell_written_after_break():
    def f(x):
        count = 0

        def bump():
            nonlocal count
            count += 1

        bump()
        print("count", count)
        bump()
        return x + count, count

    check(f, seeds(one()), graphs=1, breaks=1)


class Base(nn.Module):
    def forward(self, x):
        print("base forward")
        return x * 2


class Child(Base):
    def forward(self, x):
        y = super().forward(x + 1)
        log("child", tuple(y.shape))
        return y - 1


def test_break_in_method_reached_through_super():
    check(Child(), seeds(one()), graphs=3, breaks=1, module=True)


class Accum:
    def __init__(self):
        self.items = []

    def add(self, t):
        self.items.append(t)
        return len(self.items)


class LoudAccum(Accum):
    def add(self, t):
        print("adding", len(self.items))
        return super().add(t * 2)


def test_super_call_after_break_in_override():
    acc = LoudAccum()

    def f(x):
        n = acc.add(x)
        m = acc.add(x + 1)
        return x * n + m

    # add() is compiled as its own frame; it prints len(self.items), a specialised int,
    # so the second call recompiles it: a graph per add() (t * 2), x + 1, and the tail
    check(f, seeds(one()), graphs=4, breaks=2, setup=lambda: acc.items.clear(), state=lambda: acc.items)


def test_defaults_and_keyword_arguments():
    def g(x, scale=2.0, *, shift=1, tag="g"):
        print(tag, scale, shift)
        return x * scale + shift

    def f(x, y=None, factor=3):
        a = g(x)
        b = g(x, factor, shift=-1, tag="h")
        if y is not None:
            a = a + y
        return a + b

    # f breaks at both calls (no tensor work before them).  g's frame entry (just the
    # print) is reused; its continuation specialises on scale/shift and compiles once per
    # call site; f's tail
    check(f, [(randn(0, 3),), (randn(1, 3),)], graphs=3, breaks=1)


def test_defaults_of_the_compiled_frame():
    def f(x, k=2, opts={"bias": 1.0}):  # noqa: B006 - read only
        print("k", k)
        return x * k + opts["bias"]

    check(f, [(randn(0, 3),), (randn(1, 3), 2)], graphs=1, breaks=1)


def test_star_args_and_kwargs():
    def g(*args, **kwargs):
        total = sum(args)
        print("g", len(args), sorted(kwargs))
        for k, v in sorted(kwargs.items()):
            total = total + v
        return total

    def f(x, *rest, **named):
        y = g(x, *rest, **named)
        return y * 2, len(rest), sorted(named)

    # f breaks at the CALL_FUNCTION_EX; g is compiled as its own frame: sum(args) before
    # its print, nothing after; f: y * 2
    check(f, [(randn(0, 3), randn(1, 3), randn(2, 3)), (randn(3, 3), randn(4, 3), randn(5, 3))],
          graphs=2, breaks=1)
    kiln.reset()
    check(f, [(randn(0, 3),), (randn(1, 3),)], graphs=2, breaks=1)


def test_star_kwargs_in_the_compiled_frame():
    def f(x, *args, **kwargs):
        y = x + len(args)
        print("kw", sorted(kwargs))
        return y * kwargs.get("scale", 1.0), args

    # the break keeps *args/**kwargs alive across it
    inputs = [(randn(0, 3), 1, 2), (randn(1, 3), 3, 4)]
    check(f, inputs, graphs=2, breaks=1)


def test_lambda_and_partial_across_break():
    import functools

    def scale(t, k):
        return t * k

    def f(x):
        g = lambda t: t + 1  # noqa: E731
        h = functools.partial(scale, k=4)
        print("made")
        return h(g(x))

    check(f, seeds(one()), graphs=1, breaks=1)


class Thing:
    def __init__(self, k):
        self.k = k

    @property
    def doubled(self):
        print("property read")
        return self.k * 2

    def __call__(self, x):
        print("called thing")
        return x * self.k

    @staticmethod
    def static(x):
        print("static")
        return x + 1

    @classmethod
    def klass(cls, x):
        print("classmethod", cls.__name__)
        return x - 1


def test_break_in_property_getter():
    thing = Thing(3)

    def f(x):
        return (x + 1) * thing.doubled

    # the getter is inlined; its print breaks f at the attribute load, which the step
    # function runs as Python (the getter runs eagerly)
    check(f, seeds(one()), graphs=2, breaks=1)


def test_break_in_dunder_call_of_user_object():
    thing = Thing(2)

    def f(x):
        return thing(x + 1) * 2

    # f breaks at the call; a callable object (not a function or module) is not compiled
    # as a callee: __call__ runs as plain Python (x * k uncaptured; gap)
    check(f, seeds(one()), graphs=2, breaks=1)


def test_break_in_staticmethod_and_classmethod():
    thing = Thing(1)

    def f(x):
        return Thing.static(x) + thing.klass(x * 2)

    # both are compiled as their own frames (print first, then one graph each); f: x * 2
    # before the second call, the sum after it
    check(f, seeds(one()), graphs=4, breaks=2)


class Hooked(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.lin = nn.Linear(4, 4)
        self.register_forward_hook(lambda mod, args, out: log("hook", tuple(out.shape)))

    def forward(self, x):
        print("hooked forward")
        return self.lin(x)


def test_break_in_module_with_forward_hook():
    hooked = Hooked()

    def f(x):
        return hooked(x * 2).sum()

    # a module with hooks is called as a whole (hooks and all) by the step function
    check(f, seeds(one()), graphs=2, breaks=1)
