"""Python-level state: attribute writes, container mutation, globals, nonlocals and
objects made in the frame that escape; replayed after the graph, in program order
relative to graph breaks."""
import types

import pytest
import torch

import kiln

from .harness import check, randn

pytestmark = pytest.mark.filterwarnings("ignore")


class Obj:
    def __init__(self, w=None):
        self.w = randn(3) if w is None else w
        self.step = 0


class Empty:
    pass


def obj_and_x():
    return Obj(), randn(3)


# -- attributes of user objects ------------------------------------------------------------

def test_augmented_tensor_attribute():
    def f(o, x):
        o.w += 1          # in place on the tensor: same tensor object, new values
        return x * 2
    check(f, obj_and_x, graphs=1)


def test_rebound_tensor_attribute():
    def f(o, x):
        o.w = o.w + x     # a new tensor stored on the object
        return o.w * 2
    check(f, obj_and_x, graphs=1)


def test_counter_attribute():
    def f(o, x):
        o.step = o.step + 1
        return x + o.step
    check(f, obj_and_x, graphs=1)


def test_cache_attribute_holds_input_itself():
    def f(o, x):
        o.cache = x
        return x + 1
    check(f, obj_and_x, graphs=1)


def test_new_attribute_then_read_back():
    def f(o, x):
        o.extra = x.sum()
        o.extra2 = o.extra * 2
        return o.extra2 + 1
    check(f, obj_and_x, graphs=1)


def test_del_attribute():
    def f(o, x):
        del o.w
        return x + hasattr(o, "w")
    check(f, obj_and_x, graphs=1)


def test_del_then_set_attribute():
    def f(o, x):
        del o.step
        o.step = 7
        return x * o.step
    check(f, obj_and_x, graphs=1)


def test_attribute_written_twice_last_wins():
    def f(o, x):
        o.step = 1
        o.step = o.step + 10
        o.w = x
        o.w = x * 3
        return o.w
    check(f, obj_and_x, graphs=1)


def test_property_setter_is_traced():
    class P:
        def __init__(self):
            self._v = 1

        @property
        def v(self):
            return self._v

        @v.setter
        def v(self, value):
            self._v = value * 10
    def f(p, x):
        p.v = 2
        return x * p.v
    check(f, lambda: (P(), randn(2)), graphs=1)


def test_custom_setattr_is_traced():
    class Logged:
        def __init__(self):
            object.__setattr__(self, "log", [])

        def __setattr__(self, k, v):
            self.log.append(k)
            object.__setattr__(self, k, v * 2 if isinstance(v, int) else v)
    def f(o, x):
        o.n = 3
        o.t = x + 1
        return x * o.n, list(o.log)
    check(f, lambda: (Logged(), randn(2)), graphs=1)


def test_slots_attribute():
    class S:
        __slots__ = ("a", "b")

        def __init__(self):
            self.a = 1
    def f(s, x):
        s.a = s.a + 4
        s.b = x * 2
        return x + s.a
    check(f, lambda: (S(), randn(2)), graphs=1)


def test_simple_namespace_attributes():
    def f(ns, x):
        ns.t = x * 2
        ns.count += 1
        return ns.t
    check(f, lambda: (types.SimpleNamespace(count=0), randn(2)), graphs=1)


def test_nested_object_attribute():
    def f(o, x):
        o.child.w = o.child.w * x
        o.child.step += 1
        return o.child.w
    def make():
        o = Empty()
        o.child = Obj()
        return o, randn(3)
    check(f, make, graphs=1)


# -- nn.Module state ----------------------------------------------------------------------

class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.register_buffer("running", torch.zeros(3))
        self.register_buffer("steps", torch.tensor(0))
        self.plain = torch.ones(3)
        self.calls = 0

    def forward(self, x):
        self.running.mul_(0.9).add_(x.detach(), alpha=0.1)
        self.steps += 1
        self.plain = self.plain * 2
        self.calls = self.calls + 1
        self.last = x.sum()
        return self.lin(x)


