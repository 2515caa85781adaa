"""Kiln's messages in the user's terms (issue #30): errors name the user's functions and
lines, recompile reasons say both sides of a change, warnings point at the user's call,
continuations carry the user's names, settings take effect when changed."""
import re
import warnings

import pytest
import torch

import kiln
from kiln.testing import CompileCounter


def pair_sum(x, y):
    return x + y


def _eager_error(fn, *args, **kwargs):
    with pytest.raises(TypeError) as info:
        fn(*args, **kwargs)
    return info.value


@pytest.mark.parametrize("args, kwargs", [((1,), {}), ((1, 2, 3), {}), ((1, 2), {"z": 3}), ((1,), {"x": 2})])
def test_arity_errors_are_eagers_naming_the_function(args, kwargs):
    """After a good call the entry's guard has the frame's signature plus one parameter:
    a call that does not fit raises eager's TypeError (message, no chained guard error)."""
    counter = CompileCounter()
    compiled = kiln.compile(pair_sum, backend=counter)
    x = torch.ones(3)
    for y in (torch.ones(3), torch.zeros(3)):
        assert torch.equal(compiled(x, y), pair_sum(x, y))
    real = [x] * len(args)
    expected = _eager_error(pair_sum, *real, **{k: x for k in kwargs})
    got = _eager_error(compiled, *real, **{k: x for k in kwargs})
    assert str(got) == str(expected) and "pair_sum()" in str(got)
    assert "___guard" not in str(got) and got.__context__ is None and got.__cause__ is None
    assert (counter.frame_count, counter.op_count) == (1, 1)


def test_a_typeerror_from_the_users_code_is_not_mistaken_for_arity():
    def bad(x):
        return x + "a"

    compiled = kiln.compile(bad, backend=CompileCounter())
    with pytest.raises(TypeError) as eager:
        bad(torch.ones(2))
    with pytest.raises(TypeError) as got:
        compiled(torch.ones(2))
    assert str(got.value) == str(eager.value)


def scale(inp):
    return inp * 2


def embed(input_ids, table):
    return table[input_ids].sum(1)


def times(x, n):
    return x * n


@pytest.mark.parametrize("fn, calls, reason", [
    (scale, [(torch.ones(2, 7),), (torch.ones(2, 7, dtype=torch.float64),)],
     "recompiling scale: inp.dtype: torch.float32 -> torch.float64"),
    (embed, [(torch.zeros(1, 7, dtype=torch.long), torch.ones(5, 3)), (torch.zeros(1, 1, dtype=torch.long), torch.ones(5, 3))],
     "recompiling embed: input_ids.size(1): 7 -> 1"),
    (scale, [(torch.ones(3),), (torch.ones(3, requires_grad=True),)],
     "recompiling scale: inp.requires_grad: False -> True"),
    (times, [(torch.ones(2), 3), (torch.ones(2), 2.5)], "recompiling times: type(n): int -> float"),
    (scale, [(torch.ones(2, 3),), (torch.ones(3, 2).t(),)], "recompiling scale: inp.stride(0): 3 -> 1, inp.stride(1): 1 -> 2"),
])
def test_recompile_reasons_say_both_sides(fn, calls, reason, capsys):
    kiln.reset()
    old = kiln.config.logs
    compiled = kiln.compile(fn, backend=CompileCounter())
    try:
        kiln.config.logs = "recompiles"
        for args in calls:
            expected = fn(*args)
            assert torch.equal(compiled(*args), expected)
    finally:
        kiln.config.logs = old
    lines = [l for l in capsys.readouterr().out.splitlines() if "recompiling" in l]
    assert lines == [f"[kiln] {reason}"], lines


def test_recompile_reason_for_grad_mode_and_globals():
    compiled = kiln.compile(scale, backend=CompileCounter())
    x = torch.ones(2)
    compiled(x)
    (entry,) = compiled.entries
    with torch.no_grad():
        assert entry.explain_guard(scale, x) == "grad mode: enabled -> disabled"
    assert entry.explain_guard(scale, x.double()) == "inp.dtype: torch.float32 -> torch.float64"
    assert entry.explain_guard(scale, x) is None


