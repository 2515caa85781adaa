"""The ``eager`` backend: run the captured FX graph as it is."""
from __future__ import annotations


def eager(gm, example_inputs):
    return gm.forward


# the graph's ops run in order on the real tensors, autograd recording each as in eager
# (see backends/contract.py)
eager.runs_graph_as_is = True