def test_module_buffers_plain_tensors_counters():
    check(lambda m, x: m(x), lambda: (Counter(), randn(3)), graphs=1)


def test_module_buffer_reassigned():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", torch.zeros(2))

        def forward(self, x):
            self.buf = self.buf + x
            return self.buf * 2
    def f(m, x):
        y = m(x)
        return y, m.buf
    counter = check(f, lambda: (M(), randn(2)), graphs=1)
    assert counter.frame_count == 1


def test_module_buffer_survives_in_state_dict():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", torch.zeros(2))

        def forward(self, x):
            self.buf = x * 3
            return x
    m = M()
    kiln.compile(m)(torch.ones(2))
    assert "buf" in m.state_dict() and torch.equal(m.buf, torch.full((2,), 3.0))


def test_module_training_step_counter():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.step = 0
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, x):
            self.step = self.step + 1
            return self.lin(x) * self.step
    check(lambda m, x: m(x), lambda: (M(), randn(2)))


# -- containers --------------------------------------------------------------------------

def test_list_append_pop_setitem():
    def f(l, x):
        l.append(x)
        y = l.pop(0)
        l[0] = x * 3
        return y
    check(f, lambda: ([randn(2), randn(2)], randn(2)), graphs=1)


def test_list_extend_insert_remove_reverse():
    def f(l, x):
        l.extend([1, 2])
        l.insert(0, 9)
        l.append(x)
        l.remove(1)
        l.reverse()
        return len(l)
    check(f, lambda: ([5, 6], randn(2)))


def test_list_sort_and_clear_and_slice_assign():
    def f(a, b, x):
        a.sort()
        b[1:] = [x, x + 1]
        c = list(a)
        a.clear()
        return c, x
    check(f, lambda: ([3, 1, 2], [0, 0, 0, 0], randn(2)))


def test_list_del_item():
    def f(l, x):
        del l[1]
        return x + len(l)
    check(f, lambda: ([1, 2, 3], randn(2)))


def test_dict_setitem_update_pop_clear():
    def f(d, e, x):
        d["a"] = x
        d.update(b=1, c=x * 2)
        d.pop("z")
        e.clear()
        return d["c"]
    check(f, lambda: ({"z": 1}, {"k": randn(2)}, randn(2)), graphs=1)


def test_dict_setdefault_del_and_overwrite():
    def f(d, x):
        d.setdefault("n", []).append(x)
        del d["gone"]
        d["keep"] = d["keep"] + 1
        return x
    check(f, lambda: ({"gone": 0, "keep": 1}, randn(2)))


def test_set_add_discard_update():
    def f(s, x):
        s.add(3)
        s.discard(1)
        s.update([7, 8])
        return x * len(s)
    check(f, lambda: ({1, 2}, randn(2)))


def test_nested_list_in_dict():
    def f(d, x):
        inner = d["inner"]
        inner.append(x)
        d["alias"] = inner
        return x
    check(f, lambda: ({"inner": []}, randn(2)))


def test_same_list_through_two_names():
    def f(l, x):
        l2 = l
        l2.append(x)
        l.append(x + 1)
        return l is l2, len(l2)
    check(f, lambda: ([], randn(2)))


def test_same_list_passed_twice():
    def f(a, b, x):
        a.append(x)
        b.append(len(a))
        return b
    def make():
        l = []
        return l, l, randn(2)
    check(f, make)


def test_list_attribute_of_object():
    def f(o, x):
        o.items.append(x * 2)
        o.items[0] = o.items[0] + 1
        return len(o.items)
    def make():
        o = Empty()
        o.items = [randn(2)]
        return o, randn(2)
    check(f, make)


# -- globals and closures -------------------------------------------------------------------

G_LIST: list = []
G_DICT: dict = {}
G_COUNT = 0
G_TENSOR = torch.zeros(2)


def reset_globals():
    global G_COUNT, G_TENSOR
    G_LIST.clear()
    G_DICT.clear()
    G_COUNT = 0
    G_TENSOR = torch.zeros(2)