SHAPE_ERROR = '''
import torch, kiln

def f(x, w):
    y = x.sin()
    z = y @ w
    return z + 1

c = kiln.compile(f)
c(torch.ones(2, 3), torch.ones(3, 5))
c(torch.ones(2, 3), torch.ones(4, 5))
'''


def _run_script(tmp_path, text):
    import os
    import subprocess
    import sys
    script = tmp_path / "prog.py"
    script.write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("KILN_LOGS",)}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(kiln.__file__))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    return script, proc


def test_shape_error_names_the_users_line_without_fake_tensor_noise(tmp_path):
    """The error is eager's, the traceback's last frame is the user's ``f`` at the line of
    the matmul, and nothing of torch's fake-tensor log comes before it."""
    script, proc = _run_script(tmp_path, SHAPE_ERROR)
    assert proc.returncode == 1
    err = proc.stderr
    assert "fake_tensor" not in err and "failed while attempting to run meta" not in err, err
    assert err.startswith("Traceback"), err
    tail = err.strip().splitlines()[-3:]
    assert tail[0].strip() == f'File "{script}", line 6, in f', tail
    assert tail[1].strip() == "z = y @ w"
    assert tail[-1] == "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"
    assert "step_at" not in err and "resume_at" not in err


def _fails_to_compile(gm, example_inputs):
    raise RuntimeError("planted: no kernel")


def _fails_when_run(gm, example_inputs):
    def run(*args):
        raise RuntimeError("planted: the kernel crashed")
    return run


def sine_plus_one(x):
    return x.sin() + 1


@pytest.mark.parametrize("backend", [_fails_to_compile, _fails_when_run])
def test_backend_fallback_warning_points_at_the_users_call(backend):
    import inspect
    from kiln.runtime.fallback import BackendFallbackWarning
    kiln.reset()
    compiled = kiln.compile(sine_plus_one, backend=backend)
    x = torch.ones(3)
    seen = []
    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            line = inspect.currentframe().f_lineno + 1
            result = compiled(x)
        assert torch.equal(result, sine_plus_one(x))
        fallbacks = [w for w in caught if issubclass(w.category, BackendFallbackWarning)]
        for w in fallbacks:
            assert (w.filename, w.lineno) == (__file__, line), (w.filename, w.lineno, str(w.message))
        seen += fallbacks
    assert len(seen) == 1           # once: the graph runs eagerly from then on


def prints_between(x):
    y = x.sin()
    print("between")
    return y.cos() + undefined_name  # noqa: F821  (line +3: raises NameError after the break)


def test_continuations_are_named_after_the_users_code(capsys):
    """explain lists ``prints_between, from line N``, the trace's frame has that
    qualname, and a traceback through the continuation reads ``in prints_between`` at
    the user's line, as eager's does (no ``resume_at``/``step_at``)."""
    import inspect
    import traceback
    from kiln.debug.explain import explain
    first = inspect.getsourcelines(prints_between)[1]
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(prints_between, backend=counter)
    with pytest.raises(NameError) as eager:
        prints_between(torch.ones(2))
    with pytest.raises(NameError) as got:
        compiled(torch.ones(2))
    assert str(got.value) == str(eager.value)
    frames = traceback.extract_tb(got.value.__traceback__)
    assert (frames[-1].name, frames[-1].lineno) == ("prints_between", first + 3)
    assert not any(f.name.startswith(("resume_at", "step_at")) for f in frames)
    assert counter.frame_count == 2
    caches = [c for c in kiln.cache._CACHES.values() if c.code.co_name == "prints_between"]
    names = sorted(c.code.co_qualname for c in caches)
    # the continuation after the print (and one after the unknown name, which breaks too)
    assert names[:2] == ["prints_between", f"prints_between, from line {first + 2}"], names
    assert all(n.startswith("prints_between, from line ") for n in names[1:]), names

    def no_error(x):
        y = x.sin()
        print("between")
        return y.cos()

    report = explain(no_error)(torch.ones(2))
    line = inspect.getsourcelines(no_error)[1] + 2
    assert [e.frame for e in report.entries] == [
        "test_continuations_are_named_after_the_users_code.<locals>.no_error",
        f"test_continuations_are_named_after_the_users_code.<locals>.no_error, from line {line}"]
    assert "resume_at" not in str(report)


