"""Checks shared by the export tests: export, round-trip through torch.export.save/load,
and compare ``ep.module()`` with eager on the example inputs and on others.

Each program runs with state of its own: eager on a deep copy of the module made before
exporting, ``ep.module()`` deep-copied, and the saved-and-loaded program, all fed the
same inputs in the same order (so a buffer the program changes evolves alike; the
buffers are compared at the end).  Exporting must leave the module's state as it was.
"""
from __future__ import annotations

import copy
import io

import torch
from torch.utils._pytree import tree_map

import kiln
from kiln.fx_ops import count_ops
from kiln.testing import Rules, assert_same


def clone(x):
    return tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, x)


def state(f):
    if isinstance(f, torch.nn.Module):
        return {k: v.detach().clone() for k, v in f.state_dict().items()}
    return {}


def round_trip(ep):
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    buf.seek(0)
    return torch.export.load(buf)


def input_checks(ep) -> list:
    """The program's checks of its tensor inputs' dtype, device and layout (which shape
    constraints cannot say): not counted as ops of the program."""
    user = set(ep.graph_signature.user_inputs)
    return [n for n in ep.graph.nodes if n.target is torch.ops.aten._assert_tensor_metadata.default
            and n.args[0].op == "placeholder" and n.args[0].name in user]


def _split(inputs):
    if len(inputs) == 2 and isinstance(inputs[0], tuple) and isinstance(inputs[1], dict):
        return inputs
    return inputs, {}


def check_export(f, args, kwargs=None, *, others=(), dynamic_shapes=None, ops=None, save=True,
                 rtol=None, atol=None, **export_options):
    """Export ``f`` with Kiln, check it and return the ExportedProgram.  ``others``: more
    inputs to compare on (an args tuple, or ``(args, kwargs)``); ``ops``: the exported
    graph's op count."""
    kwargs = kwargs or {}
    before = state(f)
    pristine = copy.deepcopy(f) if isinstance(f, torch.nn.Module) else f
    ep = kiln.export(f, args, kwargs, dynamic_shapes=dynamic_shapes, **export_options)
    assert isinstance(ep, torch.export.ExportedProgram)
    after = state(f)
    assert before.keys() == after.keys()
    for k in before:
        assert torch.equal(before[k], after[k]), f"exporting changed {k}"
    checks = input_checks(ep)
    for name, value in zip(ep.graph_signature.user_inputs, (*args, *kwargs.values())):
        if isinstance(value, torch.Tensor):   # a tensor argument: its dtype/device/layout checked
            assert any(n.args[0].name == name for n in checks), f"{name} has no metadata check"
    if ops is not None:
        assert count_ops(ep.graph_module) - len(checks) == ops, ep.graph_module.code
    loaded = round_trip(ep).module() if save else None
    programs = {"ep.module()": copy.deepcopy(ep.module())}
    if save:
        programs["saved and loaded"] = loaded
    eager = copy.deepcopy(pristine) if isinstance(f, torch.nn.Module) else f
    rules = Rules(rtol=rtol, atol=atol)
    for inputs in [(args, kwargs), *others]:
        a, kw = _split(inputs)
        expected = eager(*clone(a), **clone(kw))
        for name, prog in programs.items():
            assert_same(expected, prog(*clone(a), **clone(kw)), rules, name)
    for name, prog in programs.items():
        assert_same(state(eager), state(prog), rules, f"{name} state")
    return ep