def snap_globals():
    return [list(G_LIST), dict(G_DICT), G_COUNT, G_TENSOR.clone()]


def test_global_list_and_dict():
    def f(x):
        G_LIST.append(x + 1)
        G_DICT["n"] = len(G_LIST)
        return x
    check(f, lambda: (randn(2),), reset=reset_globals, snapshot=snap_globals, graphs=1)


def test_global_statement_counter():
    def f(x):
        global G_COUNT
        G_COUNT += 1
        return x * G_COUNT
    check(f, lambda: (randn(2),), reset=reset_globals, snapshot=snap_globals, graphs=1)


def test_global_tensor_rebound_and_mutated():
    def f(x):
        global G_TENSOR
        G_TENSOR.add_(x)
        G_TENSOR = G_TENSOR * 2
        return G_TENSOR
    check(f, lambda: (randn(2),), reset=reset_globals, snapshot=snap_globals, graphs=1)


def test_global_new_name():
    def f(x):
        global G_NEW
        G_NEW = x * 2
        return x
    def snap():
        return globals().get("G_NEW")
    check(f, lambda: (randn(2),), reset=lambda: globals().pop("G_NEW", None), snapshot=snap, graphs=1)


def _make_counter():
    state = {"n": 0, "t": None}

    def outer():
        n = 0
        t = torch.zeros(2)

        def inner(x):
            nonlocal n, t
            n += 1
            t = t + x
            return x * n, t
        return inner
    return outer


def test_nonlocal_writes():
    outer = _make_counter()
    holder = {}

    def reset():
        holder["fn"] = outer()

    def call(x):
        return holder["fn"](x)
    # the same closure is compiled and called twice: the second call sees the first's writes
    for run in range(2):
        reset()
        fn = holder["fn"]
        cf = kiln.compile(fn)
        eager = outer()
        a1, a2 = eager(torch.ones(2)), eager(torch.ones(2))
        b1, b2 = cf(torch.ones(2)), cf(torch.ones(2))
        for p, q in zip(a1 + a2, b1 + b2):
            assert torch.equal(p, q)
        assert eager.__closure__[0].cell_contents == fn.__closure__[0].cell_contents == 2


# -- objects made in the frame that escape --------------------------------------------------

def test_new_object_returned():
    def f(x):
        o = Empty()
        o.t = x * 2
        o.n = 3
        return o
    check(f, lambda: (randn(2),), graphs=1)


def test_new_object_stored_in_input_list_then_mutated():
    def f(l, x):
        o = Empty()
        o.t = x * 2
        l.append(o)
        o.u = 3          # after it became reachable: still seen
        return x
    check(f, lambda: ([], randn(2)), graphs=1)


def test_new_object_stored_on_input_attribute():
    def f(holder, x):
        o = Obj(w=x * 2)
        holder.child = o
        o.w.add_(1)
        return o
    check(f, lambda: (Empty(), randn(2)), graphs=1)


def test_new_list_and_dict_escape_to_global():
    def f(x):
        G_DICT["made"] = {"list": [x, x + 1], "n": 1}
        return x
    check(f, lambda: (randn(2),), reset=reset_globals, snapshot=snap_globals, graphs=1)


def test_new_object_shared_by_two_places_stays_one_object():
    def f(a, b, x):
        o = Empty()
        o.t = x
        a.append(o)
        b.append(o)
        return x
    counter = check(f, lambda: ([], [], randn(2)))
    l1, l2 = [], []
    kiln.compile(f)(l1, l2, torch.ones(2))
    assert l1[0] is l2[0]


def test_escaping_closure():
    def f(l, x):
        y = x * 2
        l.append(lambda: y)
        return x
    def make():
        return [], randn(2)
    cf = kiln.compile(f)
    l1, l2 = [], []
    x = torch.ones(2)
    f(l1, x), cf(l2, x)
    assert torch.equal(l1[0](), l2[0]())


# -- program order across graph breaks ------------------------------------------------------