@pytest.mark.parametrize("backend", [_fails_to_compile, _fails_when_run])
def test_raise_on_backend_error_set_after_a_fallback_takes_effect(backend):
    """A graph that fell back to eager is not reused once the setting is on: the next call
    (of the same compiled function, or of a new kiln.compile of it) compiles again and
    raises the backend's error."""
    from kiln.exc import BackendError
    kiln.reset()
    compiled = kiln.compile(sine_plus_one, backend=backend)
    x = torch.ones(3)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert torch.equal(compiled(x), sine_plus_one(x))       # fell back, with a warning
            assert torch.equal(compiled(x), sine_plus_one(x))       # eagerly from then on
        kiln.config.raise_on_backend_error = True
        with pytest.raises(BackendError, match="planted"):
            compiled(x)
        with pytest.raises(BackendError, match="planted"):
            kiln.compile(sine_plus_one, backend=backend)(x)
    finally:
        kiln.config.raise_on_backend_error = False


def branches_on_data(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def test_break_reasons_say_the_fix():
    """A data-dependent ``if`` says to use torch.where / torch.cond: in the fullgraph
    error, in ``kiln explain`` and in ``kiln.metrics.breaks``."""
    from kiln.debug.explain import explain
    from kiln.exc import Unsupported
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(branches_on_data, backend=counter)
    for x in (torch.ones(2), -torch.ones(2)):
        assert torch.equal(compiled(x), branches_on_data(x))
    assert counter.frame_count == 3            # the condition, then each side
    (record,) = {str(b): b for b in kiln.metrics.breaks}.values()
    assert "torch.where(cond, a, b)" in record.fix and "torch.cond(" in record.fix
    report = str(explain(branches_on_data)(torch.ones(2)))
    assert "     fix: compute both results and pick with torch.where(cond, a, b)" in report
    with pytest.raises(Unsupported) as info:
        kiln.compile(branches_on_data, fullgraph=True)(torch.ones(2))
    assert str(info.value).splitlines()[-1].startswith("  fix: compute both results and pick with torch.where")


def max_of_two(a, b):
    return max(a, b) * 2


def test_max_over_tensors_says_the_fix():
    from kiln.exc import Unsupported
    with pytest.raises(Unsupported) as info:
        kiln.compile(max_of_two, fullgraph=True)(torch.ones(2), torch.zeros(2))
    assert "fix: use torch.maximum(a, b)" in str(info.value)


def doubled(x):
    return x * 2


@pytest.fixture
def stance_reset():
    yield
    kiln.config.stance = "default"


def test_stance_force_eager_compiles_nothing(stance_reset):
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(doubled, backend=counter)
    with kiln.set_stance("force_eager"):
        for x in (torch.ones(2), torch.ones(3, dtype=torch.float64)):
            assert torch.equal(compiled(x), doubled(x))
        assert counter.frame_count == 0 and not compiled.entries
    assert kiln.config.stance == "default"
    assert torch.equal(compiled(torch.ones(2)), doubled(torch.ones(2)))
    assert (counter.frame_count, counter.op_count) == (1, 1)


def test_stance_eager_on_recompile_uses_entries_and_runs_the_rest_eagerly(stance_reset):
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(doubled, backend=counter)
    x, other = torch.ones(2), torch.ones(2, dtype=torch.float64)
    compiled(x)
    kiln.set_stance("eager_on_recompile")
    for _ in range(2):
        assert torch.equal(compiled(x), doubled(x))          # the entry is used
        assert torch.equal(compiled(other), doubled(other))  # would recompile: runs as Python
    assert counter.frame_count == 1 and len(compiled.entries) == 1
    kiln.set_stance("default")
    compiled(other)
    assert counter.frame_count == 2


def test_stance_fail_on_recompile_raises_naming_the_change(stance_reset):
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(doubled, backend=counter)
    compiled(torch.ones(2))
    with kiln.set_stance("fail_on_recompile"):
        assert torch.equal(compiled(torch.ones(2)), doubled(torch.ones(2)))
        with pytest.raises(kiln.RecompileError) as info:
            compiled(torch.ones(2, dtype=torch.float64))
        assert "doubled" in str(info.value) and "x.dtype: torch.float32 -> torch.float64" in str(info.value)
        # a function compiled for the first time is not a recompile
        assert torch.equal(kiln.compile(scale, backend=counter)(torch.ones(2)), scale(torch.ones(2)))
    assert counter.frame_count == 2


def test_unknown_stance_is_refused(stance_reset):
    with pytest.raises(ValueError, match="must be one of"):
        kiln.set_stance("nope")
    assert kiln.config.stance == "default"


def test_stance_as_a_decorator_applies_to_its_calls_only(stance_reset):
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(doubled, backend=counter)

    @kiln.set_stance("force_eager")
    def run_eagerly(x):
        assert kiln.config.stance == "force_eager"
        return compiled(x)

    assert kiln.config.stance == "default"           # decorating changed nothing
    assert run_eagerly.__name__ == "run_eagerly"
    for x in (torch.ones(2), torch.ones(3, dtype=torch.float64)):
        assert torch.equal(run_eagerly(x), doubled(x))
        assert kiln.config.stance == "default"       # put back after each call
    assert counter.frame_count == 0 and not compiled.entries
    assert torch.equal(compiled(torch.ones(2)), doubled(torch.ones(2)))
    assert (counter.frame_count, counter.op_count) == (1, 1)
    with pytest.raises(TypeError, match=r"kiln.set_stance\('force_eager'\) decorates a function; got int"):
        kiln.set_stance("force_eager")(3)
    assert kiln.config.stance == "default"


def _logged(fn):
    """A decorator as libraries write them (functools.wraps): the wrapper takes the
    decorated function's ``__qualname__`` and ``__wrapped__``; its code keeps the
    decorator's name (``_logged.<locals>.wrapper``)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1
    return wrapper


@_logged
def user_step(x):
    y = x * 2
    print("between")
    return y.sin()


def test_wrapped_frames_are_named_after_the_wrapped_function(tmp_path, capsys):
    """explain, the frame caches and the trace name a decorator's wrapper after the
    function it wraps (``user_step (wrapper)``), its continuations too, never after the
    decorator's code (``_logged.<locals>.wrapper``)."""
    import inspect
    from kiln import trace
    from kiln.debug.explain import explain
    from kiln.report import collect
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(user_step, backend=counter)
    for x in (torch.ones(3), torch.arange(3.0)):
        assert torch.equal(compiled(x), user_step(x))
    # the wrapper breaks at its call of user_step (which breaks at the print): two graphs
    # (mul; sin), the wrapper's continuation adds 1 in a third
    assert (counter.frame_count, counter.op_count) == (3, 3)
    kiln.reset()
    report = explain(user_step)(torch.ones(3))
    wrapper_line = inspect.getsourcelines(_logged)[1] + 8
    step_line = inspect.getsourcelines(user_step.__wrapped__)[1] + 3
    assert [e.frame for e in report.entries] == [
        "user_step (wrapper)", "user_step", f"user_step (wrapper), from line {wrapper_line}",
        f"user_step, from line {step_line}"], report.entries
    assert "<locals>" not in str(report) and "wrapper," not in str(report).replace("(wrapper),", "")
    # entries (their graphs, glue and guards) are named after user_step too, not wrapper_N
    assert all(e.guard_source.startswith("def ___guard_user_step_") for e in report.entries), report.entries
    kiln.reset()
    kiln.config.trace_dir = str(tmp_path / "trace")
    try:
        kiln.compile(user_step)(torch.ones(3))
    finally:
        kiln.config.trace_dir = ""
        trace.close()
    records = [r for path in collect.trace_files(str(tmp_path / "trace")) for r in collect.read_records(path)]
    names = [r["frame"]["qualname"] for r in records if r.get("kind") == "capture_start"]
    assert names[0] == "user_step (wrapper)" and "user_step" in names, names
    assert not any("<locals>" in n for n in names), names
    graphs = [r["entry"] for r in records if r.get("kind") == "graph"]
    assert graphs and all(g.startswith("user_step_") for g in graphs), graphs


def test_hugging_face_frames_are_named_after_the_model(capsys):
    """BertModel.forward is wrapped by transformers' decorators (its code is
    ``merge_with_config_defaults.<locals>.wrapper`` or similar): explain names it
    ``BertModel.forward``."""
    transformers = pytest.importorskip("transformers")
    from kiln.debug.explain import explain
    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=64, vocab_size=100)
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).eval()
    assert type(model).forward.__code__.co_qualname != "BertModel.forward"   # the premise: a wrapper
    kiln.reset()
    for ids in (torch.randint(0, 100, (1, 6)), torch.randint(0, 100, (1, 6))):
        with torch.no_grad():
            report = explain(model)(input_ids=ids)
            expected = model(input_ids=ids)
        torch.testing.assert_close(report.result.last_hidden_state, expected.last_hidden_state)
    assert report.graph_count == 1 and report.break_count == 0 and report.op_count > 30
    assert [e.frame for e in report.entries] == ["BertModel.forward (wrapper)"]
    assert report.entries[0].guard_source.startswith("def ___guard_BertModel_forward_")   # not wrapper_1
    assert "<locals>" not in str(report) and "merge_with_config_defaults" not in str(report)


