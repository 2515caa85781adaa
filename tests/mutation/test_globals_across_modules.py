"""Globals of other modules: one store per module.

A module's globals and its attributes are one dict.  A compiled frame may change it by
``global`` in a function it inlines, through the module object (``mod.x = v``,
``setattr``, ``mod.__dict__[k] = v``), or two modules down; every later read, whichever
way it reads (LOAD_GLOBAL in any of the module's functions, ``mod.x``, ``getattr``,
``from mod import x``, ``mod.__dict__[k]``), must see the write, and the glue must leave
the module as eager does.  (PyTorch's Dynamo tests have the first case as
``test_globals_change_in_other_file``.)

Each test runs the function eagerly and compiled over three calls from the same module
state (``globals_other.reset()``), so the module's globals move from call to call, and
compares every result and the helper modules' globals after every call.
"""
from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops.map import map as hop_map

import kiln
from kiln.backends.registry import lookup
from kiln.testing import CompileCounter

from . import globals_inner as inner
from . import globals_lazy as lazy
from . import globals_other as other
from .harness import assert_same

BACKENDS = ["eager", "aot_eager"]


class Counter(CompileCounter):
    """CompileCounter whose graphs then run through a named backend."""

    def __init__(self, backend: str):
        super().__init__()
        self.backend = None if backend == "eager" else lookup(backend)
        self.applies_input_mutations_last = getattr(self.backend, "applies_input_mutations_last", False)

    def __call__(self, gm, example_inputs):
        forward = super().__call__(gm, example_inputs)
        return forward if self.backend is None else self.backend(gm, example_inputs)


def module_state() -> dict:
    """The helper modules' globals the tests touch, and the order of the names."""
    d = vars(other)
    return {"names": [k for k in d if not k.startswith("__")], "_variable": other._variable,
            "scale": other.scale, "hits": list(other.hits), "added": {k: d[k] for k in other.ADDED if k in d},
            "inner.level": inner.level}


def compare(fn, backend, *, graphs, ops=None, fullgraph=True, calls=3):
    kiln.reset()
    counter = Counter(backend)
    compiled = kiln.compile(fn, backend=counter, fullgraph=fullgraph)
    torch.manual_seed(0)
    inputs = [torch.randn(3) for _ in range(calls)]
    other.reset()
    try:
        expected = [(fn(x.clone()), module_state()) for x in inputs]
        other.reset()
        actual = [(compiled(x.clone()), module_state()) for x in inputs]
    finally:
        other.reset()
    for i, ((e, e_state), (a, a_state)) in enumerate(zip(expected, actual)):
        assert_same(e, a, f"call {i}: result")
        assert_same(e_state, a_state, f"call {i}: module globals")
    assert counter.frame_count == graphs, f"{counter.frame_count} graphs, expected {graphs}"
    if ops is not None:
        assert counter.op_count == ops, f"{counter.op_count} ops, expected {ops}"
    return counter


