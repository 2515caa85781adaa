"""What must not be loaded is not: changed code, another torch, a corrupt or stale file,
and two processes writing one directory at once.  Every case still gives eager's
results (a capture where the stored entry does not apply) and says why in a warning
where a file was there but not trusted."""
import os

from kiln import persistent

from .helpers import report_of, run_script, start_script

SCRIPT = '''
def helper(t):
    return t.cos() * {scale}

def f(x):
    return helper(x) + x.sum()

cf = kiln.compile(f, backend="pcache_counting")
same = []
for i in range(2):
    x = torch.randn(5)
    same.append(torch.equal(cf(x), f(x)))
report(same=same)
'''


def entry_paths(cache) -> list:
    return [p for p, _ in persistent.list_entries(str(cache))]


def test_changed_source_of_the_frame_is_not_loaded(tmp_path):
    cache = tmp_path / "c"
    assert run_script(SCRIPT.format(scale=2), cache, tmp_path / "s.py")["captured"] == 1
    changed = SCRIPT.format(scale=2).replace("helper(x) + x.sum()", "helper(x) - x.sum()")
    second = run_script(changed, cache, tmp_path / "s.py")
    assert second["captured"] == 1 and second["loaded"] == 0 and second["same"] == [True, True]
    assert len(entry_paths(cache)) == 2       # keyed apart: both kept


def test_changed_source_of_an_inlined_function_is_not_trusted(tmp_path):
    # f's code is unchanged, so the file is found; the guard's function constant
    # (helper, by name, code and defaults digest) no longer resolves: warned, recaptured
    cache = tmp_path / "c"
    assert run_script(SCRIPT.format(scale=2), cache, tmp_path / "s.py")["captured"] == 1
    second = run_script(SCRIPT.format(scale=3), cache, tmp_path / "s.py")
    assert second["captured"] == 1 and second["loaded"] == 0 and second["same"] == [True, True]
    assert any("other code or defaults" in w for w in second["warnings"]), second["warnings"]


def test_another_torch_version_is_not_loaded(tmp_path):
    cache = tmp_path / "c"
    assert run_script(SCRIPT.format(scale=2), cache, tmp_path / "s.py")["captured"] == 1
    other_torch = '''
import kiln.persistent as P
_key = P.frame_key
def frame_key(fn, settings):
    key = _key(fn, settings)
    key["torch"] = "0.0.1"
    return key
P.frame_key = frame_key
''' + SCRIPT.format(scale=2)
    second = run_script(other_torch, cache, tmp_path / "s.py")
    assert second["captured"] == 1 and second["loaded"] == 0 and second["same"] == [True, True]


def test_a_stale_file_under_the_right_key_is_ignored_with_a_warning(tmp_path):
    cache = tmp_path / "c"
    run_script(SCRIPT.format(scale=2), cache, tmp_path / "s.py")
    [path] = entry_paths(cache)
    with open(path, "rb") as f:
        record = persistent.decode_file(f.read())
    record["key"] = dict(record["key"], torch="0.0.1")
    persistent.write_atomically(path, persistent.encode_file(record))
    second = run_script(SCRIPT.format(scale=2), cache, tmp_path / "s.py")
    assert second["captured"] == 1 and second["loaded"] == 0 and second["same"] == [True, True]
    assert any("stale" in w for w in second["warnings"]), second["warnings"]


def test_a_corrupt_file_is_ignored_with_a_warning(tmp_path):
    cache = tmp_path / "c"
    run_script(SCRIPT.format(scale=2), cache, tmp_path / "s.py")
    [path] = entry_paths(cache)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(path, "wb").write(bytes(data[: len(data) - 7]))
    second = run_script(SCRIPT.format(scale=2), cache, tmp_path / "s.py")
    assert second["captured"] == 1 and second["loaded"] == 0 and second["same"] == [True, True]
    assert any("checksum" in w for w in second["warnings"]), second["warnings"]
    # the capture wrote the entry again, whole: a third process loads it
    third = run_script(SCRIPT.format(scale=2), cache, tmp_path / "s.py")
    assert third["captured"] == 0 and third["loaded"] == 1 and not third["warnings"]


def test_two_writers_at_once_leave_whole_files(tmp_path):
    cache = tmp_path / "c"
    procs = [start_script(SCRIPT.format(scale=2), cache, tmp_path / f"s{i}.py") for i in range(2)]
    for r in [report_of(p) for p in procs]:
        assert r["captured"] == 1 and r["same"] == [True, True] and not r["warnings"]
    listed = persistent.list_entries(str(cache))
    assert listed and all(isinstance(record, dict) for _, record in listed)
    assert not [n for _, _, files in os.walk(cache) for n in files if n.startswith(".tmp-")]
    third = run_script(SCRIPT.format(scale=2), cache, tmp_path / "s0.py")
    assert third["captured"] == 0 and third["loaded"] >= 1 and not third["warnings"]


def test_atomic_writes_from_many_threads(tmp_path):
    import threading
    path = str(tmp_path / "x" / "e.entry")
    records = [{"key": {"n": i}, "payload": "x" * (50000 + i)} for i in range(8)]
    threads = [threading.Thread(target=persistent.write_atomically, args=(path, persistent.encode_file(r)))
               for r in records]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert persistent.decode_file(open(path, "rb").read()) in records
