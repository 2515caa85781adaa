"""The ``aot_eager`` backend: AOTAutograd with graph compilers that do nothing.

Why it exists: it runs exactly the functional ATen forward and backward graphs that
``inductor`` would be given, but executes them with ordinary eager kernels.  A model
that is wrong under ``aot_eager`` is wrong because of capture or AOTAutograd, not
because of code generation, which makes it the first thing to try when ``inductor``
disagrees with eager.

Semantics it keeps (all provided by AOTAutograd's runtime wrappers): training works
(``backward()`` runs the traced backward graph); input mutations land in the caller's
real tensors; outputs that alias inputs in eager come back as views of those inputs, so
an in-place change to such an output is visible through the input.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch.fx

from ._aot import aot_compile, boxed


def _run_as_is(gm: torch.fx.GraphModule, example_inputs):
    """The no-op graph compiler: run AOTAutograd's graph with its generated Python code."""
    return boxed(gm.forward)


def aot_eager(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]):
    """Compile ``gm`` with AOTAutograd and no-op forward/backward compilers."""
    return aot_compile(gm, example_inputs, backend_name="aot_eager",
                       fw_compiler=_run_as_is, bw_compiler=_run_as_is,
                       keep_inference_input_mutations=True)


# AOTAutograd functionalizes the graph: inputs change only after every op has run, so a
# graph that raised changed no input (see backends/contract.py, runtime/fallback.py).
# It does not run the graph as it is (no ``runs_graph_as_is``): one autograd node for
# the graph, tensors made inside it are constants
aot_eager.applies_input_mutations_last = True
