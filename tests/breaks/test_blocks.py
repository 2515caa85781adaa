"""Breaks inside blocks: grad-mode context managers (requires_grad of the outputs must
match eager) and try/except/finally (handlers still run after a break)."""
from __future__ import annotations

import torch

import kiln

from .harness import check, log, randn, seeds


def grad_inputs(s):
    return (randn(s, 3, requires_grad=True),)


def test_break_inside_no_grad():
    def f(x):
        y = x * 2
        with torch.no_grad():
            z = y + 1
            print("inside no_grad")
            w = z * 3
        return y, z, w, w + x

    check(f, seeds(grad_inputs), graphs=2, breaks=1)


def test_break_at_start_of_no_grad():
    def f(x):
        with torch.no_grad():
            print("first thing")
            a = x.sin()
        b = x.cos()
        return a, b

    # graph 1 is only the switch into no_grad (entering the block is recorded in the
    # graph); graph 2 the rest
    check(f, seeds(grad_inputs), graphs=2, breaks=1)


def test_break_inside_enable_grad_within_no_grad():
    def f(x):
        with torch.no_grad():
            a = x * 2
            with torch.enable_grad():
                b = x * 3
                kiln.graph_break()
                c = b + x
            d = c * 2
        return a, b, c, d

    check(f, seeds(grad_inputs), graphs=2, breaks=1)


def test_break_inside_enable_grad_called_under_no_grad():
    def f(x):
        y = x + 1
        with torch.enable_grad():
            z = x * x
            print("grad enabled:", torch.is_grad_enabled())
            z = z.sum()
        return y, z

    check(f, seeds(grad_inputs), graphs=2, breaks=1, grad=False)


def test_two_breaks_in_no_grad_and_after():
    def f(x):
        with torch.no_grad():
            a = x.exp()
            print("one")
            b = a * x
            print("two", torch.is_grad_enabled())
        print("three", torch.is_grad_enabled())
        return a, b, (b + x).sum()

    # graphs: exp, a * x, the switch back to grad mode at the block's exit, the tail
    check(f, seeds(grad_inputs), graphs=4, breaks=3)


def test_item_break_in_no_grad():
    def f(x):
        with torch.no_grad():
            scale = x.abs().max().tolist()   # a break (item() would be captured)
        return x / scale

    # the float enters the continuation's graph as a 0-d tensor input: no recompile
    check(f, seeds(grad_inputs), graphs=2, breaks=1)


def test_break_in_try_body():
    def f(x):
        try:
            y = x + 1
            print("in try")
            y = y * 2
        except ValueError:
            y = x
        return y

    check(f, seeds(lambda s: (randn(s, 4),)), graphs=2, breaks=1)


def test_exception_after_break_caught_by_handler():
    def f(x, fail):
        y = x * 2
        try:
            print("before raise")
            y = y + 1
            if fail:
                raise ValueError("boom")
            y = y * 10
        except ValueError as e:
            log("caught", repr(e))
            y = y - 100
        return y

    # the continuation raises and its handler catches; repr() of the traced exception is
    # a second break (inside the handler, with the exception on the stack; str() of a
    # builtin exception is folded since issue #24's fix, so it no longer breaks)
    check(f, [(randn(0, 3), True), (randn(1, 3), True)], graphs=3, breaks=2)


def test_exception_after_break_both_paths():
    def f(x, fail):
        y = x * 2
        try:
            print("before raise")
            if fail:
                raise KeyError("k")
            y = y * 10
        except KeyError:
            log("handled")
            y = -y
        return y

    # the bool is specialised: the second input set recompiles the continuation
    check(f, [(randn(0, 3), True), (randn(1, 3), False)], graphs=2, total_graphs=3, breaks=1)


def test_exception_from_a_breaking_call_is_caught():
    def explode(x):
        print("exploding")
        raise RuntimeError("bad " + str(tuple(x.shape)))

    def f(x):
        y = x.sin()
        try:
            explode(y)
        except RuntimeError as e:
            log(str(e))
            y = y + 1
        return y

    # the call breaks f; explode() gets a tensor, so it is compiled as its own frame: it
    # breaks at its print, and its continuation always raises, so that one runs eagerly
    # (a break record and a fallback).  The exception reaches f's handler inside the
    # step function, which runs the rest of f as plain Python: one graph (y.sin()).
    check(f, seeds(lambda s: (randn(s, 2),)), graphs=1, breaks=2, fallbacks=1)


