"""kiln.debug.minify on planted backend bugs (tests/debug/planted_backends.py).

Every case checks the minimized size, that the culprit op is in the repro, and runs the
repro alone in a subprocess (must fail: exit 1) and with ``--backend eager`` (must pass:
exit 0), from a directory where nothing but the script is, with nothing on PYTHONPATH but
the kiln under test."""
import os
import subprocess
import sys
import time

import pytest
import torch

import kiln
from kiln.debug import minify
from tests.debug import planted_backends as planted

pytestmark = pytest.mark.filterwarnings("ignore")

TIME_LIMIT_S = 180   # the bound on one minification on this (2-core) machine


def run_repro(path, *flags):
    # nothing on the path but the kiln under test (not the repository: the script must
    # find its backend itself)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(kiln.__file__))
    proc = subprocess.run([sys.executable, path, *flags], capture_output=True, text=True, timeout=300,
                          cwd=os.path.dirname(path), env=env)
    return proc.returncode, proc.stdout + proc.stderr


def assert_repro_blames_backend(path):
    rc, out = run_repro(path)
    assert rc == 1, out
    assert "FAIL" in out, out
    rc, out = run_repro(path, "--backend", "eager")
    assert rc == 0, out
    assert "PASS" in out, out


def timed_minify(*args, **kwargs):
    start = time.monotonic()
    result = minify(*args, **kwargs)
    elapsed = time.monotonic() - start
    print(f"minify: {elapsed:.1f}s, {result.checks} checks, {result.original_ops} -> {result.ops} ops")
    assert elapsed < TIME_LIMIT_S
    return result


def repro_text(result):
    with open(result.path) as f:
        return f.read()


class MLP(torch.nn.Module):
    """Six blocks of linear, activations, layer norm and residual arithmetic (>= 40 ops);
    only block 3 uses GELU."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(6))
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(32) for _ in range(6))

    def forward(self, x):
        for i, (lin, norm) in enumerate(zip(self.layers, self.norms)):
            h = lin(x)
            h = torch.nn.functional.gelu(h) if i == 3 else torch.tanh(h) * torch.sigmoid(h)
            x = norm(x + h) * 0.5 + x.relu()
        return x.sum(-1)


def test_value_miscompile_in_mlp(tmp_path):
    torch.manual_seed(0)
    result = timed_minify(MLP(), (torch.randn(8, 32),), backend=planted.gelu_miscompiled, out_dir=str(tmp_path))
    assert result.path is not None, result
    assert result.original_ops >= 40
    assert result.ops <= 5
    assert result.graph_index == 0
    assert result.reason.startswith("output 0: error") and "eager noise" in result.reason
    assert "gelu" in repro_text(result)
    assert result.reproduces
    assert_repro_blames_backend(result.path)


def test_nothing_fails_writes_nothing(tmp_path):
    torch.manual_seed(0)
    result = minify(MLP(), (torch.randn(8, 32),), backend="aot_eager", out_dir=str(tmp_path))
    assert result.path is None
    assert result.reason.startswith("nothing fails")
    assert not list(tmp_path.iterdir())


def test_crash_on_one_op(tmp_path):
    def f(x, w):
        for _ in range(8):
            x = torch.tanh(x @ w) + x * 0.5
        return (torch.sigmoid(x).relu() - x.cos()).sum(0)

    torch.manual_seed(0)
    result = timed_minify(f, (torch.randn(6, 8), torch.randn(8, 8)), backend=planted.crashes_on_sigmoid,
                          out_dir=str(tmp_path))
    assert result.ops <= 3
    assert "NotImplementedError" in result.reason
    text = repro_text(result)
    assert "sigmoid" in text and "expected=('crash', 'NotImplementedError')" in text
    rc, out = run_repro(result.path)
    assert rc == 1 and "NotImplementedError" in out, out
    assert "different failure" not in out
    assert_repro_blames_backend(result.path)


def aliasing_fn(a, v):
    v.mul_(2)                      # through v, a changes too
    b = torch.relu(a + 1) * 3
    for _ in range(4):
        b = torch.tanh(b) + b
    return (b @ a.t()).sum(-1)


def test_aliasing_only_bug(tmp_path):
    torch.manual_seed(0)
    a = torch.randn(4, 6)
    result = timed_minify(aliasing_fn, (a, a.view(6, 4)), backend=planted.clones_inputs, out_dir=str(tmp_path))
    assert result.path is not None, result
    assert result.ops <= 3
    text = repro_text(result)
    assert "mul_" in text
    assert "inputs a, v share one buffer" in text
    assert_repro_blames_backend(result.path)
    # the same repro with every input in its own buffer does not fail: the aliasing is the bug
    rc, out = run_repro(result.path, "--independent-inputs")
    assert rc == 0, out
    # and the inputs passed to minify were not changed by its runs
    assert torch.equal(a, a.clone())


def test_aliasing_bug_needs_aliased_inputs():
    torch.manual_seed(0)
    a = torch.randn(4, 6)
    result = minify(aliasing_fn, (a, a.clone().view(6, 4)), backend=planted.clones_inputs, out_dir=None)
    assert result.path is None and result.reason.startswith("nothing fails")


def test_minify_leaves_arguments_alone(tmp_path):
    torch.manual_seed(0)
    a = torch.randn(4, 6)
    before = a.clone()
    minify(aliasing_fn, (a, a.view(6, 4)), backend=planted.clones_inputs, out_dir=str(tmp_path))
    assert torch.equal(a, before)


def small_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.GELU(),
                               torch.nn.Linear(16, 4), torch.nn.LayerNorm(4))


def test_gradient_only_miscompile(tmp_path):
    x = torch.randn(5, 8)
    # forward is right: without training nothing fails
    assert minify(small_net(), (x,), backend=planted.gelu_backward_miscompiled, out_dir=str(tmp_path)).path is None
    result = timed_minify(small_net(), (x,), backend=planted.gelu_backward_miscompiled, training=True,
                          out_dir=str(tmp_path))
    assert result.path is not None, result
    assert result.reason.startswith("grad ")
    assert result.ops <= 3
    text = repro_text(result)
    assert "gelu" in text and "training=True" in text
    assert_repro_blames_backend(result.path)


def test_repro_says_when_backend_is_not_importable(tmp_path):
    def local_backend(gm, example_inputs):
        return planted.gelu_miscompiled(gm, example_inputs)

    torch.manual_seed(0)
    result = minify(MLP(), (torch.randn(8, 32),), backend=local_backend, out_dir=str(tmp_path))
    text = repro_text(result)
    assert "NOT IMPORTABLE" in text
    rc, out = run_repro(result.path)
    assert rc == 2 and "cannot run" in out and "--backend" in out
    rc, out = run_repro(result.path, "--backend", "tests.debug.planted_backends:gelu_miscompiled")
    assert rc == 1, out


def test_bad_args_is_a_clear_error():
    with pytest.raises(TypeError, match="args must be a tuple"):
        minify(torch.relu, torch.randn(3), backend="eager")


@pytest.mark.slow
def test_value_miscompile_in_bert(tmp_path):
    from tests.models import hf_configs
    torch.manual_seed(0)
    model = hf_configs.bert().eval()
    args, kwargs = hf_configs.inputs("bert", 2)
    result = timed_minify(model, args, kwargs, backend=planted.gelu_miscompiled, out_dir=str(tmp_path))
    assert result.path is not None, result
    assert result.ops <= 5 and result.original_ops >= 40
    assert "gelu" in repro_text(result)
    assert_repro_blames_backend(result.path)


def test_wrong_result_but_no_graph_wrong_alone(tmp_path):
    import kiln

    def f(x):
        for _ in range(3):
            x = torch.tanh(x) * 2
            kiln.graph_break()       # the loop body after the break is one graph, called 3 times
        return x

    result = minify(f, (torch.randn(4),), backend=planted.wrong_after_first_call, out_dir=str(tmp_path))
    assert result.path is None
    assert "no graph is wrong on its own" in result.reason and "between graphs" in result.reason
    assert not list(tmp_path.iterdir())


def test_dropout_in_training_compares_like_with_like(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.5), torch.nn.Linear(16, 4)).train()
    x = torch.randn(5, 8)
    state = torch.get_rng_state()
    result = minify(net, (x,), backend="aot_eager", training=True, out_dir=str(tmp_path))
    assert result.path is None and result.reason.startswith("nothing fails"), result
    assert torch.equal(torch.get_rng_state(), state)     # the caller's generator is untouched


class SeedModel(torch.nn.Module):
    """The second seed's shape: a graph of its own returns ``h.contiguous().view(1, 1024, -1)``,
    a view of its input, and the caller writes into that output in a training step."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, inp):
        import kiln
        h = self.proj(inp)
        kiln.graph_break()
        y = h.contiguous().view(1, 1024, -1)
        kiln.graph_break()
        y.mul_(2).add_(0.5)              # through y, h changes too
        return self.head(torch.tanh(h)).sum() + y.pow(2).mean()