# -- a callee's `global` write, read back every way ---------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_callee_write_seen_through_module_attribute(backend):
    # the case; _variable is 0, 1, 2 at entry: one entry per value
    def fn(x):
        a = other.update_global(x)
        return x * a * other._variable
    compare(fn, backend, graphs=3, ops=9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_callee_write_seen_by_getattr_and_imports(backend):
    def fn(x):
        from . import globals_other as o   # a module imported inside the frame
        o.update_global(x)
        from .globals_other import _variable
        return x * getattr(other, "_variable") + _variable + getattr(o, "missing", 0.5)
    compare(fn, backend, graphs=3, ops=12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_callee_write_seen_through_module_dict(backend):
    def fn(x):
        other.update_global(x)
        d = other.__dict__
        return x * d["_variable"] + d.get("scale") + d.get("brand_new", 2.0) + ("brand_new" in d)
    compare(fn, backend, graphs=3, ops=15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_callee_write_seen_by_the_modules_other_functions(backend):
    def fn(x):
        before = other.read_variable(x)
        other.update_global(x)
        return before + other.read_variable(x) + other.reader()(x)
    compare(fn, backend, graphs=3, ops=18)


# -- writes through the module object, read by its functions ------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_module_attribute_write_seen_by_callees(backend):
    def fn(x):
        y = other.read_scale(x)
        other.scale = other.scale + 2.0
        other._variable = other._variable + 5
        return y + other.read_scale(x) + other.read_variable(x) + other.reader()(x)
    compare(fn, backend, graphs=3, ops=21)


@pytest.mark.parametrize("backend", BACKENDS)
def test_setattr_and_module_dict_writes_seen_by_callees(backend):
    def fn(x):
        setattr(other, "scale", 2.5)
        y = other.read_scale(x)
        other.__dict__["_variable"] = other._variable + 3
        return y + other.read_variable(x)
    compare(fn, backend, graphs=3, ops=9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_both_ways_last_one_wins(backend):
    def fn(x):
        other.scale = 2.0
        other.set_scale(other.scale * 3)
        y = other.read_scale(x)
        other.scale = other.scale + 1
        return y + x * other.scale + other.read_scale(x)
    compare(fn, backend, graphs=1, ops=5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_names_reach_the_module_in_program_order(backend):
    def fn(x):
        other.second_new = 1
        other.update_global(x)
        other.first_new = other._variable
        other.brand_new = x * 2
        return other.read_variable(x) + other.brand_new
    compare(fn, backend, graphs=3, ops=12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_callee_rebinds_a_global_list(backend):
    def fn(x):
        old = other.hits
        y = other.rebind_hits(x)
        old.append(len(other.hits))   # the list the module held before: eager changes it, not the new one
        return y + len(other.hits) + len(old), old
    compare(fn, backend, graphs=3, ops=9)


# -- two modules deep --------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_write_two_modules_down_seen_by_the_frame(backend):
    def fn(x):
        y = other.bump_inner(x)
        return y + other.globals_inner.level + inner.read(x)
    compare(fn, backend, graphs=3, ops=21)


@pytest.mark.parametrize("backend", BACKENDS)
def test_frame_writes_two_modules_down(backend):
    def fn(x):
        other.globals_inner.level = other.globals_inner.level + 4
        other.set_inner(inner.level + 1)
        return other.bump_inner(x) + inner.read(x)
    compare(fn, backend, graphs=3, ops=18)


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_dict_kept_as_a_global_is_the_modules_store(backend):
    def fn(x):
        g = other.inner_globals
        y = other.bump_inner(x) * g["level"]
        g["level"] = g["level"] + 7
        return y + inner.read(x) + other.globals_inner.level
    compare(fn, backend, graphs=3, ops=24)


# -- graph breaks --------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_write_before_a_break_read_after_it(backend):
    def fn(x):
        a = other.update_global(x)
        other.scale = 3.0
        kiln.graph_break()
        return x * a * other._variable + other.read_scale(x)
    # the part before the break reads _variable only to add 1 (the glue does it): one
    # graph; after it, _variable meets a tensor: baked, then a graph input once it varies
    compare(fn, backend, graphs=3, ops=9, fullgraph=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_read_before_a_break_write_after_it(backend):
    def fn(x):
        y = x * other._variable
        kiln.graph_break()
        other.update_global(x)
        return y + other.read_variable(x) + other._variable
    # before the break: baked, then an input once it varies (2 graphs); after it the
    # callee's _variable + 1 meets tensors, baked on each call's value (3 graphs)
    compare(fn, backend, graphs=5, ops=14, fullgraph=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_deleting_a_module_global_is_a_clear_break(backend):
    def fn(x):
        other.brand_new = x + 1
        y = other.brand_new * 2
        del other.brand_new
        return y + x * hasattr(other, "brand_new")
    with pytest.raises(kiln.Unsupported, match="deleting attribute 'brand_new' of module tests.mutation.globals_other"):
        kiln.compile(fn, backend="eager", fullgraph=True)(torch.randn(3))
    other.reset()
    # the del runs as Python at the break, after the glue wrote brand_new
    compare(fn, backend, graphs=2, ops=4, fullgraph=False)


# -- higher-order operator bodies -----------------------------------------------------------------

MAP_MSG = r"`{stmt}` mutates `{target}` inside the body of `map`"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fullgraph", [True, False])
def test_global_write_in_a_map_body_is_refused(backend, fullgraph):
    def fn(xs):
        def body(x):
            return other.update_global(x)
        return hop_map(body, xs)
    other.reset()
    with pytest.raises(kiln.Unsupported, match=MAP_MSG.format(stmt=r"_variable \+= 1", target="_variable")):
        kiln.compile(fn, backend=Counter(backend), fullgraph=fullgraph)(torch.randn(3, 2))
    assert other._variable == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fullgraph", [True, False])
def test_module_attribute_write_in_a_map_body_is_refused(backend, fullgraph):
    def fn(xs):
        def body(x):
            other.scale = 2.0
            return x * 2
        return hop_map(body, xs)
    other.reset()
    with pytest.raises(kiln.Unsupported, match=MAP_MSG.format(stmt=r"other\.scale = 2\.0", target=r"other\.scale")):
        kiln.compile(fn, backend=Counter(backend), fullgraph=fullgraph)(torch.randn(3, 2))
    assert other.scale == 1.0


# -- guards ----------------------------------------------------------------------------------------

def test_guards_name_the_module_and_are_shared_by_both_reads():
    def fn(x):
        return other.read_variable(x) + other._variable
    kiln.reset()
    counter = Counter("eager")
    compiled = kiln.compile(fn, backend=counter, fullgraph=True)
    other.reset()
    try:
        x = torch.randn(3)
        assert torch.equal(compiled(x), fn(x))
        (entry,) = compiled.entries
        # one guard for the global, read by LOAD_GLOBAL in read_variable and as other._variable
        assert entry.guard_source.count("['_variable']") == 1
        other._variable = 7
        assert entry.explain_guard(fn, x) == \
            "global '_variable' of module tests.mutation.globals_other: 0 -> 7"
        assert torch.equal(compiled(x), fn(x))
        assert counter.frame_count == 2
    finally:
        other.reset()


def test_missing_module_attribute_is_guarded():
    def fn(x):
        return x * getattr(other, "brand_new", 3)
    kiln.reset()
    counter = Counter("eager")
    compiled = kiln.compile(fn, backend=counter, fullgraph=True)
    other.reset()
    try:
        x = torch.randn(3)
        for value in (None, 5, None):
            if value is not None:
                other.brand_new = value
            assert torch.equal(compiled(x), fn(x))
            other.reset()
        assert counter.frame_count == 2
    finally:
        other.reset()


@pytest.mark.parametrize("backend", BACKENDS)
def test_lazy_module_global_made_on_first_read(backend):
    # the first read makes the global (at trace time, as eager's first call does); it is
    # then guarded where it lives, so later calls reuse the entry
    def fn(x):
        return x * lazy.table + getattr(lazy, "absent", 1.0)
    kiln.reset()
    counter = Counter(backend)
    compiled = kiln.compile(fn, backend=counter, fullgraph=True)
    xs = [torch.randn(3) for _ in range(3)]
    lazy.reset()
    expected = [(fn(x), list(lazy.made)) for x in xs]
    lazy.reset()
    try:
        actual = [(compiled(x), list(lazy.made)) for x in xs]
    finally:
        lazy.reset()
    assert_same(expected, actual, "results and the module's log")
    assert (counter.frame_count, counter.op_count) == (1, 2)
