"""Harness for graph-break scenarios.

``check`` runs a program eagerly and compiled (``kiln.compile`` with a fresh
``CompileCounter``) on every input set, each run on its own deep copy of the inputs,
and asserts that

* the results are equal (``kiln.comparison`` under ``RULES``: tensors by values, dtype,
  shape, requires_grad; containers, modules and objects by their contents),
* the inputs were mutated the same way,
* the printed output is identical (same lines, same order, same number),
* the side-effect log (``LOG``, appended to by ``log()``) is identical,
* outside state (``state()``) is the same after every run,
* the number of graphs after the first input set and after all of them, and the
  number of graph breaks Kiln recorded, are the expected ones, with no eager fallback,
* calling again with the first input set compiles nothing new.

Programs use ``log(...)`` for side effects that Kiln must replay (a list append it
traces) and ``shout(x)`` for a print that returns its argument (a value that passes
through a graph break on the stack).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import io

import torch

import kiln
from kiln.testing import CompileCounter, Rules, assert_same

LOG: list = []
# one buffer for every run, so that code reading sys.stdout sees the same object each time
_STDOUT = io.StringIO()


def log(*items):
    """A traced side effect: Kiln must replay the append, in order with the prints."""
    LOG.append(items if len(items) != 1 else items[0])


def shout(x, tag="value"):
    """Print (a graph break) and hand the argument back."""
    print(tag, _show(x))
    return x


def _show(x):
    if isinstance(x, torch.Tensor):
        return f"tensor{tuple(x.shape)}"
    return repr(x)


def randn(seed, *shape, requires_grad=False):
    g = torch.Generator().manual_seed(1000 + seed)
    return torch.randn(*shape, generator=g).requires_grad_(requires_grad)


def seeds(make, n=2):
    """Input sets made by ``make(seed)`` for seeds 0..n-1."""
    return [make(s) for s in range(n)]


# -------------------------------------------------------------------------------------
# comparison


#: tensors within assert_close's default tolerance (NaN equal), Python floats within 1e-5
#: relative / 1e-6 absolute; a compiled module is an instance of a subclass of the module's class
RULES = Rules(float_rtol=1e-5, float_atol=1e-6, module_subclass=True)


def same(expected, actual, path="result"):
    assert_same(expected, actual, RULES, path)


# -------------------------------------------------------------------------------------
# running


@dataclasses.dataclass
class Run:
    outcome: str          # "ok" or "raised"
    value: object         # the result, or (exception type, message)
    printed: str
    log: list
    args: tuple
    state: object


def _run(fn, args, setup, state, grad):
    args = copy.deepcopy(args)
    if setup is not None:
        setup()
    LOG.clear()
    out = _STDOUT
    out.seek(0)
    out.truncate()
    with contextlib.redirect_stdout(out), torch.set_grad_enabled(grad):
        try:
            result = ("ok", fn(*args))
        except Exception as e:  # noqa: BLE001 - compared with eager
            result = ("raised", (type(e), str(e)))
    return Run(result[0], result[1], out.getvalue(), list(LOG), args, state() if state is not None else None)


def _compare(eager: Run, compiled: Run, where: str):
    assert compiled.printed == eager.printed, \
        f"{where}: printed output differs\n--- eager ---\n{eager.printed}--- compiled ---\n{compiled.printed}"
    assert compiled.outcome == eager.outcome, f"{where}: eager {eager.outcome} {eager.value!r}, " \
                                              f"compiled {compiled.outcome} {compiled.value!r}"
    if eager.outcome == "ok":
        same(eager.value, compiled.value, f"{where}: result")
    else:
        assert compiled.value == eager.value, f"{where}: exception {compiled.value} != {eager.value}"
    same(eager.log, compiled.log, f"{where}: side-effect log")
    same(eager.args, compiled.args, f"{where}: inputs after the call")
    same(eager.state, compiled.state, f"{where}: outside state")


def check(fn, inputs, *, graphs, total_graphs=None, breaks=None, total_breaks=None, setup=None, state=None,
          grad=True, module=False, min_prints=0, fallbacks=0, raises=None):
    """Compare eager and compiled ``fn`` on every input set (a list of argument tuples).

    ``graphs``/``breaks``: graphs compiled and graph breaks recorded after the first input
    set; ``total_graphs``/``total_breaks``: after all of them (default: no more).
    ``module=True``: ``fn`` is an nn.Module; eager and compiled each get their own copy.
    ``fallbacks``: frames expected to run eagerly (e.g. a continuation that always raises).
    ``raises``: the exception type eager raises (by default eager must return).
    Returns the compiled callable and its counter.
    """
    assert len(inputs) >= 2, "every scenario runs on at least two input sets"
    total_graphs = graphs if total_graphs is None else total_graphs
    if total_breaks is None:
        total_breaks = breaks
    counter = CompileCounter()
    eager_fn = copy.deepcopy(fn) if module else fn
    compiled = kiln.compile(copy.deepcopy(fn) if module else fn, backend=counter)
    runs = []
    for i, args in enumerate(inputs):
        eager = _run(eager_fn, args, setup, state, grad)
        if raises is None:
            assert eager.outcome == "ok", f"input set {i}: eager raised {eager.value}"
        else:
            assert eager.outcome == "raised" and eager.value[0] is raises, f"eager: {eager.value!r}"
        got = _run(compiled, args, setup, state, grad)
        _compare(eager, got, f"input set {i}")
        if module:
            same(eager_fn, compiled, f"input set {i}: module after the call")
        runs.append(eager)
        if i == 0:
            assert counter.frame_count == graphs, f"graphs after the first input set: {counter.frame_count}, " \
                                                  f"expected {graphs}"
            if breaks is not None:
                assert len(kiln.metrics.breaks) == breaks, _breaks_message(breaks)
    assert counter.frame_count == total_graphs, f"graphs after all input sets: {counter.frame_count}, " \
                                                f"expected {total_graphs}"
    if total_breaks is not None:
        assert len(kiln.metrics.breaks) == total_breaks, _breaks_message(total_breaks)
    assert kiln.metrics.eager_fallbacks == fallbacks, f"eager fallbacks: {kiln.metrics.breaks}"
    assert sum(r.printed.count("\n") for r in runs) >= min_prints, "the scenario should print"
    # the same input set again hits the cache: no capture, no new graph
    captured = kiln.metrics.frames_captured
    again = _run(compiled, inputs[0], setup, state, grad)
    _compare(runs[0], again, "first input set again")
    assert counter.frame_count == total_graphs, "calling again with the same input set compiled a new graph"
    assert kiln.metrics.frames_captured == captured, "calling again with the same input set captured a frame"
    return compiled, counter


def _breaks_message(expected):
    got = kiln.metrics.breaks
    return f"graph breaks: {len(got)}, expected {expected}:\n" + "\n".join(f"  {b}" for b in got)
