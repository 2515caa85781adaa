"""Negative programs: with ``fullgraph=True`` Kiln must refuse them with
``kiln.Unsupported`` naming the construct and pointing at the user's file:line (the
line marked ``# <-- refused``).  None of them may produce a graph."""
from __future__ import annotations

import math

import torch
import torch.nn as nn

import kiln
from .capture_harness import Refusal, run_refusal

import pytest


def x1(r):
    return (r.randn(3, 4),)


def f_print(x):
    y = x + 1
    print("y is", y)  # <-- refused
    return y


def f_branch_on_item(x):
    # .item() itself is captured (tests/capture/test_data_dependent.py); Python that needs
    # its value is what is refused
    s = x.sum().item()
    if s > 0:  # <-- refused
        return x * s
    return -x


def f_branch_on_tensor(x):
    if x.sum() > 0:  # <-- refused
        return x
    return -x


def f_generator(x):  # <-- refused
    yield x + 1


@kiln.disable
def _kiln_disabled(t):
    return t * 2


def f_calls_kiln_disabled(x):
    return _kiln_disabled(x) + 1  # <-- refused


def _torch_disabled_impl(t):
    return t * 3


_torch_disabled = torch.compiler.disable(_torch_disabled_impl)


def f_calls_torch_disabled(x):
    return _torch_disabled(x) - 1  # <-- refused


def f_max_of_tensors(x, y):
    return max(x, y)  # <-- refused


def f_branch_on_masked_size(x):
    y = x[x > 0]
    if y.shape[0] > 2:  # <-- refused
        return y
    return x


def f_range_of_nonzero_count(x):
    n = torch.nonzero(x > 0).shape[0]
    return [x * i for i in range(n)]  # <-- refused


def f_range_of_int_of_tensor(x):
    out = x
    for i in range(int(x.sum())):  # <-- refused
        out = out + i
    return out


def f_math_of_tensor(x):
    return math.sqrt(x.sum())  # <-- refused


def f_tolist(x):
    return x.tolist()  # <-- refused


def f_backward(x):
    y = (x * 2).sum()
    y.backward()  # <-- refused
    return y


def _helper_with_print(t):
    print(t.shape)  # <-- refused
    return t


def f_print_in_helper(x):
    return _helper_with_print(x * 2) + 1


def f_graph_break(x):
    y = x + 1
    kiln.graph_break()  # <-- refused
    return y


def f_class_definition(x):
    class Local:  # <-- refused
        pass
    return x


def f_list_index_of_tensor(x, y):
    return [x, y].index(y)  # <-- refused


def f_raises(x):
    raise ValueError("no")  # <-- refused


class _Hooked(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        # forward hooks are traced (tests/capture/test_torch_breadth.py); backward hooks
        # wrap the call in autograd nodes made in Python
        self.lin.register_full_backward_hook(lambda m, gi, go: None)

    def forward(self, x):
        return self.lin(x)  # <-- refused


REFUSALS = [
    Refusal("print", f_print, x1, r"print\(\)"),
    Refusal("branch_on_item", f_branch_on_item, x1, r"branching on .* computed from tensor data"),
    Refusal("branch_on_tensor", f_branch_on_tensor, x1, r"branching on the value of a tensor"),
    Refusal("generator_frame", f_generator, x1, r"generator function"),
    Refusal("kiln_disable", f_calls_kiln_disabled, x1, r"_kiln_disabled.*kiln\.disable"),
    Refusal("torch_compiler_disable", f_calls_torch_disabled, x1, r"_torch_disabled_impl.*torch\.compiler\.disable"),
    Refusal("max_of_tensors", f_max_of_tensors, lambda r: (r.randn(3), r.randn(3)), r"max\(\) over tensors"),
    Refusal("branch_on_masked_size", f_branch_on_masked_size, x1, r"branching on .* computed from tensor data"),
    Refusal("range_of_nonzero_count", f_range_of_nonzero_count, x1, r"computed from tensor data"),
    Refusal("range_of_int_of_tensor", f_range_of_int_of_tensor, x1, r"computed from tensor data"),
    Refusal("math_of_tensor", f_math_of_tensor, x1, r"math\.sqrt of a tensor"),
    Refusal("tolist", f_tolist, x1, r"Tensor\.tolist"),
    Refusal("backward", f_backward, lambda r: (r.randn(3, requires_grad=True),), r"backward\(\)"),
    Refusal("print_in_helper", f_print_in_helper, x1, r"print\(\)", where=_helper_with_print),
    Refusal("graph_break", f_graph_break, x1, r"graph break"),
    Refusal("class_definition", f_class_definition, x1, r"defining a class"),
    Refusal("list_index_of_tensor", f_list_index_of_tensor, lambda r: (r.randn(3), r.randn(3)),
            r"branching on the value of a tensor"),
    Refusal("frame_raises", f_raises, x1, r"raises ValueError"),
    Refusal("module_hooks", _Hooked(), x1, r"backward hooks"),
]


@pytest.mark.parametrize("case", REFUSALS, ids=[c.name for c in REFUSALS])
def test_refused(case):
    run_refusal(case)


_SEEN_COMPILING = []


@kiln.disable
def _disabled_probe(t):
    _SEEN_COMPILING.append(torch.compiler.is_compiling())
    return t * 2


def f_around_disabled(x):
    return _disabled_probe(x + 1) - 1


def test_disabled_function_runs_as_python_without_fullgraph():
    # not traced: it runs for real between two graphs, and sees is_compiling() False
    from kiln.testing import CompileCounter
    counter = CompileCounter()
    compiled = kiln.compile(f_around_disabled, backend=counter)
    _SEEN_COMPILING.clear()
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), f_around_disabled(x))
    assert _SEEN_COMPILING == [False, False]
    assert (counter.frame_count, counter.op_count) == (2, 2)
