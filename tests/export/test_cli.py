"""``kiln export SCRIPT.py:NAME --out prog.pt2``: saves a loadable program (with the
script's NAME_dynamic_shapes), and a program that is not one graph exits with status 1
printing every problem with its line."""
from __future__ import annotations

import textwrap

import torch

from kiln.cli import main

SCRIPT = textwrap.dedent('''
    import torch
    from torch.export import Dim

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.relu(self.lin(x))

    def Net_inputs():
        return (torch.randn(3, 4),)

    def Net_dynamic_shapes():
        return {"x": {0: Dim("batch", min=2, max=32)}}

    def bad(x):
        if x.sum() > 0:
            return x
        return -x

    def bad_inputs():
        return (torch.randn(3),)
''')


def test_export_command_saves_a_loadable_program(tmp_path, capsys):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    out = tmp_path / "net.pt2"
    assert main(["export", f"{script}:Net", "--out", str(out)]) == 0
    assert "range constraints" in capsys.readouterr().out
    ep = torch.export.load(str(out))
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4)
    x = torch.randn(7, 4)
    assert torch.allclose(ep.module()(x), torch.relu(lin(x)))


def test_export_command_reports_problems(tmp_path, capsys):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    assert main(["export", f"{script}:bad", "--out", str(tmp_path / "bad.pt2")]) == 1
    err = capsys.readouterr().err
    assert "script.py:21" in err and "if x.sum() > 0:" in err and "torch.cond" in err
    assert not (tmp_path / "bad.pt2").exists()
