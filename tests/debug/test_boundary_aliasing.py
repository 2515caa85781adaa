"""Aliasing-only bugs at the compiled function's boundary (issue #30, the second seed's class).

Each planted backend (tests/debug/planted_backends.py) gets every value right and one
aliasing or mutation fact wrong, on the function's own plain-tensor arguments and
results: an output that is a view of an argument comes back as a copy; an argument
changed in place without its version counter moving; an argument left alone whose
version counter moves; two outputs eager computes apart returned as one tensor.
``check_same_behaviour`` finds each; so must ``bisect`` (the graph and op) and
``minify`` (a repro that fails alone, passes with ``--backend eager`` and says what it
checked), and a correct backend must not be blamed for any of these programs.
"""
import pytest
import torch

import kiln
from kiln.debug import bisect, check_same_behaviour, minify
from tests.debug import planted_backends as planted
from tests.debug.test_minify import assert_repro_blames_backend, repro_text

pytestmark = pytest.mark.filterwarnings("ignore")


def first_eight(x):
    scale = x.abs().max()              # graph 1: right under every backend here
    kiln.graph_break()
    return x.view(-1)[:8], scale       # graph 2: the output is a view of x


class Transposer(torch.nn.Module):
    def forward(self, x):
        return x.transpose(0, 1)


def doubles_in_place(x, y):
    x.mul_(2)
    return (x + y).sin()


def products(x, y):
    return (x * y).cos()


def twins(x):
    a = x * 2
    b = x + x
    return a.tanh(), b.tanh()


def _args(*shapes):
    torch.manual_seed(0)
    return tuple(torch.randn(*s) for s in shapes)


# fn, its argument shapes, backend, the failure's kind and text, the graph (counting
# from 1) and the op bisect blames
CASES = {
    "output view of an argument": (first_eight, [(4, 4)], planted.returns_copies, "aliasing",
                                   "output 0 shares memory with x in eager but with no input when compiled", 2, "view"),
    "module output view": (Transposer(), [(3, 5)], planted.returns_copies, "aliasing",
                           "output 0 shares memory with x in eager but with no input when compiled", 1, "transpose"),
    "mutation without version bump": (doubles_in_place, [(3, 4), (3, 4)], planted.mutates_behind_autograd, "mutation",
                                      "x was changed without bumping its version counter when compiled", 1, "mul_"),
    "version bump without mutation": (products, [(3, 4), (3, 4)], planted.borrows_input_buffers, "mutation",
                                      "had its version counter bumped when compiled but not in eager", 1, "mul"),
    "outputs sharing memory": (twins, [(3, 4)], planted.merges_equal_outputs, "aliasing",
                               "output 0 and output 1 share storage when compiled but not in eager", 1, "tanh"),
}


#: where the minimized graph keeps another op than the one bisect blames: the two equal
#: values are ``x * 2`` and ``x + x`` themselves (the ``tanh``s are not needed)
REPRO_OP = {"outputs sharing memory": "add"}


def _fresh(fn):
    return type(fn)() if isinstance(fn, torch.nn.Module) else fn


@pytest.mark.parametrize("case", list(CASES))
def test_the_planted_bug_is_real(case):
    fn, shapes, backend, *_ = CASES[case]
    kiln.reset()
    compiled = kiln.compile(_fresh(fn), backend=backend)
    args = _args(*shapes)
    report = check_same_behaviour(_fresh(fn), compiled, lambda: [a.clone() for a in args])
    assert not report.ok and report.aliasing and bool(report.outputs), report


@pytest.mark.parametrize("case", list(CASES))
def test_bisect_finds_it(case):
    fn, shapes, backend, kind, text, graph, op = CASES[case]
    result = bisect(_fresh(fn), _args(*shapes), backend=backend)
    assert result.graph_index == graph - 1, result
    assert result.op == op, result
    assert "nothing fails" not in result.summary


@pytest.mark.parametrize("case", list(CASES))
def test_minify_writes_a_repro_that_fails_alone(case, tmp_path):
    fn, shapes, backend, kind, text, graph, op = CASES[case]
    args = _args(*shapes)
    kept = [a.clone() for a in args]
    result = minify(_fresh(fn), args, backend=backend, out_dir=str(tmp_path))
    assert result.path is not None, result
    assert result.graph_index == graph - 1
    assert text in result.reason
    assert all(torch.equal(a, k) for a, k in zip(args, kept))    # the arguments were not changed
    source = repro_text(result)
    assert REPRO_OP.get(case, op) in source
    assert f"Failure kept by the minifier ({kind}): " in source
    assert "Checked: values (against a float64 reference); aliasing (" in source and "; mutation (" in source
    assert "is_view=False" in source          # the argument was a plain tensor, and is rebuilt as one
    assert_repro_blames_backend(result.path)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_correct_backend_is_not_blamed(case, backend):
    fn, shapes, *_ = CASES[case]
    result = bisect(_fresh(fn), _args(*shapes), backend=backend)
    assert result.graph_index is None and result.summary.startswith("nothing fails"), result
    found = minify(_fresh(fn), _args(*shapes), backend=backend, out_dir=None)
    assert found.path is None and found.reason.startswith("nothing fails"), found


def test_input_views_in_the_program_stay_views_in_the_repro(tmp_path):
    """An argument that is a view of another (the minifier's own aliasing case) is rebuilt
    as a view of the rebuilt argument, not as one more view of a flat buffer."""
    from kiln.debug.inputs import InputSet
    base = torch.randn(4, 6)
    (a, v), _ = InputSet.snapshot([base, base.view(6, 4)], ["a", "v"]).build()
    assert not a._is_view() and v._is_view() and v._base is a
    (x,), _ = InputSet.snapshot([base[1:]], ["x"]).build()
    assert x._is_view() and x.storage_offset() == 6     # a view of a buffer not passed in