def test_finally_runs_after_break():
    def f(x):
        try:
            y = x + 1
            print("body")
            y = y * 3
        finally:
            log("finally")
            print("cleanup")
        return y

    check(f, seeds(lambda s: (randn(s, 4),)), graphs=2, breaks=2)


def test_finally_runs_when_exception_escapes():
    def f(x):
        try:
            print("body")
            x = x + 1
            raise ValueError("escapes")
        finally:
            log("finally ran")

    # eager raises; so does compiled, after the same prints and log.  The continuation
    # always raises, so Kiln runs it eagerly (recorded as a break and a fallback)
    check(f, seeds(lambda s: (randn(s, 4),)), graphs=0, breaks=2, fallbacks=1, raises=ValueError)


def test_break_inside_except_handler():
    def f(x):
        try:
            d = {}
            y = d["missing"]
        except KeyError:
            y = x * 5
            print("in handler")
            y = y + 1
        return y

    check(f, seeds(lambda s: (randn(s, 3),)), graphs=2, breaks=1)


def test_nested_try_with_break():
    def f(x):
        out = []
        try:
            try:
                out.append(x + 1)
                print("inner")
                raise IndexError("inner error")
            finally:
                out.append(x * 2)
                log("inner finally")
        except IndexError:
            out.append(x - 1)
            log("outer handler")
        return out

    check(f, seeds(lambda s: (randn(s, 3),)), graphs=2, breaks=1)


class Section:
    """A user context manager that logs its entry and exit."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        log("enter", self.name)
        return self

    def __exit__(self, *exc):
        log("exit", self.name, exc[0] is not None)
        return False


def test_break_inside_user_context_manager_made_in_frame():
    def f(x):
        with Section("made") as sec:
            y = x + 1
            print("inside", sec.name)
            y = y * 2
        return y

    check(f, seeds(lambda s: (randn(s, 3),)), graphs=2, breaks=1)


SECTION = Section("global")


def test_break_inside_global_user_context_manager():
    def f(x):
        with SECTION:
            y = x + 1
            kiln.graph_break()
            y = y * 2
        return y

    check(f, seeds(lambda s: (randn(s, 3),)), graphs=2, breaks=1)


def test_user_context_manager_sees_exception_after_break():
    def f(x):
        try:
            with Section("failing"):
                print("about to fail")
                raise KeyError("in with")
        except KeyError:
            log("handled outside")
        return x * 2

    check(f, seeds(lambda s: (randn(s, 3),)), graphs=1, breaks=1)


def test_break_between_set_grad_enabled_calls():
    def f(x):
        torch.set_grad_enabled(False)
        y = x * 2
        print("grad", torch.is_grad_enabled())
        torch.set_grad_enabled(True)
        return y, x * 3

    check(f, seeds(grad_inputs), graphs=2, breaks=1)


def test_backward_inside_the_compiled_function():
    def f(x):
        w = x * 2
        loss = (w ** 2).sum()
        loss.backward()
        print("grad norm", round(x.grad.norm().item(), 3))
        return x.grad * 1

    # backward() is a break (run as Python by the step function); item() is in the graph,
    # round() of it is a break, and so is the print.  Graphs: the loss, x.grad.norm() with
    # its item(), x.grad * 1.  The float is never specialised: nothing recompiles
    check(f, seeds(grad_inputs), graphs=3, breaks=3)


def test_break_inside_inference_mode():
    def f(x):
        with torch.inference_mode():
            y = x * 2
            print("inference", torch.is_inference_mode_enabled(), torch.is_grad_enabled())
        print("after", torch.is_inference_mode_enabled())
        return y + 1

    # the block is re-entered as real inference mode around the print; its exit is a
    # break of its own (the continuation gets the real context manager's __exit__)
    check(f, seeds(grad_inputs), graphs=2, breaks=3)


@torch.no_grad()
def _decorated(x):
    y = x * 2
    print("decorated, grad:", torch.is_grad_enabled())
    return y * 3


def test_break_inside_function_decorated_with_no_grad():
    # Kiln compiles torch's decorator wrapper; it breaks at the call of the function
    # inside its with-block, and the function is compiled as its own frame.  Graphs: the
    # switch into no_grad, x * 2, y * 3, the switch back at the block's exit
    check(_decorated, seeds(grad_inputs), graphs=4, breaks=1)
