"""``kiln.compile``'s settings travel as one object: backend, fullgraph, dynamic, mode and
options decide together which frame cache (and which compiled module class) a compiled
function uses, and ``mode``/``options`` have torch.compile's meaning for inductor and
are refused, naming what was passed and what is valid, by backends without them."""
from __future__ import annotations

import pytest
import torch

import kiln
from kiln.api import _settings
from kiln.compile_settings import CompileSettings
from kiln.testing import CompileCounter


def f(x):
    return x.sin() + 1


def test_settings_are_one_frozen_object_with_one_key():
    counter = CompileCounter()
    a = _settings(counter, False, None, None, None)
    b = _settings(counter, False, None, None, None)
    assert isinstance(a, CompileSettings) and a.key() == b.key()
    with pytest.raises(Exception):
        a.fullgraph = True
    others = [_settings(counter, True, None, None, None), _settings(counter, False, False, None, None),
              _settings(CompileCounter(), False, None, None, None)]
    assert len({a.key(), *(o.key() for o in others)}) == 4
    assert a.for_nested_frames() is a
    nested = others[0].for_nested_frames()
    assert nested.fullgraph is False and nested.backend is counter


def test_compiled_functions_share_a_cache_exactly_when_settings_match():
    counter = CompileCounter()
    one = kiln.compile(f, backend=counter, dynamic=False)
    same = kiln.compile(f, backend=counter, dynamic=False)
    other = kiln.compile(f, backend=counter, dynamic=True)
    full = kiln.compile(f, backend=counter, fullgraph=True, dynamic=False)
    assert one._kiln_cache is same._kiln_cache
    assert len({id(one._kiln_cache), id(other._kiln_cache), id(full._kiln_cache)}) == 3
    for x in (torch.randn(3), torch.randn(3)):
        assert torch.equal(one(x), f(x)) and torch.equal(same(x), f(x))
    assert counter.frame_count == 1 and counter.op_count == 2     # one entry, shared
    assert torch.equal(full(x), f(x))
    assert counter.frame_count == 2


def test_compiled_module_classes_follow_the_settings():
    counter = CompileCounter()
    lin = torch.nn.Linear(3, 2)
    a, b = kiln.compile(lin, backend=counter), kiln.compile(torch.nn.Linear(3, 2), backend=counter)
    c = kiln.compile(lin, backend=counter, fullgraph=True)
    assert type(a) is type(b) and type(a) is not type(c)
    for x in (torch.randn(3), torch.randn(4, 3)):
        torch.testing.assert_close(a(x), lin(x))
        torch.testing.assert_close(c(x), lin(x))
    assert counter.frame_count == 4 and counter.op_count == 4


def test_mode_and_options_are_refused_where_the_backend_has_no_notion_of_them():
    with pytest.raises(ValueError, match=r"backend 'eager' has no notion of mode or options "
                                         r"\(got mode='max-autotune'\).*'reduce-overhead'.*backend='inductor'"):
        kiln.compile(f, mode="max-autotune")
    with pytest.raises(ValueError, match=r"backend 'CompileCounter' has no notion.*options=\{'max_autotune': True\}"):
        kiln.compile(f, backend=CompileCounter(), options={"max_autotune": True})
    # "default" (and None) ask for nothing: every backend takes them, as torch.compile's do
    counter = CompileCounter()
    cf = kiln.compile(f, backend=counter, mode="default")
    for x in (torch.randn(2), torch.randn(2)):
        assert torch.equal(cf(x), f(x))
    assert counter.frame_count == 1 and counter.op_count == 2


def test_mode_and_options_are_checked_for_inductor():
    with pytest.raises(ValueError, match=r"mode='fastest' is not one of inductor's modes: .*'reduce-overhead'.*"
                                         r"'max-autotune-no-cudagraphs'"):
        kiln.compile(f, backend="inductor", mode="fastest")
    with pytest.raises(ValueError, match=r"inductor has no setting 'max_autotun' \(did you mean 'max_autotune'"):
        kiln.compile(f, backend="inductor", options={"max_autotun": True})
    with pytest.raises(ValueError, match=r"inductor's max_autotune is a bool, got str"):
        kiln.compile(f, backend="inductor", options={"max_autotune": "yes"})
    with pytest.raises(ValueError, match="fallback_random"):
        kiln.compile(f, backend="inductor", options={"fallback_random": False})
    with pytest.raises(ValueError, match="not both"):
        kiln.compile(f, backend="inductor", mode="max-autotune", options={"max_autotune": True})
    with pytest.raises(TypeError, match="options must be a dict"):
        kiln.compile(f, backend="inductor", options=["max_autotune"])
    with pytest.raises(TypeError, match="mode must be a str"):
        kiln.compile(f, backend="inductor", mode=3)


def test_inductor_mode_and_options_become_inductor_config_and_separate_caches():
    plain = kiln.compile(f, backend="inductor")
    tuned = kiln.compile(f, backend="inductor", mode="max-autotune-no-cudagraphs")
    graphs = kiln.compile(f, backend="inductor", mode="reduce-overhead")
    dashed = kiln.compile(f, backend="inductor", options={"epilogue-fusion": False, "max_autotune": True})
    assert len({id(c._kiln_cache) for c in (plain, tuned, graphs, dashed)}) == 4
    assert getattr(plain._kiln_compiler.graph_backend.backend, "settings", None) is None
    assert tuned._kiln_compiler.graph_backend.backend.settings == torch._inductor.list_mode_options(
        "max-autotune-no-cudagraphs")
    assert graphs._kiln_compiler.graph_backend.backend.settings == {"triton.cudagraphs": True}
    assert dashed._kiln_compiler.graph_backend.backend.settings == {"epilogue_fusion": False, "max_autotune": True}
    # the configured backend declares what inductor declares (backends/contract.py)
    from kiln.backends.contract import applies_input_mutations_last, caches_compiled_graphs
    configured = tuned._kiln_compiler.graph_backend.backend
    assert applies_input_mutations_last(configured) and caches_compiled_graphs(configured)


@pytest.mark.slow
def test_inductor_compiles_under_the_mode(monkeypatch):
    """The mode's settings are inductor's config while it compiles (values match eager)."""
    import torch._inductor.compile_fx as compile_fx_module
    from torch._inductor import config as inductor_config
    seen = []
    real = compile_fx_module.compile_fx

    def recording(*args, **kwargs):
        seen.append((inductor_config.max_autotune, inductor_config.coordinate_descent_tuning,
                     inductor_config.fallback_random))
        return real(*args, **kwargs)

    monkeypatch.setattr(compile_fx_module, "compile_fx", recording)
    cf = kiln.compile(f, backend="inductor", mode="max-autotune-no-cudagraphs")
    for x in (torch.randn(5), torch.randn(5)):
        torch.testing.assert_close(cf(x), f(x))
    assert seen == [(True, True, True)]
    assert inductor_config.max_autotune is False    # patched only while compiling
