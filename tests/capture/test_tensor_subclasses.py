"""Tensor subclasses: ``__torch_function__`` subclasses are traced with their overrides
run at trace time as eager runs them (side effects, result types, gradients); wrapper
subclasses are refused with a message naming them."""
import pytest
import torch

import kiln
from kiln.backends.registry import lookup
from kiln.testing import CompileCounter, assert_same_as_eager

BACKENDS = ["eager", "aot_eager"]
LOG = []


class Logged(torch.Tensor):
    """Logs the name of every torch call made on it."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        LOG.append(func.__name__)
        return super().__torch_function__(func, types, args, kwargs or {})

    def doubled(self):
        return self * 2


class Counted(torch.Tensor):
    calls = [0]

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls[0] += 1
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
        return out.as_subclass(cls) if isinstance(out, torch.Tensor) else out


class CountingAot(CompileCounter):
    """Counts graphs, then compiles them with aot_eager."""

    def __call__(self, gm, example_inputs):
        super().__call__(gm, example_inputs)
        return lookup("aot_eager")(gm, example_inputs)


def _counter(backend):
    return CompileCounter() if backend == "eager" else CountingAot()


def _check(fn, make_inputs, backend, graphs=1, grad=False):
    counter = _counter(backend)
    compiled = kiln.compile(fn, backend=counter, fullgraph=True)
    for seed in range(2):
        torch.manual_seed(seed)
        e_in = make_inputs()
        torch.manual_seed(seed)
        c_in = make_inputs()
        LOG.clear()
        eager = fn(*e_in)
        eager_log = list(LOG)
        LOG.clear()
        got = compiled(*c_in)
        assert LOG == eager_log
        assert_same_as_eager(eager, got)
        assert [type(t) for t in _flat(got)] == [type(t) for t in _flat(eager)]
        for a, b in zip(e_in, c_in):    # inputs changed in place alike
            assert type(a) is type(b)
            torch.testing.assert_close(a, b)
        if grad:
            sum(t.sum() for t in _flat(eager) if isinstance(t, torch.Tensor)).backward()
            sum(t.sum() for t in _flat(got) if isinstance(t, torch.Tensor)).backward()
            for a, b in zip(e_in, c_in):
                if isinstance(a, torch.Tensor) and a.requires_grad:
                    assert a.grad is not None and type(b.grad) is type(a.grad)
                    torch.testing.assert_close(a.grad, b.grad)
    assert counter.frame_count == graphs
    return counter


def _flat(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _logged(*shape, requires_grad=False):
    with torch._C.DisableTorchFunctionSubclass():
        return torch.randn(*shape).as_subclass(Logged).requires_grad_(requires_grad)   # a leaf


@pytest.mark.parametrize("backend", BACKENDS)
def test_override_runs_per_op_with_eagers_funcs_and_types(backend):
    def f(x, y):
        z = x * 2 + y
        return z.sum(), x.shape[0], torch.relu(z), 1 - x, y + x
    counter = _check(f, lambda: (_logged(3), torch.randn(3)), backend)
    assert counter.op_count >= 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_through_subclass_inputs(backend):
    def f(x, w):
        return (x @ w).tanh()
    _check(f, lambda: (_logged(2, 3, requires_grad=True), torch.randn(3, 4, requires_grad=True)), backend, grad=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_subclass_made_in_the_frame_and_its_own_method(backend):
    def f(x):
        y = (x + 1).as_subclass(Logged)
        return y.doubled(), type(y) is Logged, isinstance(y * 3, Logged)
    _check(f, lambda: (torch.randn(4),), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_override_that_disables_dispatch_itself(backend):
    def f(x):
        return (x.sin() * 2).sum(dim=0)
    counter = _counter(backend)
    compiled = kiln.compile(f, backend=counter, fullgraph=True)
    for _ in range(2):
        x = torch.randn(3, 2).as_subclass(Counted)
        Counted.calls[0] = 0
        eager = f(x)
        n = Counted.calls[0]
        Counted.calls[0] = 0
        got = compiled(x)
        assert Counted.calls[0] == n == 3
        assert type(got) is Counted
        torch.testing.assert_close(eager, got)
    assert counter.frame_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_disable_torch_function_subclass_in_the_frame(backend):
    def f(x):
        with torch._C.DisableTorchFunctionSubclass():
            y = x + 1
        return y, x * 2
    _check(f, lambda: (_logged(3),), backend)


def test_guarded_on_the_subclass_type():
    counter = CompileCounter()
    compiled = kiln.compile(lambda x: x + 1, backend=counter)
    a = compiled(_logged(3))
    b = compiled(torch.randn(3))
    assert type(a) is Logged and type(b) is torch.Tensor
    assert counter.frame_count == 2


def _two(*shape, requires_grad=False):
    from torch.testing._internal.two_tensor import TwoTensor
    return TwoTensor(torch.randn(*shape, requires_grad=requires_grad), torch.randn(*shape, requires_grad=requires_grad))


@pytest.mark.parametrize("backend", BACKENDS)
def test_traceable_wrapper_subclass_inputs_forward_and_backward(backend):
    def f(x, y):
        z = x * 2 + y
        return z.sin(), z.sum()
    counter = _check(f, lambda: (_two(3, requires_grad=True), torch.randn(3)), backend, grad=True)
    assert counter.op_count == 4


def test_wrapper_subclass_guards_its_inner_tensors():
    counter = CompileCounter()
    compiled = kiln.compile(lambda x: x * 2, backend=counter)
    for t in (_two(3), _two(3), _two(4), torch.randn(4)):
        got = compiled(t)
        assert type(got) is type(t)
    assert counter.frame_count == 3     # a new inner shape and a plain tensor recompile


def test_jagged_nested_tensor_input_is_refused_by_name():
    t = torch.nested.nested_tensor([torch.randn(2), torch.randn(3)], layout=torch.jagged)
    explained = kiln.explain(lambda x: x * 2)(t)
    assert "NestedTensor" in str(explained) and "__torch_dispatch__" in str(explained)


class TaggedParameter(torch.nn.Parameter):
    """A Parameter subclass with an extra attribute (set per instance) and a method."""

    def scaled(self, t):
        return t * self.scale


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = TaggedParameter(torch.randn(4, 3))
        self.weight.scale = 0.5

    def forward(self, x):
        w = self.weight
        return self.weight.scaled(x @ w.t()), w.scale, type(w) is TaggedParameter


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameter_subclass_attribute_reads(backend):
    torch.manual_seed(0)
    model = Scaled()
    counter = _counter(backend)
    compiled = kiln.compile(model, backend=counter, fullgraph=True)
    for _ in range(2):
        x = torch.randn(2, 3)
        eager, got = model(x), compiled(x)
        assert_same_as_eager(eager, got)
        eager[0].sum().backward()
        g = model.weight.grad.clone()
        model.weight.grad = None
        got[0].sum().backward()
        torch.testing.assert_close(model.weight.grad, g)
        model.weight.grad = None
    assert counter.frame_count == 1
    model.weight.scale = 2.0     # the attribute is guarded: a new value recompiles
    x = torch.randn(2, 3)
    assert_same_as_eager(model(x), compiled(x))
    assert counter.frame_count == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_getters_len_indexing_and_lists_dispatch_like_eager(backend):
    def f(x, y):
        a, b, c, d = x.T, len(x), x[0], torch.cat([x, y])
        h, k = x.unbind(0)
        return a, b, c, d, x.size(0), x.dim(), h, k, x.unsqueeze(0).mean(dim=-1, keepdim=True)
    _check(f, lambda: (_logged(2, 2), torch.randn(2, 2)), backend)


class Printing(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        print("called", func.__name__)
        return super().__torch_function__(func, types, args, kwargs or {})


def test_prints_in_the_override_match_eager(capsys):
    """print() is a graph break in Kiln: inside an override too, where the call runs as
    Python with eager's output (never printed twice, never missed)."""
    def f(x):
        return (x + 1).relu()
    counter = CompileCounter()
    compiled = kiln.compile(f, backend=counter)
    for _ in range(2):
        x = torch.randn(3).as_subclass(Printing)
        capsys.readouterr()    # (the comparisons below print too)
        eager = f(x)
        printed = capsys.readouterr().out
        got = compiled(x)
        assert capsys.readouterr().out == printed == "called add\ncalled relu\n"
        assert type(got) is Printing
        torch.testing.assert_close(eager, got)


class LoggedLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 3).as_subclass(Logged))   # a Logged leaf

    def forward(self, x):
        out = torch.nn.functional.linear(x, self.w)
        return out, torch.overrides.has_torch_function((x,)), torch.overrides.is_tensor_like(out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameter_of_a_torch_function_subclass(backend):
    torch.manual_seed(0)
    model = LoggedLinear()
    counter = _counter(backend)
    compiled = kiln.compile(model, backend=counter, fullgraph=True)
    for _ in range(2):
        x = torch.randn(2, 3)
        LOG.clear()
        eager = model(x)
        eager_log = list(LOG)
        LOG.clear()
        got = compiled(x)
        assert LOG == eager_log == ["linear"]
        assert_same_as_eager(eager, got)
        assert type(got[0]) is Logged
        eager[0].sum().backward()
        g, model.w.grad = model.w.grad, None
        got[0].sum().backward()
        torch.testing.assert_close(model.w.grad, g)
        model.w.grad = None
    assert counter.frame_count == 1 and counter.op_count == 1


def _two_tensor_in_frame(a, b):
    from torch.testing._internal.two_tensor import TwoTensor
    return (TwoTensor(a, b) * 2).a + 1


def _jagged_in_frame(a, b):
    return (torch.nested.nested_tensor([a, b], layout=torch.jagged) * 2).values()


@pytest.mark.parametrize("fn, named", [(_jagged_in_frame, "NestedTensor")])
def test_wrapper_subclasses_made_in_the_frame_break_cleanly(fn, named):
    a, b = torch.randn(3), torch.randn(3)
    with pytest.warns(UserWarning):      # the frame runs as Python: eager's result
        got = kiln.compile(fn, backend="eager")(a, b)
    torch.testing.assert_close(got, fn(a, b))
    with pytest.raises(kiln.exc.Unsupported, match=named):
        kiln.compile(fn, backend="eager", fullgraph=True)(a, b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_ops_and_instance_attributes_of_inputs(backend):
    def f(x, y):
        x.add_(1)
        y.mul_(2)
        return x * y, x.unit

    def inputs():
        x = _logged(3)
        x.unit = "m"
        return x, torch.randn(3)
    _check(f, inputs, backend)