def test_list_mutations_ordered_with_prints():
    def f(l, x):
        l.append(1)
        print("after 1", len(l))
        l.append(x * 2)
        kiln.graph_break()
        l.append(3)
        print("after 3", len(l))
        return l
    check(f, lambda: ([], randn(2)))


def test_attribute_writes_ordered_with_break():
    def f(o, x):
        o.step = 1
        print("step", o.step)
        o.step = o.step + 1
        kiln.graph_break()
        o.w = o.w + x
        print("w", o.w.shape)
        o.step = o.step * 10
        return o.w
    check(f, obj_and_x, graphs=1)   # the graph of the last part: the rest is Python-only


def test_global_write_visible_to_python_at_break():
    def peek():
        print("count is", G_COUNT, "list", len(G_LIST))
    def f(x):
        global G_COUNT
        G_COUNT = 5
        G_LIST.append(x)
        peek_break = kiln.graph_break
        peek_break()
        peek()
        G_COUNT = G_COUNT + 1
        return x
    check(f, lambda: (randn(2),), reset=reset_globals, snapshot=snap_globals)


def test_object_read_by_printing_at_break():
    class Show:
        def __init__(self):
            self.n = 0

        def __repr__(self):
            return f"Show(n={self.n})"
    def f(s, x):
        s.n = 1
        print(s)
        s.n = 2
        print(s)
        return x + s.n
    check(f, lambda: (Show(), randn(2)))


def test_dict_mutation_across_two_breaks():
    def f(d, x):
        d["a"] = 1
        kiln.graph_break()
        d["b"] = x
        kiln.graph_break()
        d.pop("a")
        return d
    check(f, lambda: ({}, randn(2)))


# -- classes, Python modules, identity ---------------------------------------------------------

class Klass:
    count = 0


def test_class_attribute_counter_read_back():
    def f(x):
        Klass.count += 1
        Klass.count += 1
        return x * Klass.count
    def reset():
        Klass.count = 0
    counter = check(f, lambda: (randn(2),), reset=reset, snapshot=lambda: Klass.count, graphs=1)


def test_new_class_attribute_and_del():
    def f(x):
        Klass.tmp = x * 2
        y = Klass.tmp + 1
        del Klass.tmp
        return y, hasattr(Klass, "tmp")
    check(f, lambda: (randn(2),), snapshot=lambda: hasattr(Klass, "tmp"), graphs=1)


PYMOD = types.ModuleType("pymod")
PYMOD.flag = 0


def test_python_module_attribute():
    def f(x):
        PYMOD.flag = PYMOD.flag + 1
        PYMOD.last = x
        return x * PYMOD.flag
    def reset():
        PYMOD.flag = 0
        PYMOD.__dict__.pop("last", None)
    check(f, lambda: (randn(2),), reset=reset, snapshot=lambda: (PYMOD.flag, getattr(PYMOD, "last", None)),
          graphs=1)


def test_new_object_escapes_then_break_then_mutated():
    def f(x):
        o = Empty()
        G_DICT["o"] = o
        kiln.graph_break()
        o.x = x + 1
        return o.x
    check(f, lambda: (randn(2),), reset=reset_globals, snapshot=lambda: vars(G_DICT["o"]))


def test_mutated_input_list_returned_is_the_same_object():
    def f(l, x):
        l.append(x)
        return l
    l = []
    assert kiln.compile(f)(l, torch.ones(2)) is l and len(l) == 1


def test_tensor_used_as_dict_key():
    def f(d, x):
        d[x] = x.sum()
        return len(d)
    d, x = {}, torch.ones(2)
    kiln.compile(f)(d, x)
    assert list(d)[0] is x and torch.equal(d[x], torch.tensor(2.0))


def test_rewrite_list_items_in_loop():
    def f(l, x):
        for i, t in enumerate(l):
            l[i] = t * 2 + x
        return x
    check(f, lambda: ([randn(2), randn(2)], randn(2)), graphs=1)


# -- in-place operators on containers, __dict__ --------------------------------------------------

