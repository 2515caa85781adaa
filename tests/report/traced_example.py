"""A small script for the trace and report tests: a break inside an inlined helper,
and a recompile when the input's shape changes."""
import torch


def helper(x):
    print("kiln-test: side effect")       # a graph break inside an inlined call
    return x * 2


def f(x, n):
    y = torch.sin(x) + n
    y = helper(y)
    return y.cos().sum()


def f_inputs():
    return (torch.ones(3), 1)


def needs_args(x):
    return x + 1
