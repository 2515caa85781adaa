"""Automatic repros during a normal run: kiln.config.repro_after / KILN_REPRO and
repro_level / KILN_REPRO_LEVEL, at the capture level and on AOT inner graphs."""
import os
import subprocess
import sys
import warnings

import pytest
import torch

import kiln
from kiln.debug import auto_repro
from tests.debug import planted_backends as planted
from tests.debug.test_minify import assert_repro_blames_backend


@pytest.fixture
def repro_dir(tmp_path):
    saved = (kiln.config.repro_after, kiln.config.repro_level, kiln.config.repro_dir)
    kiln.config.repro_dir = str(tmp_path)
    del auto_repro.written[:]
    yield tmp_path
    kiln.config.repro_after, kiln.config.repro_level, kiln.config.repro_dir = saved


def written_repros(path):
    return sorted(str(p) for p in path.iterdir() if p.suffix == ".py")


def test_off_by_default_writes_nothing(repro_dir):
    assert kiln.config.repro_after == ""
    f = kiln.compile(lambda x: torch.sigmoid(x).sum(), backend=planted.crashes_on_sigmoid)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        f(torch.randn(4))
    assert written_repros(repro_dir) == []


def test_capture_level_backend_error(repro_dir):
    kiln.config.repro_after = "capture"

    def f(x):
        return torch.sigmoid(torch.tanh(x) * 2 + x.cos()).sum()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = kiln.compile(f, backend=planted.crashes_on_sigmoid)(torch.randn(4))
    assert torch.isfinite(out)   # Kiln still fell back to eager
    (path,) = written_repros(repro_dir)
    assert any(issubclass(w.category, auto_repro.ReproWrittenWarning) and path in str(w.message) for w in caught)
    assert "sigmoid" in open(path).read()
    assert_repro_blames_backend(path)


def test_capture_level_accuracy(repro_dir):
    kiln.config.repro_after = "capture"

    def g(x):
        return torch.nn.functional.gelu(x.tanh() + 1) * 2

    kiln.config.repro_level = "error"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kiln.compile(g, backend=planted.gelu_miscompiled)(torch.randn(4, 4))
    assert written_repros(repro_dir) == []       # a wrong value is not an error
    kiln.reset()
    kiln.config.repro_level = "accuracy"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kiln.compile(g, backend=planted.gelu_miscompiled)(torch.randn(4, 4))
    (path,) = written_repros(repro_dir)
    assert "gelu" in open(path).read()
    assert_repro_blames_backend(path)


def test_aot_level_backward_graph(repro_dir):
    kiln.config.repro_after = "aot"
    kiln.config.repro_level = "accuracy"

    def g(x):
        return torch.nn.functional.gelu(x.tanh() + 1) * 2

    x = torch.randn(4, 4, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kiln.compile(g, backend=planted.gelu_backward_miscompiled)(x).sum().backward()
    (path,) = written_repros(repro_dir)      # the forward graph is right: only the backward one
    text = open(path).read()
    assert "backward graph" in text and "gelu_backward" in text
    assert_repro_blames_backend(path)


def test_environment_variables():
    code = "import kiln; print(kiln.config.repro_after, kiln.config.repro_level)"
    env = dict(os.environ, KILN_REPRO="aot", KILN_REPRO_LEVEL="accuracy")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["aot", "accuracy"]


def test_bad_settings_are_clear_errors():
    with pytest.raises(ValueError, match="repro_after must be one of"):
        kiln.config.repro_after = "always"
    with pytest.raises(TypeError, match="repro_level must be a str"):
        kiln.config.repro_level = True


def test_environment_variables_write_a_repro_in_a_normal_run(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(
        "import torch, kiln\n"
        "from tests.debug.planted_backends import crashes_on_sigmoid\n"
        "f = kiln.compile(lambda x: torch.sigmoid(x * 2).sum(), backend=crashes_on_sigmoid)\n"
        "print(float(f(torch.ones(3))))\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, KILN_REPRO="capture", KILN_REPRO_DIR=str(tmp_path / "repros"), PYTHONPATH=root)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == pytest.approx(3 * torch.sigmoid(torch.tensor(2.0)).item())
    (path,) = (tmp_path / "repros").iterdir()
    assert "ReproWrittenWarning" in out.stderr and str(path) in out.stderr
    assert_repro_blames_backend(str(path))


@pytest.mark.slow
def test_aot_level_inductor_writes_nothing_for_a_correct_graph(repro_dir):
    """Inductor's inner compiler cannot run outside compile_fx: its graphs are checked with
    the whole inductor backend, so a correct run must not produce a (false) repro."""
    kiln.config.repro_after = "aot"
    kiln.config.repro_level = "accuracy"

    def f(x):
        return torch.nn.functional.gelu(x.tanh() + 1).sum(-1)

    x = torch.randn(8, 8, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = kiln.compile(f, backend="inductor")(x)
        out.sum().backward()
    torch.testing.assert_close(out, f(x))
    assert written_repros(repro_dir) == [] and auto_repro.written == []
