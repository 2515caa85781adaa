"""torch C helpers whose answer depends only on tensor metadata, answered at trace time.

``torch._C._group_tensors_by_device_and_dtype`` (the foreach paths of the optimizers and
of gradient clipping) sorts lists of tensors by device and dtype.  Recorded as a graph
op it would return a dict of lists, which a graph cannot hand back; but device and dtype
are fixed facts of every tensor Kiln traces (guarded with the tensor), so the grouping is
done here on the fakes and yields the same Values, in the same order, as eager's lists.
"""
from __future__ import annotations

import torch

from ...exc import Unsupported
from .base import ConstantValue, Value, const
from .containers import DictValue, ListValue, TupleValue
from .tensor import TensorValue


class GroupTensorsByDeviceAndDtypeValue(Value):
    """``_group_tensors_by_device_and_dtype(tensorlistlist, with_indices=False)``:
    ``{(device, dtype): ([list per input list], [indices])}``, keyed by the first list's
    tensors; the other lists' entries (tensors or None) follow them."""

    def __init__(self, fn):
        self.fn = fn

    def real_object(self):
        return self.fn

    def describe(self):
        return "torch._C._group_tensors_by_device_and_dtype"

    def call(self, tx, args, kwargs):
        lists = args[0] if args else kwargs["tensorlistlist"]
        with_indices = args[1] if len(args) > 1 else kwargs.get("with_indices", const(False))
        if not isinstance(with_indices, ConstantValue):
            raise Unsupported(f"{self.describe()} with a non-constant with_indices")
        rows = [item.unpack(tx) for item in lists.unpack(tx)]
        if not rows:
            return DictValue({})
        groups: dict = {}
        for i, t in enumerate(rows[0]):
            if not isinstance(t, TensorValue):
                raise Unsupported(f"{self.describe()} over {t.describe()}")
            key = (t.fake.device, t.fake.dtype)
            cols, indices = groups.setdefault(key, ([[] for _ in rows], []))
            for col, row in zip(cols, rows):
                if row:   # an empty list stays empty in every group (amsgrad's when unused)
                    col.append(row[i])
            indices.append(const(i))
        # the C++ map's order is eager's order of the groups (and so of the ops made per
        # group): asked of the real function on empty tensors of the same kinds
        probe = [torch.empty(0, device=d, dtype=dt) for d, dt in groups]
        order = list(self.fn([probe], False))
        out = {}
        for key in order:
            cols, indices = groups[key]
            out[key] = TupleValue([ListValue([ListValue(c) for c in cols]),
                                   ListValue(indices if with_indices.value else [])])
        return DictValue(out)


def tensor_metadata_functions() -> dict:
    return {torch._C._group_tensors_by_device_and_dtype:
            GroupTensorsByDeviceAndDtypeValue(torch._C._group_tensors_by_device_and_dtype)}
