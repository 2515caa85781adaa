"""Tensor state: in-place ops on inputs and on views of inputs, ``.data`` / ``detach()``
writes, and outputs that alias inputs or each other, under every backend."""
import pytest
import torch

import kiln

from .harness import check, randn

pytestmark = pytest.mark.filterwarnings("ignore")

BACKENDS = ["eager", "aot_eager", "aten"]
# aliasing is exact under inductor too (values of reductions may round differently there)
ALIAS_BACKENDS = BACKENDS + ["inductor"]


def x6():
    return (randn(6),)


# -- in-place ops on inputs -------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_add_inplace_on_input(backend):
    def f(x):
        x.add_(1)
        return x.sum()
    check(f, x6, backend=backend, graphs=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_setitem_on_input(backend):
    def f(x):
        x[0] = 1
        x[2:4] = x[4:6] * 2
        return x * 1
    check(f, x6, backend=backend, graphs=1)


@pytest.mark.parametrize("backend", ALIAS_BACKENDS)
def test_view_of_input_mutated(backend):
    def f(x):
        v = x.view(2, 3)
        v.mul_(2)
        v[1].zero_()
        return v
    check(f, x6, backend=backend, graphs=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_and_detach_writes(backend):
    def f(x):
        x.data.add_(1)
        x.detach()[1] = 0
        return x + 1
    check(f, lambda: (randn(6, requires_grad=True),), backend=backend, graphs=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_returns_mutated_input_itself(backend):
    def f(x):
        x.mul_(3)
        return x
    check(f, x6, backend=backend, graphs=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mutation_through_transpose_and_slice(backend):
    def f(x):
        x.t()[0].add_(5)
        x[:, 1:].clamp_(min=0)
        return x.sum(0)
    check(f, lambda: (randn(3, 4),), backend=backend, graphs=1)


def test_two_inputs_one_mutated():
    def f(x, y):
        x.add_(y)
        y.sub_(1)
        return x * y
    check(f, lambda: (randn(3), randn(3)), graphs=1)


def test_aliased_inputs_mutation_seen_through_other():
    def f(x, y):
        x.add_(1)
        return y * 2       # y is a view of x: must see the add
    def make():
        x = randn(4)
        return x, x[:2]
    check(f, make, graphs=1)


def test_same_tensor_passed_twice():
    def f(x, y):
        x.mul_(2)
        return x + y
    def make():
        x = randn(4)
        return x, x
    check(f, make, graphs=1)


def test_inplace_on_module_parameter_under_no_grad():
    def f(m, x):
        with torch.no_grad():
            m.weight.mul_(0.5)
        return m(x)
    check(f, lambda: (torch.nn.Linear(3, 3), randn(2, 3)), graphs=1)


def test_inplace_on_tensor_in_list_and_dict():
    def f(l, d, x):
        l[0].add_(x)
        d["t"].mul_(2)
        return l[1]
    check(f, lambda: ([randn(3), randn(3)], {"t": randn(3)}, randn(3)), graphs=1)


def test_inplace_on_global_tensor():
    def f(x):
        GLOBAL_T.add_(x)
        return GLOBAL_T * 1
    saved = GLOBAL_T.clone()
    check(f, lambda: (randn(3),), reset=lambda: GLOBAL_T.copy_(saved), snapshot=lambda: GLOBAL_T.clone(), graphs=1)


GLOBAL_T = torch.zeros(3)


def test_inplace_across_break():
    def f(x):
        x.add_(1)
        print("mid", tuple(x.shape))
        x.mul_(2)
        return x
    check(f, x6, graphs=2)


def test_out_kwarg_into_input():
    def f(x, out):
        torch.add(x, 1, out=out)
        return out * 2
    check(f, lambda: (randn(3), torch.empty(3)), graphs=1)


def test_index_put_and_masked_fill_inplace():
    def f(x, idx):
        x.index_put_((idx,), torch.ones(2))
        x.masked_fill_(x > 0.5, -1.0)
        return x
    check(f, lambda: (randn(5), torch.tensor([0, 3])), graphs=1)


def test_copy_into_input():
    def f(x, y):
        x.copy_(y * 2)
        return x
    check(f, lambda: (randn(3), randn(3)), graphs=1)


# -- outputs that alias inputs or each other --------------------------------------------------

def _caller(inner, backend):
    compiled = kiln.compile(inner, backend=backend)

    def call(x):
        outs = compiled(x)
        first = outs[0] if isinstance(outs, tuple) else outs
        first.mul_(2)          # the caller mutates an output in place
        return x, outs
    return call


@pytest.mark.parametrize("backend", ALIAS_BACKENDS)
def test_output_is_view_of_input(backend):
    def inner(x):
        return x.contiguous().view(1, 4, -1)
    eager_call = _caller(inner, backend)
    def eager(x):
        y = inner(x)
        y.mul_(2)
        return x, y
    for seed in range(2):
        torch.manual_seed(seed)
        a, b = randn(8), None
        b = a.clone()
        ea = eager(a)
        cb = eager_call(b)
        assert torch.equal(ea[0], cb[0]) and torch.equal(ea[1], cb[1])
        assert cb[1].untyped_storage().data_ptr() == cb[0].untyped_storage().data_ptr()


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_is_input_itself(backend):
    def f(x):
        return x, x * 2
    check(f, x6, backend=backend, post=lambda r, i: r[0].add_(1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_views_of_input(backend):
    def f(x):
        return x.view(2, 3), x[1:], x.t() if x.dim() == 2 else x.unsqueeze(0)
    check(f, x6, backend=backend, post=lambda r, i: r[1].add_(1))


@pytest.mark.parametrize("backend", ALIAS_BACKENDS)
def test_outputs_alias_each_other(backend):
    def f(x):
        y = x * 2
        return y, y.view(-1), y[0]
    check(f, lambda: (randn(2, 3),), backend=backend, post=lambda r, i: r[1].add_(1))


@pytest.mark.parametrize("backend", ALIAS_BACKENDS)
def test_outputs_alias_each_other_training(backend):
    def f(x):
        y = x * 2
        return y, y.view(-1)
    def post(r, i):
        r[1].add_(1)
        r[0].sum().backward()
    check(f, lambda: (randn(2, 3, requires_grad=True),), backend=backend, post=post)


@pytest.mark.parametrize("backend", ALIAS_BACKENDS)
def test_mutated_input_returned_as_view(backend):
    def f(x):
        x.add_(1)
        return x.view(-1)[:3]
    check(f, lambda: (randn(2, 3),), backend=backend, post=lambda r, i: r.zero_())


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_view_of_buffer(backend):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(4))

        def forward(self, x):
            self.cache[:2] = x
            return self.cache[1:]
    check(lambda m, x: m(x), lambda: (M(), randn(2)), backend=backend, post=lambda r, i: r.add_(3))


def test_output_alias_across_break():
    def f(x):
        v = x.view(2, 3)
        print("got view")
        return v[0], x
    check(f, x6, post=lambda r, i: r[0].fill_(7))


def test_no_alias_where_eager_has_none():
    def f(x):
        return x.clone(), x + 0, x.contiguous().clone()
    check(f, x6, post=lambda r, i: r[0].add_(1))


# -- aliased inputs under every backend, and refusals that must match eager ----------------------

def _view_pair():
    x = randn(4)
    return x, x[:2]


def _same_pair():
    x = randn(4)
    return x, x


def _disjoint_pair():
    x = randn(4)
    return x[2:], x[:2]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", [_view_pair, _same_pair, _disjoint_pair], ids=["view", "same", "disjoint"])
def test_aliased_inputs_mutated(backend, make):
    def f(x, y):
        x.add_(1)
        return y * 2
    check(f, make, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_aliased_nonleaf_inputs_training(backend):
    def f(x, y):
        y.mul_(2)
        return (x + y.view(-1)).sum()
    def make():
        x = randn(4, requires_grad=True) * 1
        return x, x.view(2, 2)
    check(f, make, backend=backend, post=lambda r, i: r.backward())


def test_tensor_data_assignment():
    def f(x):
        x.data = torch.zeros(3)
        return x + 1
    check(f, lambda: (randn(3),))


def test_inplace_on_leaf_parameter_raises_like_eager():
    def f(p, x):
        p.add_(1)
        return p * x
    for fn in (f, kiln.compile(f)):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            fn(torch.nn.Parameter(torch.ones(3)), torch.ones(3))


def test_version_counter_bumped_like_eager():
    def f(x):
        x.add_(1)
        return x.sum()
    a, b = randn(3), randn(3)
    f(a)
    kiln.compile(f)(b)
    assert a._version == b._version


def test_modified_saved_tensor_detected_in_backward():
    # eager: y saved x for backward, the frame mutates x in place, backward must refuse
    def f(x):
        x.add_(1)
        return x
    for fn in (f, kiln.compile(f)):
        w = randn(3, requires_grad=True)
        x = randn(3)
        y = (w * x).sum()
        fn(x)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()


@pytest.mark.parametrize("backend", BACKENDS)
def test_augmented_assignment_keeps_module_tensors_identity(backend):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.zeros(3))
            self.p = torch.nn.Parameter(torch.ones(3))
            self.t = torch.ones(3)

        def forward(self, x):
            self.b += 1
            self.t += x
            with torch.no_grad():
                self.p += 1
            return x * 2
    m = M()
    ids = (id(m.b), id(m.p), id(m.t))
    kiln.compile(m, backend=backend)(torch.ones(3))
    assert ids == (id(m.b), id(m.p), id(m.t)) and isinstance(m.p, torch.nn.Parameter)
    assert torch.equal(m.b, torch.ones(3)) and torch.equal(m.p, torch.full((3,), 2.0))
    check(lambda mod, x: mod(x), lambda: (M(), randn(3)), backend=backend)


@pytest.mark.parametrize("backend", ALIAS_BACKENDS)
def test_outputs_alias_intermediate_with_offset_and_stride(backend):
    def f(x):
        y = x + 1
        return y, y[1:, ::2], y.t(), y.view(torch.int32)
    check(f, lambda: (randn(4, 6),), backend=backend, post=lambda r, i: r[1].mul_(0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_on_tensors_inside_containers(backend):
    def f(l, d, x):
        l[0].add_(x)
        d["t"].mul_(2)
        d["t"][0] = 5
        return l[1] + 1
    check(f, lambda: ([randn(3), randn(3)], {"t": randn(3)}, randn(3)), backend=backend, graphs=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_on_nonleaf_input_in_training(backend):
    def f(x, w):
        x.mul_(w)
        return (x * 2).sum()
    def make():
        a = randn(3, requires_grad=True)
        return a * 1, randn(3, requires_grad=True)
    check(f, make, backend=backend, post=lambda r, i: r.backward())


@pytest.mark.parametrize("backend", BACKENDS)
def test_kv_cache_style_update(backend):
    class Cache(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("k", torch.zeros(2, 8, 4))
            self.pos = 0

        def forward(self, new):
            n = new.shape[1]
            self.k[:, self.pos:self.pos + n] = new
            self.pos += n
            return self.k[:, :self.pos]
    def f(c, a, b):
        first = c(a)
        second = c(b)
        return first, second
    check(f, lambda: (Cache(), randn(2, 2, 4), randn(2, 3, 4)), backend=backend,
          post=lambda r, i: r[1].mul_(0.5))
