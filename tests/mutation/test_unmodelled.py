"""Mutations Kiln cannot model break the graph (they run as Python, in order) instead of
being lost or applied at trace time."""
import array
import collections
import io

import pytest
import torch

import kiln

from .harness import check, randn

pytestmark = pytest.mark.filterwarnings("ignore")


def test_deque_append_runs_as_python():
    def f(d, x):
        d.append(x * 2)
        d.appendleft(1)
        return x + len(d)
    check(f, lambda: (collections.deque([0]), randn(2)))


def test_array_module_mutation():
    def f(a, x):
        a.append(3)
        a[0] = 7
        return x * len(a)
    check(f, lambda: (array.array("i", [1, 2]), randn(2)))


def test_bytearray_mutation():
    def f(b, x):
        b.extend(b"xy")
        return x + len(b)
    check(f, lambda: (bytearray(b"a"), randn(2)))


def test_stringio_write():
    def f(s, x):
        s.write("hello")
        return x * 2, s.getvalue()
    def make():
        return io.StringIO(), randn(2)
    compiled = kiln.compile(f)
    a, b = make(), make()
    r1, r2 = f(*a), compiled(*b)
    assert r1[1] == r2[1] == "hello" and a[0].getvalue() == b[0].getvalue()


class CSetattr:
    """An object whose attribute store is C code that is not object's."""


def test_c_extension_setattr_breaks():
    # torch.Generator stores through C; kiln must not record it as a plain attribute write
    def f(ns, x):
        ns.value = x + 1
        return x
    import types
    check(f, lambda: (types.SimpleNamespace(), randn(2)), graphs=1)


def test_descriptor_without_python_setter_refused():
    class Desc:
        def __get__(self, obj, cls):
            return obj.__dict__.get("_d", 0) if obj is not None else self

        def __set__(self, obj, value):
            obj.__dict__["_d"] = value + 100
    class O:
        d = Desc()
    def f(o, x):
        o.d = 1
        return x + o.d
    check(f, lambda: (O(), randn(2)))


def test_property_without_setter_raises_like_eager():
    class O:
        @property
        def p(self):
            return 1
    def f(o, x):
        try:
            o.p = 2
        except AttributeError:
            return x - 1
        return x + 1
    check(f, lambda: (O(), randn(2)))


def test_custom_delattr_refused():
    LOG = []
    class O:
        def __init__(self):
            self.a = 1

        def __delattr__(self, name):
            LOG.append(name)
            object.__delattr__(self, name)
    def f(o, x):
        del o.a
        return x + 1
    check(f, lambda: (O(), randn(2)), reset=LOG.clear, snapshot=lambda: list(LOG))


def test_foreach_inplace_on_input_list():
    def f(ts, x):
        torch._foreach_add_(ts, 1.0)
        return x * 2
    check(f, lambda: ([randn(2), randn(3)], randn(2)))


def test_tensor_attribute_set_on_input():
    def f(x):
        x.my_tag = "seen"
        return x + 1
    a, b = randn(2), randn(2)
    f(a)
    kiln.compile(f)(b)
    assert b.my_tag == "seen"


def test_nn_init_on_parameter():
    def f(m, x):
        with torch.no_grad():
            torch.nn.init.constant_(m.weight, 0.5)
        return m(x)
    check(f, lambda: (torch.nn.Linear(2, 2), randn(2)))


def test_random_seed_from_python_random_module():
    import random
    def f(x):
        random.seed(3)
        return x + random.random()
    check(f, lambda: (randn(2),), snapshot=lambda: random.random())
