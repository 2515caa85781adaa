"""Entries that cannot be written say why and stay in memory; ``kiln cache ls|clear``."""
from kiln import persistent
from kiln.cli import main

from .helpers import run_script

BREAKS = '''
def f(x):
    y = x * 2
    print("a graph break")
    return y + 1

def g(x, table={}):       # a default with no portable form: the frame is not keyed
    return x + len(table)

cf, cg = kiln.compile(f, backend="pcache_counting"), kiln.compile(g, backend="pcache_counting")
x = torch.randn(3)
report(same=[torch.equal(cf(x), f(x)), torch.equal(cg(x), g(x))])
'''


def test_a_graph_break_is_not_written_and_says_why(tmp_path):
    cache = tmp_path / "c"
    first = run_script(BREAKS, cache, tmp_path / "s.py", env={"KILN_LOGS": "cache"})
    assert first["same"] == [True, True] and first["skipped"] >= 2, first
    out = first["stdout"]
    assert "cache: not writing f" in out and "graph break" in out
    assert "cache: not writing g" in out and "not a module's globals" in out
    second = run_script(BREAKS, cache, tmp_path / "s.py")
    # f and g are captured again; the continuation after f's break is a function like any
    # other (its code made the same from f's bytecode, keyed by its content): loaded
    assert second["captured"] == 2 and second["loaded"] == first["captured"] - 2 == 1
    assert second["same"] == [True, True] and not second["warnings"]


SIMPLE = '''
cf = kiln.compile(lambda x: x.sin() + 1, backend="eager")
def h(x):
    return x.cos()
ch = kiln.compile(h, backend="eager")
x = torch.randn(3)
report(same=[torch.equal(ch(x), h(x))])
'''


def test_cache_ls_and_clear(tmp_path, capsys):
    cache = tmp_path / "c"
    run_script(SIMPLE, cache, tmp_path / "s.py")
    assert main(["cache", "ls", "--dir", str(cache)]) == 0
    out = capsys.readouterr().out
    assert "h (" in out and "backend=eager" in out and "1 entries" in out
    assert main(["cache", "clear", "--dir", str(cache)]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert persistent.list_entries(str(cache)) == []
