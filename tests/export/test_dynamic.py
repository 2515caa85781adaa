"""kiln.export with dynamic_shapes: the Dims become range_constraints, other sizes in
range give eager's results, a size outside a range raises a clear error, and a range
wider than what the traced Python handles alike is refused naming the line."""
from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import kiln
from kiln.bench.export_programs import Mixer
from tests.export.harness import check_export


def test_dims_become_range_constraints_and_other_sizes_work():
    B, T = Dim("B", min=2, max=16), Dim("T", min=5, max=32)
    ep = check_export(Mixer(), (torch.randn(3, 6, 8),), dynamic_shapes={"x": {0: B, 1: T}},
                      others=[(torch.randn(5, 9, 8),), (torch.randn(16, 32, 8),), (torch.randn(2, 5, 8),)], ops=8)
    ranges = sorted((int(r.lower), int(r.upper)) for r in ep.range_constraints.values())
    assert ranges == [(2, 16), (5, 32)]


def test_size_outside_the_range_raises():
    ep = kiln.export(Mixer(), (torch.randn(3, 6, 8),),
                     dynamic_shapes={"x": {0: Dim("B", min=2, max=16), 1: Dim("T", min=5, max=32)}})
    with pytest.raises(Exception, match=r"x.size\(\)\[1\] <= 32"):
        ep.module()(torch.randn(3, 40, 8))
    with pytest.raises(Exception, match=r"x.size\(\)\[2\] == 8|Expected input"):
        ep.module()(torch.randn(3, 6, 9))


def test_range_wider_than_the_branch_is_refused_naming_the_line():
    with pytest.raises(kiln.exc.ConstraintViolation, match=r"(?s)assumed.*export_programs.py:\d+.*T2"):
        kiln.export(Mixer(), (torch.randn(3, 6, 8),),
                    dynamic_shapes={"x": {0: Dim("B"), 1: Dim("T2", min=2, max=32)}})


def test_named_dim_specialised_by_the_program_names_the_line():
    def f(x):
        n = int(x.shape[0])          # makes the size a constant
        return x.reshape(n, -1) * n

    with pytest.raises(kiln.KilnError, match=r"test_dynamic.py:\d+"):
        kiln.export(f, (torch.randn(4, 3),), dynamic_shapes=({0: Dim("n")},))


def test_auto_and_tuple_form_and_nested_inputs():
    def f(batch, w):
        return (batch["a"] @ w).relu() + batch["b"].unsqueeze(-1)

    a, b, w = torch.randn(4, 3), torch.randn(4), torch.randn(3, 5)
    check_export(f, ({"a": a, "b": b}, w), dynamic_shapes=({"a": {0: Dim.AUTO}, "b": {0: Dim.AUTO}}, None),
                 others=[({"a": torch.randn(7, 3), "b": torch.randn(7)}, torch.randn(3, 5))], ops=4)


def test_shared_dim_across_inputs():
    def f(x, y):
        return torch.cat([x, y], dim=1) * 2

    n = Dim("n", min=2, max=64)
    ep = check_export(f, (torch.randn(4, 2), torch.randn(4, 3)), dynamic_shapes={"x": {0: n}, "y": {0: n}},
                      others=[(torch.randn(9, 2), torch.randn(9, 3))], ops=2)
    assert len(ep.range_constraints) == 1


def test_dynamic_int_argument_is_symbolic_in_the_graph():
    def scaled(x, n):
        return x.repeat(n) * n

    ep = check_export(scaled, (torch.randn(3), 4), dynamic_shapes=(None, Dim.DYNAMIC),
                      others=[(torch.randn(3), 5), (torch.randn(3), 9)])
    assert len(ep.range_constraints) >= 1


def test_number_that_cannot_be_dynamic_is_refused():
    def f(x, n):
        return x * n

    with pytest.raises(ValueError, match="0 and 1"):
        kiln.export(f, (torch.randn(3), 1), dynamic_shapes=(None, Dim.DYNAMIC))
    with pytest.raises(ValueError, match="floats are constants"):
        kiln.export(f, (torch.randn(3), 2.5), dynamic_shapes=(None, Dim.DYNAMIC))


def test_a_size_kiln_kept_static_is_never_symbolic_in_the_program(monkeypatch):
    """Should the two halves ever read a spec differently, the sizes Kiln's capture kept
    static are checked in the traced function, so torch.export specialises them (AUTO)
    or refuses (a named Dim) instead of exporting the example's branch for every size."""
    import kiln.exporting
    from kiln.export_shapes import ExportShapes

    monkeypatch.setattr(kiln.exporting, "export_shapes", lambda *a: ExportShapes({}, []))

    def f(x):
        return x * 2 if x.shape[0] > 2 else x

    ep = kiln.export(f, (torch.randn(4),), dynamic_shapes=({0: Dim.AUTO},))
    assert not ep.range_constraints
    with pytest.raises(Exception, match="Constraints violated|specialized"):
        kiln.export(f, (torch.randn(4),), dynamic_shapes=({0: Dim("n")},))


def test_dataclass_input_with_a_dynamic_field():
    import dataclasses

    import torch.utils._pytree as pytree

    @dataclasses.dataclass
    class Batch:
        x: torch.Tensor

    pytree.register_dataclass(Batch)

    def f(b):
        return b.x * 2 if b.x.shape[0] > 2 else b.x

    ep = check_export(f, (Batch(torch.randn(4)),), dynamic_shapes=([{0: Dim.AUTO}],),
                      others=[(Batch(torch.randn(9)),)], save=False)
    with pytest.raises(Exception, match=r"b.x.size\(\)\[0\] >= 3"):
        ep.module()(Batch(torch.ones(2)))
