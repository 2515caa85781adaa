"""The ``aten`` backend: run the graph as functionalized ATen ("python key") graphs.

What it does.  The captured graph goes through AOTAutograd, and each forward and
backward graph AOTAutograd hands over is traced once more with ``make_fx`` under
``torch.func.functionalize(remove="mutations_and_views")``.  The result is an ATen
graph with no in-place ops and no view ops at all (views become ``*_copy`` ops such as
``unsqueeze_copy``); that graph is what runs.  The compiled callable carries the graphs
it runs as ``.aten_graphs`` for inspection.

Why functionalized.  An unfunctionalized python-key trace records in-place view ops
literally, e.g. ``aten.unsqueeze_(aten.detach(x), 2)``.  Replaying such a graph fails on
PyTorch builds where the result of ``detach()`` / ``.data`` may not have its metadata
changed ("set_storage_offset is not allowed on a Tensor created from .data or
.detach()"), and in general makes the graph's meaning depend on aliasing rules at run
time.  After functionalization there is no in-place op and no view op left to fail; a
check after tracing enforces that (the only mutation allowed is the final ``copy_``
that writes a mutated input back).

Why on top of AOTAutograd instead of ``make_fx`` over the user graph directly.  A bare
functionalized ``make_fx`` graph turns "output is a view of an input" into "output is a
copy", and would leave training to autograd replaying ATen ops one by one.  AOTAutograd
already owns the hard parts: the joint forward/backward graph (so ``backward()`` works
and gradients match eager), writing input mutations back into the real inputs, and
regenerating outputs that alias inputs as true views.  The retrace only normalises what
each graph compiler receives, so the exactness of ``aot_eager`` carries over unchanged.
Input mutations are kept out of the forward graph (``keep_inference_input_mutations``
off) so that AOTAutograd's runtime, not the ATen graph, applies them.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.fx

from torch.fx.experimental.proxy_tensor import make_fx

from kiln.exc import BackendError

from ._aot import aot_compile, boxed


def functional_aten_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> torch.fx.GraphModule:
    """Trace ``gm`` with ``make_fx`` into an ATen graph free of mutations and views.

    ``example_inputs`` may be real or fake tensors (AOTAutograd passes fake ones).
    Raises :class:`kiln.exc.BackendError` if the traced graph still mutates anything
    other than an input write-back, or still contains a view op.
    """
    def run(*args):
        return torch.fx.Interpreter(gm).run(*args)

    functional = torch.func.functionalize(run, remove="mutations_and_views")
    try:
        traced = make_fx(functional)(*example_inputs)
    except Exception as e:
        raise BackendError(f"the aten backend could not retrace a graph with make_fx: "
                           f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}") from e
    _matmuls_of_transposes_as_linear(traced)
    check_functional(traced)
    return traced


def _matmuls_of_transposes_as_linear(gm: torch.fx.GraphModule) -> None:
    """``addmm(b, x, t_copy(w))`` / ``mm(x, t_copy(w))`` -> ``linear(x, w, b)``.

    Functionalization turns the transposed view eager multiplies by (``w.t()`` in
    ``nn.Linear``) into a contiguous copy, and BLAS then runs another kernel whose sums
    round differently.  ``aten.linear`` is functional and runs eager's own
    ``addmm(b, x, w.t())`` inside, so the graph stays view-free and the values eager's."""
    aten = torch.ops.aten
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.kwargs or not (
                (node.target is aten.addmm.default and len(node.args) == 3)
                or (node.target is aten.mm.default and len(node.args) == 2)):
            continue
        bias, x, wt = (node.args if node.target is aten.addmm.default else (None, *node.args))
        if not (isinstance(wt, torch.fx.Node) and wt.target is aten.t_copy.default):
            continue
        x_val, w_val = x.meta.get("val"), wt.args[0].meta.get("val") if isinstance(wt.args[0], torch.fx.Node) else None
        if x_val is None or w_val is None or x_val.dim() != 2 or w_val.dim() != 2:
            continue
        with gm.graph.inserting_before(node):
            args = (x, wt.args[0]) if bias is None else (x, wt.args[0], bias)
            linear = gm.graph.call_function(aten.linear.default, args)
        linear.meta = dict(node.meta)
        node.replace_all_uses_with(linear)
        gm.graph.erase_node(node)
        if not wt.users:
            gm.graph.erase_node(wt)
    gm.graph.lint()
    gm.recompile()


def check_functional(gm: torch.fx.GraphModule) -> None:
    """Refuse a graph that still contains an in-place op or a view op.

    The one exception is ``aten.copy_`` into a placeholder: functionalization writes a
    mutated graph input back that way, at the end of the graph.
    """
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        schema = node.target._schema
        writes = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        if writes:
            is_writeback = (node.target is torch.ops.aten.copy_.default
                            and isinstance(node.args[0], torch.fx.Node) and node.args[0].op == "placeholder")
            if not is_writeback:
                raise BackendError(f"the aten backend produced a graph that still mutates "
                                   f"({node.format_node()}); functionalization should have removed it")
        if any(r.alias_info is not None for r in schema.returns) and not writes:
            raise BackendError(f"the aten backend produced a graph that still contains a view op "
                               f"({node.format_node()}); functionalization should have removed it")


def aten(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]):
    """Compile ``gm`` to functionalized ATen graphs (forward and, if needed, backward)."""
    graphs: list[torch.fx.GraphModule] = []

    def compile_one(aot_gm: torch.fx.GraphModule, aot_inputs):
        traced = functional_aten_graph(aot_gm, aot_inputs)
        graphs.append(traced)
        return boxed(traced.forward)

    compiled = aot_compile(gm, example_inputs, backend_name="aten",
                           fw_compiler=compile_one, bw_compiler=compile_one,
                           keep_inference_input_mutations=False)
    compiled.aten_graphs = graphs
    return compiled


# AOTAutograd functionalizes the graph: inputs change only after every op has run, so a
# graph that raised changed no input (see backends/contract.py, runtime/fallback.py).
# It does not run the graph as it is (no ``runs_graph_as_is``): one autograd node for
# the graph, tensors made inside it are constants
aten.applies_input_mutations_last = True
