"""The public API: compile forms, compiled modules behaving as modules, clear errors."""
import warnings

import pytest
import torch

import kiln
from kiln.testing import CompileCounter


def f(x, y=2):
    return x * y + 1


def test_call_and_decorator_forms():
    cc = CompileCounter()
    x = torch.randn(4)
    assert torch.equal(kiln.compile(f, backend=cc)(x), f(x))

    @kiln.compile
    def g(x):
        return x.sin()

    @kiln.compile(backend=cc, fullgraph=True)
    def h(x):
        return x.cos()

    assert torch.equal(g(x), x.sin())
    assert torch.equal(h(x), x.cos())
    assert cc.frame_count == 2


def test_compile_bound_method_and_callable_object():
    class Scaler:
        def __init__(self):
            self.k = 3.0

        def scale(self, x):
            return x * self.k

        def __call__(self, x):
            return x + self.k

    s = Scaler()
    cc = CompileCounter()
    x = torch.randn(3)
    assert torch.equal(kiln.compile(s.scale, backend=cc)(x), s.scale(x))
    assert torch.equal(kiln.compile(s, backend=cc)(x), s(x))
    assert cc.frame_count == 2


@pytest.mark.parametrize("bad", [3, "string", None])
def test_non_callable_is_type_error(bad):
    if bad is None:
        # kiln.compile(None) is the decorator form with defaults
        assert callable(kiln.compile(None))
        return
    with pytest.raises(TypeError, match="expects a function"):
        kiln.compile(bad)


def test_c_function_is_type_error():
    with pytest.raises(TypeError, match="not Python code"):
        kiln.compile(len)


def test_unknown_backend_lists_known():
    with pytest.raises(ValueError, match="known backends: .*eager"):
        kiln.compile(f, backend="no_such_backend")


def test_wrong_option_types():
    with pytest.raises(TypeError, match="fullgraph must be a bool"):
        kiln.compile(f, fullgraph="yes")
    with pytest.raises(TypeError, match="backend must be"):
        kiln.compile(f, backend=42)
    with pytest.raises(TypeError, match="unexpected option"):
        kiln.compile(f, nonsense=1)


def test_config_is_type_checked():
    with pytest.raises(TypeError):
        kiln.config.recompile_limit = "8"
    with pytest.raises(AttributeError, match="no setting"):
        kiln.config.recompile_limti = 3
    with pytest.raises(ValueError):
        kiln.config.logs = "graph,nonsense"


def test_wrong_arguments_raise_like_eager():
    cf = kiln.compile(f)
    with pytest.raises(TypeError):
        cf()
    with pytest.raises(TypeError):
        cf(torch.randn(2), 1, 2)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.drop = torch.nn.Dropout(0.5)
        self.register_buffer("offset", torch.ones(3))

    def forward(self, x):
        return self.drop(self.lin(x)) + self.offset

    def helper(self):
        return "helped"


def test_compiled_module_is_the_module():
    net = Net()
    cc = CompileCounter()
    cnet = kiln.compile(net, backend=cc)
    assert isinstance(cnet, Net) and isinstance(cnet, torch.nn.Module)
    assert list(cnet.state_dict()) == list(net.state_dict())
    assert [p is q for p, q in zip(cnet.parameters(), net.parameters())] == [True, True]
    assert repr(cnet) == repr(net)
    assert cnet.helper() == "helped"
    assert cnet.lin is net.lin
    cnet.eval()
    assert not net.training and not net.drop.training
    x = torch.randn(2, 4)
    torch.testing.assert_close(cnet(x), net(x))
    cnet.train()
    assert net.training
    cnet.new_attr = 5
    assert net.new_attr == 5


def test_module_train_eval_switch_recompiles_once_each():
    net = Net()
    cc = CompileCounter()
    cnet = kiln.compile(net, backend=cc)
    x = torch.randn(2, 4)
    cnet.eval()
    cnet(x)
    cnet(x)
    cnet.train()
    torch.manual_seed(0)
    a = cnet(x)
    torch.manual_seed(0)
    b = net(x)
    torch.testing.assert_close(a, b)
    assert cc.frame_count == 2
    cnet.eval()
    cnet(x)
    assert cc.frame_count == 2


def test_reset_forgets_entries():
    cc = CompileCounter()
    cf = kiln.compile(f, backend=cc)
    x = torch.randn(3)
    cf(x)
    kiln.reset()
    cf(x)
    assert cc.frame_count == 2


def test_recompile_limit_warns_once_and_names_the_guard():
    kiln.config.recompile_limit = 2
    cc = CompileCounter()
    cf = kiln.compile(f, backend=cc, dynamic=False)   # a new entry per size
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(1, 6):
            x = torch.randn(n)
            torch.testing.assert_close(cf(x), f(x))
    assert cc.frame_count == 2
    msgs = [str(m.message) for m in w if "recompile limit" in str(m.message)]
    assert len(msgs) == 1
    assert "Last guard that failed: x.size(0): 2 -> 3" in msgs[0]      # the change, both sides


def test_fullgraph_error_points_at_user_line():
    # a Python branch on a tensor's value cannot be in one graph (item() itself can be:
    # tests/capture/test_data_dependent.py)
    def branches_on_data(x):
        y = x * 2
        if y.sum() > 0: return y
        return -y

    with pytest.raises(kiln.Unsupported) as info:
        kiln.compile(branches_on_data, fullgraph=True)(torch.randn(3))
    msg = str(info.value)
    assert "test_api.py" in msg and "if y.sum() > 0: return y" in msg


def test_unresumable_frame_falls_back_with_warning():
    def gen(x):
        yield x + 1

    cf = kiln.compile(gen)
    with pytest.warns(kiln.cache.KilnWarning, match="generator"):
        out = list(cf(torch.ones(2)))
    assert torch.equal(out[0], torch.ones(2) + 1)


def test_logs_print_graph_guards_and_glue(capsys):
    kiln.config.logs = "graph,guards,code"
    try:
        kiln.compile(f)(torch.randn(2))
    finally:
        kiln.config.logs = ""
    out = capsys.readouterr().out
    assert "def forward" in out and "def ___guard_f" in out and "def ___glue_f" in out


def test_is_compiling_reads_true_inside():
    def g(x):
        if torch.compiler.is_compiling():
            return x + 1
        return x - 1

    cc = CompileCounter()
    x = torch.zeros(2)
    assert torch.equal(kiln.compile(g, backend=cc, fullgraph=True)(x), x + 1)
    assert torch.equal(g(x), x - 1)


def test_hooks_registered_after_compiling_are_honoured():
    calls = []
    net = Net().eval()
    cc = CompileCounter()
    cnet = kiln.compile(net, backend=cc)
    x = torch.randn(2, 4)
    torch.testing.assert_close(cnet(x), net(x))
    assert cc.frame_count == 1
    handle = net.lin.register_forward_hook(lambda m, i, o: calls.append("local") or o * 2)
    try:
        torch.testing.assert_close(cnet(x), net(x))
    finally:
        handle.remove()
    global_handle = torch.nn.modules.module.register_module_forward_hook(
        lambda m, i, o: calls.append("global") or None)
    try:
        torch.testing.assert_close(cnet(x), net(x))
    finally:
        global_handle.remove()
    # eager and compiled each ran the hooks the same number of times
    assert calls.count("local") == 2 and calls.count("global") > 0 and calls.count("global") % 2 == 0
    torch.testing.assert_close(cnet(x), net(x))