@_logged
def user_scale(inp):
    return inp * 2


def test_recompile_reason_names_a_wrapper_after_the_wrapped_function(capsys):
    kiln.reset()
    old = kiln.config.logs
    counter = CompileCounter()
    compiled = kiln.compile(user_scale, backend=counter)
    try:
        kiln.config.logs = "recompiles"
        for x in (torch.ones(2), torch.ones(2, dtype=torch.float64)):
            assert torch.equal(compiled(x), user_scale(x))
    finally:
        kiln.config.logs = old
    lines = [l for l in capsys.readouterr().out.splitlines() if "recompiling" in l]
    assert lines and all(l.startswith("[kiln] recompiling user_scale (wrapper): ")
                         or l.startswith("[kiln] recompiling user_scale: ") for l in lines), lines
    assert any("(wrapper)" in l for l in lines), lines
    assert (counter.frame_count, counter.op_count) == (2, 4)   # one graph per dtype: inp * 2 + 1


def print_between(x):
    y = x.sin()
    print("between")
    return y.cos()


def test_breaks_log_prints_each_break_with_its_line(capsys):
    """``KILN_LOGS=breaks`` prints every graph break as it is planned: where, why, the line."""
    kiln.reset()
    old = kiln.config.logs
    counter = CompileCounter()
    compiled = kiln.compile(print_between, backend=counter)
    try:
        kiln.config.logs = "breaks"
        for x in (torch.ones(3), torch.zeros(3)):
            assert torch.equal(compiled(x), print_between(x))
    finally:
        kiln.config.logs = old
    assert counter.frame_count == 2
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("[kiln]")]
    assert len(lines) == 1, lines
    assert lines[0].startswith("[kiln] graph break at ") and "test_user_messages.py:" in lines[0], lines
    assert "print" in lines[0], lines