def test_inplace_operators_mutate_the_container():
    def f(l, m, d, s, t, x):
        l += [x]
        m *= 2
        d |= {"k": x}
        s |= {3}
        t -= {1}
        return x
    check(f, lambda: ([], [1], {}, {1}, {1, 2}, randn(2)))


def test_inplace_operator_on_aliased_list():
    def f(l, x):
        alias = l
        alias += [x, 1]
        alias *= 2
        return len(l)
    check(f, lambda: ([0], randn(2)))


def test_setattr_delattr_builtins():
    def f(o, x):
        setattr(o, "b", x)
        delattr(o, "step")
        return x + hasattr(o, "step")
    check(f, obj_and_x, graphs=1)


def test_attribute_write_then_dict_read():
    def f(o, x):
        o.step = 7
        return x * o.__dict__["step"]
    check(f, obj_and_x)


def test_dict_write_then_attribute_write_and_read():
    def f(o, x):
        o.step = 6
        vars(o)["step"] = 5
        return x * o.step
    check(f, obj_and_x)


def test_writes_in_try_before_raise_persist():
    def f(l, x):
        try:
            l.append(1)
            raise ValueError
        except ValueError:
            l.append(2)
        return x
    check(f, lambda: ([], randn(2)))


# -- all kinds of writes interleaved with breaks that read them ------------------------------------

class Box:
    def __init__(self):
        self.v = 0

    def __repr__(self):
        return f"Box({self.v})"


def _report(tag, box, items):
    print(tag, box, len(items), G_COUNT, sorted(G_DICT))


def test_mixed_writes_seen_in_order_by_python_at_breaks():
    def f(box, items, x):
        global G_COUNT
        box.v = 1
        items.append("a")
        G_COUNT = 10
        G_DICT["first"] = x
        _report("one", box, items)            # a print inside: the callee breaks
        box.v = box.v + 1
        items.pop()
        G_COUNT += 1
        kiln.graph_break()
        _report("two", box, items)
        made = Box()
        made.v = 99
        items.append(made)
        G_DICT["made"] = made
        _report("three", box, items)
        return x * G_COUNT
    check(f, lambda: (Box(), [], randn(2)), reset=reset_globals,
          snapshot=lambda: (G_COUNT, sorted(G_DICT), G_DICT.get("made") is not None))


def test_new_object_carried_across_break_then_mutated():
    def f(x):
        o = Box()
        o.v = x
        print("made", type(o).__name__)
        o.v = o.v + 1
        o.extra = [o.v]
        return o
    check(f, lambda: (randn(2),))


def test_same_new_object_in_two_containers_across_break():
    def f(a, b, x):
        o = Box()
        a.append(o)
        print("break")
        b.append(o)
        o.v = x
        return a[0] is b[0]
    check(f, lambda: ([], [], randn(2)))


# -- closures made in the frame ------------------------------------------------------------------

def test_nonlocal_of_frame_local():
    def f(x):
        n = 0

        def inc():
            nonlocal n
            n += 1
        inc()
        inc()
        return x * n
    check(f, lambda: (randn(2),), graphs=1)


def test_escaping_closure_keeps_shared_cell():
    def f(l, x):
        n = 0

        def inc():
            nonlocal n
            n += 1
            return n

        def get():
            return n
        inc()
        l.append(inc)
        l.append(get)
        return x * n
    a, b = [], []
    r1, r2 = f(a, torch.ones(2)), kiln.compile(f)(b, torch.ones(2))
    assert torch.equal(r1, r2)
    for l in (a, b):
        l[0]()
        l[0]()
    assert a[1]() == b[1]() == 3


def test_generator_consumed_in_frame_mutates_list():
    def f(l, x):
        def gen():
            for i in range(3):
                l.append(i)
                yield i
        total = sum(gen())
        return x * total
    check(f, lambda: ([], randn(2)))


def test_list_comprehension_calls_mutating_method():
    def f(d, x):
        [d.__setitem__(k, x * k) for k in range(3)]
        return len(d)
    check(f, lambda: ({}, randn(2)))
