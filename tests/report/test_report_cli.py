"""Issue #16: ``python -m kiln``, ``kiln report`` on a trace directory and on a script,
and the clean one-sentence error for SCRIPT.py:NAME targets that need inputs."""
import subprocess
import sys

import pytest

from kiln.debug import script_target

from . import browser

EXAMPLE = "tests/report/traced_example.py"


def kiln_cmd(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "kiln", *args], capture_output=True, text=True, timeout=timeout)


def test_python_m_kiln_help_lists_the_commands():
    out = kiln_cmd("--help")
    assert out.returncode == 0, out.stderr
    for command in ("bench", "explain", "report"):
        assert command in out.stdout
    assert out.stdout.startswith("usage: kiln ")


@pytest.mark.parametrize("command", ["explain", "report"])
def test_missing_inputs_is_one_clean_sentence(command):
    out = kiln_cmd(command, f"{EXAMPLE}:needs_args")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    error = out.stderr.strip().splitlines()[-1]
    assert error == (f"kiln {command}: error: needs_args() needs argument(s) x but {EXAMPLE} defines neither "
                     "needs_args_inputs() nor example_inputs(); add one that returns them (a tuple of positional "
                     "arguments, or (args, kwargs))")


@pytest.mark.parametrize("command", ["explain", "report"])
def test_help_says_how_inputs_are_given(command):
    out = kiln_cmd(command, "--help")
    assert out.returncode == 0
    assert "NAME_inputs()" in out.stdout and "example_inputs()" in out.stdout


def test_target_errors(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("def f(x, *, k):\n    return x\n\ndef f_inputs():\n    return (1,)\n\ndef g():\n    return 1\n")
    with pytest.raises(script_target.TargetError, match=r"the arguments from f_inputs\(\) .* do not fit f\(\)"):
        script_target.load(f"{script}:f")
    with pytest.raises(script_target.TargetError, match=r"defines no 'h'; functions and modules there: f, f_inputs, g"):
        script_target.load(f"{script}:h")
    with pytest.raises(script_target.TargetError, match="expected SCRIPT.py:NAME"):
        script_target.load("nocolon")
    assert script_target.load(f"{script}:g").args == ()


def test_report_from_a_script_and_from_a_trace_dir(tmp_path):
    out = tmp_path / "r.html"
    trace = tmp_path / "trace"
    run = kiln_cmd("report", f"{EXAMPLE}:f", "-o", str(out), "--trace-dir", str(trace), "--measure", "2")
    assert run.returncode == 0, run.stderr
    assert "wrote" in run.stdout and "3 graphs, 1 graph breaks" in run.stdout
    page = out.read_text()
    assert "traced_example.py:7" in page and "call: compiled / eager" in page
    again = kiln_cmd("report", str(trace), "-o", str(tmp_path / "again.html"))
    assert again.returncode == 0, again.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    none = kiln_cmd("report", str(empty))
    assert none.returncode == 2 and "no kiln-trace-*.jsonl files" in none.stderr
    missing = kiln_cmd("report", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "is neither a trace directory nor SCRIPT.py:NAME" in missing.stderr


def test_browser_tests_skip_with_a_clear_message_without_chromium(monkeypatch):
    monkeypatch.setattr(browser.shutil, "which", lambda name: None)
    with pytest.raises(pytest.skip.Exception, match="headless Chromium is not installed"):
        browser.require_chromium()
