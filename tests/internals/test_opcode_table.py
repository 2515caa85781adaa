"""The version table (kiln/capture/basics/opcodes.py) covers every opcode of the running CPython.

Each opcode ``dis.opmap`` lists is either handled (a handler in capture/handlers) or
named unsupported with a reason (the graph break's message); no row is both, and every
row's versions are ones Kiln supports.  Runs on every supported version.
"""
from __future__ import annotations

import dis

from kiln.capture.semantics.handlers import HANDLERS
from kiln.capture.basics.opcodes import HAS_ARG, LAYOUT, OPS, ROWS, RUNNING, SUPPORTED_VERSIONS


def test_every_opcode_is_handled_or_named_unsupported():
    missing = []
    for name in dis.opmap:
        row = ROWS.get(name)
        if row is None:
            missing.append(f"{name}: no row in the version table")
        elif row.unsupported is None and name not in HANDLERS:
            missing.append(f"{name}: neither handled nor named unsupported")
    assert not missing, "\n".join(missing)


def test_every_handler_serves_a_version():
    """A handler is for an opcode some supported version has and Kiln traces there."""
    traced = {op.name for op in OPS if op.unsupported is None}
    assert not set(HANDLERS) - traced, sorted(set(HANDLERS) - traced)


def test_rows_name_only_real_opcodes_of_their_versions():
    for name, row in ROWS.items():
        assert name in dis.opmap, f"{name} has a row for {RUNNING} but this CPython has no such opcode"
    for op in OPS:
        assert set(op.versions) <= set(SUPPORTED_VERSIONS), op
    # one row per opcode and version
    seen = set()
    for op in OPS:
        for v in op.versions:
            assert (op.name, v) not in seen, f"{op.name} has two rows for {v}"
            seen.add((op.name, v))


def test_the_running_version_has_a_layout():
    assert LAYOUT.version == RUNNING


def test_stack_inputs_agree_with_dis_where_dis_knows():
    """A row's input count never makes an instruction push a negative number of items."""
    for name, row in ROWS.items():
        if row.inputs is None or row.outputs is not None:
            continue
        code = dis.opmap[name]
        for arg in ((1, 2, 3, 7) if code in HAS_ARG else (None,)):
            inputs = row.inputs(arg or 0) if callable(row.inputs) else row.inputs
            try:
                effect = dis.stack_effect(code, arg)
            except ValueError:
                continue
            assert inputs + effect >= 0, (name, arg, inputs, effect)
