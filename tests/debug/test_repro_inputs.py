"""InputSet: inputs rebuilt with their layout, autograd role, values and aliasing."""
import torch

from kiln.debug.inputs import InputSet, decode, is_literal
from kiln.debug.repro import load_repro


def test_views_of_one_buffer_are_rebuilt_as_views_of_one_buffer():
    base = torch.arange(24.0)
    a = base[2:].view(2, 11)
    b = base.view(4, 6).t()          # non-contiguous
    c = torch.ones(3)
    snap = InputSet.snapshot([a, b, c, 7], ["a", "b", "c", "n"])
    assert len(snap.storages) == 2
    (ra, rb, rc, n), leaves = snap.build()
    assert n == 7 and leaves == []
    for real, rebuilt in ((a, ra), (b, rb), (c, rc)):
        assert rebuilt.shape == real.shape and rebuilt.stride() == real.stride()
        assert rebuilt.storage_offset() == real.storage_offset()
        assert torch.equal(rebuilt, real)
    assert ra.untyped_storage().data_ptr() == rb.untyped_storage().data_ptr()
    assert rc.untyped_storage().data_ptr() != ra.untyped_storage().data_ptr()
    ra.mul_(10)                       # a write through one is seen through the other
    assert rb[0, 1] == 10 * base[6] and rb[0, 0] == base[0]
    assert snap.aliasing_summary() == "inputs a, b share one buffer"


def test_independent_build_drops_only_the_sharing():
    base = torch.randn(4, 6)
    snap = InputSet.snapshot([base, base.view(6, 4)], ["a", "v"])
    (a, v), _ = snap.build(independent=True)
    assert a.untyped_storage().data_ptr() != v.untyped_storage().data_ptr()
    assert torch.equal(a, base) and torch.equal(v, base.view(6, 4))


def test_autograd_roles():
    w = torch.randn(3, 3, requires_grad=True)            # a leaf, like a parameter
    h = (torch.randn(2, 3, requires_grad=True) * 2)      # an activation: not a leaf
    snap = InputSet.snapshot([w, h, h.view(3, 2)], ["w", "h", "hv"])
    (rw, rh, rhv), leaves = snap.build()
    assert rw.is_leaf and rw.requires_grad and rw is leaves[0]
    assert not rh.is_leaf and rh.requires_grad and rhv.requires_grad
    assert len(leaves) == 2 and snap.leaf_names() == ["w", "h"]
    rh.mul_(2)                        # in place on a non-leaf view: allowed, as in the real run


def test_float64_build_and_integer_values_are_exact():
    ids = torch.randint(0, 1000, (2, 5))
    x = torch.randn(2, 5)
    (rids, rx), _ = InputSet.snapshot([ids, x]).build(float64=True)
    assert rids.dtype == torch.int64 and torch.equal(rids, ids)
    assert rx.dtype == torch.float64 and torch.equal(rx, x.double())


def test_source_round_trip():
    base = torch.randn(5, 4)
    snap = InputSet.snapshot([base, base[1:].t(), torch.tensor([True, False]), (2, 3)], ["a", "b", "m", "shape"])
    module = load_repro("import torch\nfrom kiln.debug.inputs import InputSet, StorageSpec, TensorInput, "
                        "ValueInput, decode\nINPUTS = " + snap.to_source())
    (a, b, m, shape), _ = module.INPUTS.build()
    assert torch.equal(a, base) and torch.equal(b, base[1:].t()) and b.stride() == base[1:].t().stride()
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    assert m.dtype == torch.bool and torch.equal(m, torch.tensor([True, False]))
    assert shape == (2, 3)


def test_literals():
    assert is_literal((1, 2.5, None, torch.float16)) and not is_literal(float("nan")) and not is_literal(object())