def test_output_aliasing_bug_of_the_second_seed(tmp_path):
    """Values right, aliasing wrong: the backend returns copies.  Each output's values
    match eager, so a value-only minifier finds nothing; the aliasing check does."""
    torch.manual_seed(1)
    inp = torch.randn(1024, 16)
    result = timed_minify(SeedModel(), (inp,), backend=planted.returns_copies, training=True, out_dir=str(tmp_path))
    assert result.path is not None, result
    assert result.graph_index == 1
    assert result.ops <= 2
    assert "shares memory with h in eager but with no input when compiled" in result.reason
    assert_repro_blames_backend(result.path)
    rc, out = run_repro(result.path, "--backend", "aot_eager")   # aot_eager keeps the view: passes
    assert rc == 0, out


@pytest.mark.slow
def test_no_false_failures_under_aot_eager(tmp_path):
    """A minifier that reports bugs that are not there is worse than none: a correct
    backend on models with batch norm in training, dropout, and a KV cache object in
    the output (compared through its tensors, not by identity) gives nothing."""
    from tests.models import hf_configs
    torch.manual_seed(0)
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 2)).train()
    gpt2 = hf_configs.gpt2().eval()
    gpt2_args, gpt2_kwargs = hf_configs.inputs("gpt2", 2)
    bert = hf_configs.bert().train()
    bert_args, bert_kwargs = hf_configs.inputs("bert", 2)
    for fn, args, kwargs, training in [(conv, (torch.randn(4, 3, 10, 10),), {}, True),
                                       (gpt2, gpt2_args, gpt2_kwargs, False),
                                       (bert, bert_args, bert_kwargs, True)]:
        result = minify(fn, args, kwargs, backend="aot_eager", training=training, out_dir=str(tmp_path))
        assert result.path is None and result.reason.startswith("nothing fails"), result
    assert not list(tmp_path.iterdir())
