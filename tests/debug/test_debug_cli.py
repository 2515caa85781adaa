"""kiln minify / kiln bisect on SCRIPT.py:NAME, loaded the way kiln explain loads it."""
import textwrap

import pytest

from kiln.cli import main
from tests.debug.test_minify import assert_repro_blames_backend

pytestmark = pytest.mark.filterwarnings("ignore")

SCRIPT = textwrap.dedent('''
    import torch
    import kiln

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.inp = torch.nn.Linear(16, 32)
            self.blocks = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(4))
            self.out = torch.nn.Linear(32, 4)

        def forward(self, x):
            h = torch.tanh(self.inp(x))
            for i, block in enumerate(self.blocks):
                if i == 2:
                    h = h + torch.nn.functional.gelu(block(h))
                else:
                    h = h + torch.sigmoid(block(h)) * h
                kiln.graph_break()
            return self.out(torch.nn.functional.layer_norm(h, (32,)))

    def example_inputs():
        torch.manual_seed(1)
        return (torch.randn(8, 16),)
''')

BACKEND = "tests.debug.planted_backends:gelu_miscompiled"


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(SCRIPT)
    return path


def test_kiln_minify(script, tmp_path, capsys):
    out_dir = tmp_path / "repros"
    rc = main(["minify", f"{script}:Net", "--backend", BACKEND, "--out-dir", str(out_dir)])
    out = capsys.readouterr()
    assert rc == 1
    assert "graph 3 of 5 fails" in out.out and "gelu" in out.out
    assert "checking graph" in out.err          # the progress display
    last = out.out.strip().splitlines()[-1]
    assert last.startswith("repro: ")
    assert_repro_blames_backend(last[len("repro: "):])


def test_kiln_bisect(script, capsys):
    rc = main(["bisect", f"{script}:Net", "--backend", BACKEND])
    out = capsys.readouterr().out
    assert rc == 1
    assert "graph: 3 of 5" in out and "op:    gelu" in out


def test_kiln_minify_nothing_fails(script, tmp_path, capsys):
    rc = main(["minify", f"{script}:Net", "--backend", "aot_eager", "--out-dir", str(tmp_path / "r")])
    assert rc == 0
    assert "nothing fails" in capsys.readouterr().out


def test_bad_target_and_backend(script, capsys):
    assert main(["minify", f"{script}:Nope", "--backend", "eager"]) == 2
    assert "defines no 'Nope'" in capsys.readouterr().err
    assert main(["bisect", f"{script}:Net", "--backend", "nonesuch"]) == 2
    assert "unknown backend 'nonesuch'" in capsys.readouterr().err
