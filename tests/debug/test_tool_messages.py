"""Messages of the tools in the user's terms (issue #30): a misspelt KILN_LOGS kind, an
unknown --backend for every command, a class passed to kiln.compile, and one numbering
of graphs (from 1) in explain, bisect, minify and the report."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import kiln
from kiln.cli import main
from kiln.config import LOG_KINDS
from kiln.debug import bisect, minify
from kiln.debug.explain import explain
from tests.debug import planted_backends as planted
from tests.debug.test_bisect import args as bisect_args
from tests.debug.test_bisect import five_graphs

pytestmark = pytest.mark.filterwarnings("ignore")

SRC = os.path.dirname(os.path.dirname(kiln.__file__))


def _python(code: str, **env):
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KILN_LOGS")}
    environment.update(PYTHONPATH=SRC, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=environment)


def test_misspelt_log_kind_warns_in_one_line_and_import_goes_on():
    proc = _python("import kiln; print(sorted(kiln.config.logs))", KILN_LOGS="grpah,breaks")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['breaks']"          # the known kind is still on
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "unknown log kind 'grpah' ignored; did you mean 'graph'?" in lines[0]
    assert f"valid kinds: {', '.join(LOG_KINDS)}" in lines[0]
    assert "Traceback" not in proc.stderr


def test_misspelt_log_kind_in_code_is_still_an_error():
    with pytest.raises(ValueError, match="unknown log kind"):
        kiln.config.logs = "grpah"


SCRIPT = textwrap.dedent('''
    import torch

    def f(x):
        return torch.sin(x) + 1

    def example_inputs():
        return (torch.ones(3),)
''')


@pytest.mark.parametrize("command", ["explain", "report", "minify", "bisect"])
def test_unknown_backend_is_a_one_line_error(command, tmp_path, capsys):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    extra = ["-o", str(tmp_path / "r.html")] if command == "report" else []
    rc = main([command, f"{script}:f", "--backend", "nope", *extra])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"kiln {command}: error: unknown backend 'nope'; known: " in err and "eager" in err
    assert "Traceback" not in err
    assert not (tmp_path / "r.html").exists()


def test_compiling_a_class_says_to_pass_an_instance():
    with pytest.raises(TypeError) as info:
        kiln.compile(torch.nn.Linear)
    assert str(info.value) == "kiln.compile got the class Linear; pass an instance: kiln.compile(Linear(...))"


def test_graphs_are_numbered_from_1_everywhere(tmp_path):
    """explain's ``graph 3`` is the graph bisect and minify call ``graph 3 of 5`` (the first
    one with a cos), and minify's repro file is named after it."""
    kiln.reset()
    report = explain(five_graphs)(*bisect_args())
    names = [g.name for g in report.graphs]
    assert names == [f"graph {i}" for i in range(1, 6)]
    assert "cos" in str(report.graphs[2].op_counts) and "cos" not in str(report.graphs[1].op_counts)
    result = bisect(five_graphs, bisect_args(), backend=planted.cos_miscompiled)
    assert result.summary.startswith("graph 3 of 5 first breaks the result")
    found = minify(five_graphs, bisect_args(), backend=planted.cos_miscompiled, out_dir=str(tmp_path))
    assert str(found).startswith("minify: graph 3 of 5 fails")
    assert os.path.basename(found.path).startswith("repro_graph3_")
    with open(found.path) as f:
        assert "Kiln repro: graph 3 of five_graphs (5 captured)." in f.read()
