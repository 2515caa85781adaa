"""Outputs that are views, rebuilt by the glue with eager's layout (issue #30, Task A).

A backend may return as a copy an output eager returns as a view: of an input that is
itself a view of a larger tensor, or of another output.  The glue then re-views the
output (``runtime.outputs.view_of_detached`` / ``rebuild_view``) and must use eager's
size, stride and storage offset relative to the tensor it re-views (``capture.frames.view_layout``),
never the copy's own layout: ``x.view(-1)[8:]`` of a view ``x`` came back as elements
0..7 instead of 8..15.  Each program runs eager and compiled on two input sets and the
results are compared in values, strides, storage offsets and aliasing (a write through
the output reaches the input exactly as in eager), under a planted backend that copies
every output and under ``eager`` and ``aot_eager``.
"""
import pytest
import torch

import kiln
from kiln.testing import CompileCounter

pytestmark = pytest.mark.filterwarnings("ignore")


class CopyingCounter(CompileCounter):
    """Counts graphs, runs each as it is and returns a ``.clone()`` of every output:
    right values, no output a view of anything."""

    runs_graph_as_is = True

    def __call__(self, gm, example_inputs):
        run = super().__call__(gm, example_inputs)
        return lambda *args: tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in run(*args))


def flat_tail(x):
    return x.view(-1)[8:]


def transposed(x):
    return x.transpose(0, 1)


def stepped(x):
    return x[1:, ::2]


def flat_stepped(x):
    return x.view(-1)[3::3]


def row(x):
    return x[2]


def product_and_tail(x):
    y = x * 2
    return y, y.view(-1)[4:]


PROGRAMS = {"flat tail": (flat_tail, 1), "transpose": (transposed, 1), "slice with steps": (stepped, 1),
            "flat slice with a step": (flat_stepped, 1), "select": (row, 1),
            "view of another output": (product_and_tail, 1)}


def _input(seed: int, start: int = 5, shape=(4, 6)):
    """A view of a larger buffer, at a nonzero storage offset (fresh each time)."""
    n = shape[0] * shape[1]
    big = torch.arange(64.0) * (seed + 1)
    return big[start:start + n].view(*shape)


def _outputs(result):
    return list(result) if isinstance(result, tuple) else [result]


def _assert_like_eager(fn, compiled, make_input):
    x_eager, x_compiled = make_input(), make_input()
    expected, actual = _outputs(fn(x_eager)), _outputs(compiled(x_compiled))
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        assert torch.equal(e, a), (e, a)
        assert (a.shape, a.stride(), a.storage_offset()) == (e.shape, e.stride(), e.storage_offset())
        shares = a.untyped_storage().data_ptr() == x_compiled.untyped_storage().data_ptr()
        assert shares == (e.untyped_storage().data_ptr() == x_eager.untyped_storage().data_ptr())
    for e, a in zip(expected, actual):       # writes through the outputs reach the inputs as in eager
        e.add_(1000)
        a.add_(1000)
    assert torch.equal(x_eager, x_compiled)
    assert torch.equal(x_eager._base, x_compiled._base)


@pytest.mark.parametrize("backend", ["copies", "eager", "aot_eager"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_view_outputs_of_view_inputs_have_eagers_layout(name, backend):
    fn, graphs = PROGRAMS[name]
    counter = CopyingCounter() if backend == "copies" else None
    compiled = kiln.compile(fn, backend=counter or backend, fullgraph=True)
    for seed in (0, 1):
        _assert_like_eager(fn, compiled, lambda: _input(seed))
    if counter is not None:
        assert counter.frame_count == graphs and counter.op_count >= 1


def test_the_reported_case_gives_eagers_elements():
    """The reported case: eager gives elements 8..15 of ``x``; the copying backend's
    glue gave 0..7 (the copy's offset 0 applied to ``x``'s buffer)."""
    counter = CopyingCounter()
    compiled = kiln.compile(flat_tail, backend=counter)
    x = torch.arange(32.0)[16:]
    assert compiled(x).tolist() == flat_tail(x).tolist() == [24.0 + i for i in range(8)]
    assert compiled(x).storage_offset() == 24
    assert (counter.frame_count, counter.op_count) == (1, 2)


@pytest.mark.parametrize("name", ["flat tail", "transpose", "slice with steps", "view of another output"])
def test_symbolic_sizes_render_eagers_layout(name):
    """With dynamic sizes the layout is an expression of the input's sizes, rendered in
    the glue; two calls of different shapes share one graph."""
    fn, _ = PROGRAMS[name]
    counter = CopyingCounter()
    compiled = kiln.compile(fn, backend=counter, dynamic=True)
    for seed, (start, shape) in enumerate([(5, (4, 6)), (3, (5, 7)), (7, (6, 3))]):
        _assert_like_eager(fn, compiled, lambda: _input(seed, start, shape))
    assert counter.frame_count == 1


def test_plain_inputs_under_the_copying_backend_keep_right_values():
    """A view of an input that is not itself a view is returned by the copying backend
    as its copy (the bug is the backend's, for ``kiln bisect`` to find): right values."""
    compiled = kiln.compile(flat_tail, backend=CopyingCounter())
    for seed in (0, 1):
        x = torch.arange(24.0).reshape(4, 6).clone() * (seed + 1)
        assert not x._is_view()
        assert torch.equal(compiled(x), flat_tail(x))
