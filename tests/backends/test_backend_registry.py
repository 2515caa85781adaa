"""The name -> backend table."""
from __future__ import annotations

import subprocess
import sys

import pytest

import kiln
from kiln.backends import registry


def test_builtins_are_listed():
    assert {"eager", "aot_eager", "aten", "inductor"} <= set(kiln.backends.list())


@pytest.mark.parametrize("name", ["eager", "aot_eager", "aten", "inductor"])
def test_builtins_resolve_to_callables(name):
    assert callable(kiln.backends.lookup(name))


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError) as info:
        kiln.backends.lookup("indcutor")
    for name in ("eager", "aot_eager", "aten", "inductor"):
        assert name in str(info.value)


def test_registration_is_checked():
    with pytest.raises(TypeError, match="must be callable"):
        kiln.backends.register("broken", 42)
    with pytest.raises(TypeError, match="non-empty str"):
        kiln.backends.register("", lambda gm, ex: gm.forward)
    with pytest.raises(TypeError, match="name \\(str\\) or a callable"):
        kiln.backends.lookup(3.5)
    assert "broken" not in kiln.backends.list()


def test_register_as_decorator_and_callable_passthrough():
    try:
        @kiln.backends.register("test_mine")
        def mine(gm, example_inputs):
            return gm.forward

        assert kiln.backends.lookup("test_mine") is mine
        assert kiln.backends.lookup(mine) is mine
    finally:
        registry._BACKENDS.pop("test_mine", None)


def test_import_and_lookup_stay_lazy():
    code = ("import sys, kiln; kiln.backends.lookup('inductor'); kiln.backends.lookup('aten');"
            "print('torch._inductor.compile_fx' in sys.modules, 'torch._functorch.aot_autograd' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
