"""The C accelerator's Plan on plain Python objects (runtime/_guard_plan.c): argument
binding as Python binds a call (or handing the call to the Python guard), attribute reads
through ``__getattr__``, the instance dict and the class, and the type-version cache
seeing a class attribute change."""
import pytest

from kiln.runtime import guard_plan as gp
from kiln.runtime import native


class A:
    k = 3

    def __getattr__(self, name):
        return "hook-" + name


class B:
    pass


def _plan():
    module = native.guard_plan_module()
    if module is None:
        pytest.skip(f"the C accelerator is not built here: {native.unavailable_reason()}")
    steps = [(gp.C_TYPE, 1, A), (gp.L_ATTR, 3, 1, "x"), (gp.L_ITEM, 4, 3, "w"), (gp.C_EQ, 4, 5),
             (gp.L_ATTR, 5, 1, "k"), (gp.C_EQ, 5, 3), (gp.L_ATTR, 6, 1, "zz"), (gp.C_EQ, 6, "hook-zz"),
             (gp.C_IS, 2, None)]
    return module.Plan(lambda *a, **k: "python", 3, 0, 0, False, False, ("___fn", "a", "b"), (None,), None, 7,
                       steps, (4,))


def test_binding_and_attribute_reads(guard_path):
    if guard_path != "C":
        pytest.skip("the Plan itself")
    p = _plan()
    a = A()
    a.x = {"w": 5}
    assert [p(None, a), p(None, a), p(None, a, None), p(None, a, b=None)] == [(5,)] * 4
    assert p(None, a, 1) is False and p(None, B()) is False
    assert p(None, a, c=1) == "python" and p(None) == "python"      # Python's TypeError is the guard's
    A.k = 4
    try:
        assert p(None, a) is False                                   # the class changed: seen
    finally:
        A.k = 3
    a.k = 3                                                          # the instance dict shadows
    assert p(None, a) == (5,)
    a.k = 4
    assert p(None, a) is False
    del a.k
    a.x = {}
    assert p(None, a) is False                                       # KeyError: False
