"""Seed 002: a map body that mutates outer state (``self.w += 1``) gets one Kiln error,
whatever holds the state and however the module is reached, in fullgraph and default
mode, and nothing is changed when it is raised."""
from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops.map import map as hop_map

import kiln

MSG = (r"`{stmt}` mutates `{target}` inside the body of `map` \(test_seed_002\.py:\d+\); "
       r"higher-order operator bodies may not change outer state")


class Plain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.tensor(1)

    def forward(self, xs):
        def body(x):
            self.w += 1
            return x

        return hop_map(body, xs)


class WithInt(Plain):
    def __init__(self):
        super().__init__()
        self.w = 1          # a Python int attribute: a STORE_ATTR, not an in-place op


class Outer(torch.nn.Module):
    def __init__(self, inner_cls=Plain):
        super().__init__()
        self.inner = inner_cls()

    def forward(self, xs):
        return self.inner(xs) + 1


class Holder:
    """A plain object holding state: the message does not depend on the holder."""

    def __init__(self):
        self.w = torch.tensor(1)


HOLDER = Holder()


def object_attr(xs):
    def body(x):
        HOLDER.w += 1
        return x
    return hop_map(body, xs)


def _how(kind, model):
    if kind == "compiled module":
        return kiln.compile(model, fullgraph=FULL[0])
    if kind == "compiled forward":
        return kiln.compile(model.forward, fullgraph=FULL[0])
    return None


FULL = [True]


@pytest.mark.parametrize("fullgraph", [True, False])
@pytest.mark.parametrize("make,reach", [
    (Plain, "compiled module"),
    (Plain, "compiled forward"),
    (WithInt, "compiled module"),
    (lambda: Outer(Plain), "compiled module"),          # reached through a submodule
    (lambda: Outer(WithInt), "compiled module"),
])
def test_map_body_mutating_self_w(make, reach, fullgraph):
    FULL[0] = fullgraph
    model = make()
    compiled = _how(reach, model)
    holder = model.inner if isinstance(model, Outer) else model
    before = holder.w.clone() if isinstance(holder.w, torch.Tensor) else holder.w
    with pytest.raises(kiln.Unsupported, match=MSG.format(stmt=r"self\.w \+= 1", target=r"self\.w")) as info:
        compiled(torch.randn(3, 2))
    assert "self.w += 1" in str(info.value) and "test_seed_002.py" in info.value.location
    after = holder.w
    assert (torch.equal(after, before) if isinstance(before, torch.Tensor) else after == before)


@pytest.mark.parametrize("fullgraph", [True, False])
def test_object_attribute(fullgraph):
    with pytest.raises(kiln.Unsupported, match=MSG.format(stmt=r"HOLDER\.w \+= 1", target=r"HOLDER\.w")):
        kiln.compile(object_attr, fullgraph=fullgraph)(torch.randn(3, 2))
    assert torch.equal(HOLDER.w, torch.tensor(1))


COUNT = 0


def global_counter(xs):
    def body(x):
        global COUNT
        COUNT = COUNT + 1
        return x
    return hop_map(body, xs)


@pytest.mark.parametrize("fullgraph", [True, False])
def test_global(fullgraph):
    with pytest.raises(kiln.Unsupported, match=MSG.format(stmt=r"COUNT = COUNT \+ 1", target="COUNT")):
        kiln.compile(global_counter, fullgraph=fullgraph)(torch.randn(3, 2))
    assert COUNT == 0


@pytest.mark.parametrize("fullgraph", [True, False])
@pytest.mark.parametrize("outside", ["frame", "global"])
def test_closed_over_list(fullgraph, outside):
    seen_global = []

    def f(xs):
        seen = [] if outside == "frame" else seen_global

        def body(x):
            seen.append(x)
            return x
        out = hop_map(body, xs)
        return out, len(seen)
    with pytest.raises(kiln.Unsupported, match=MSG.format(stmt=r"seen\.append\(x\)", target="seen")):
        kiln.compile(f, fullgraph=fullgraph)(torch.randn(3, 2))
    assert seen_global == []


@pytest.mark.parametrize("fullgraph", [True, False])
def test_in_place_on_outer_tensor(fullgraph):
    acc = torch.zeros(2)

    def f(xs):
        def body(x):
            acc.add_(x)
            return x * 2
        return hop_map(body, xs)
    with pytest.raises(kiln.Unsupported, match=MSG.format(stmt=r"acc\.add_\(x\)", target="acc")):
        kiln.compile(f, fullgraph=fullgraph)(torch.randn(3, 2))
    assert torch.equal(acc, torch.zeros(2))


def test_nonlocal_of_the_frame():
    def f(xs):
        n = 0

        def body(x):
            nonlocal n
            n += 1
            return x
        return hop_map(body, xs), n
    with pytest.raises(kiln.Unsupported, match=MSG.format(stmt=r"n \+= 1", target="n")):
        kiln.compile(f)(torch.randn(3, 2))


def test_body_may_change_what_it_creates_and_read_outer_state():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(2))
            self.k = 3

        def forward(self, xs):
            def body(x):
                parts = []
                y = x.clone()
                y.mul_(self.k)          # in place on a tensor the body made
                parts.append(y * self.w)
                return parts[0]
            return hop_map(body, xs)
    m = M()
    xs = torch.randn(3, 2)
    torch.testing.assert_close(kiln.compile(m, fullgraph=True)(xs), xs * 3 * m.w)


def test_mutations_outside_bodies_are_still_traced():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.tensor(1)

        def forward(self, xs):
            self.w += 1
            return hop_map(lambda x: x * 2, xs)
    m = M()
    kiln.compile(m, fullgraph=True)(torch.randn(3, 2))
    assert m.w.item() == 2


class Counter:
    def __init__(self):
        self.n = 0


def test_object_made_in_the_frame_is_outer_state_for_the_body():
    def f(xs):
        c = Counter()

        def body(x):
            c.n += 1
            return x
        return hop_map(body, xs), c.n
    with pytest.raises(kiln.Unsupported, match=MSG.format(stmt=r"c\.n \+= 1", target=r"c\.n")):
        kiln.compile(f)(torch.randn(3, 2))


def test_body_may_build_and_change_its_own_objects():
    def f(xs):
        def body(x):
            c = Counter()
            c.n += 2
            return x * c.n
        return hop_map(body, xs)
    xs = torch.randn(3, 2)
    torch.testing.assert_close(kiln.compile(f, fullgraph=True)(xs), xs * 2)


@pytest.mark.parametrize("body", [
    lambda acc, x: (torch.relu_(acc), x * 2)[1],
    lambda acc, x: (torch.add(x, 1, out=acc), x * 2)[1],
], ids=["relu_", "out="])
def test_in_place_torch_functions_and_out_arguments(body):
    acc = torch.zeros(2)

    def f(xs):
        def inner(x):
            return body(acc, x)
        return hop_map(inner, xs)
    with pytest.raises(kiln.Unsupported, match=r"mutates .* inside the body of `map`"):
        kiln.compile(f, fullgraph=True)(torch.randn(3, 2))
    assert torch.equal(acc, torch.zeros(2))
