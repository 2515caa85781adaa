"""Plumbing shared by the backends that go through AOTAutograd.

AOTAutograd (``torch._functorch.aot_autograd.aot_module_simplified``) is what gives
``aot_eager``, ``aten`` and ``inductor`` their exact eager semantics: it traces the
graph to a functional ATen joint graph, splits it into forward and backward, and wraps
the compiled pieces in runtime code that (a) writes input mutations back into the
caller's real tensors and (b) regenerates outputs that alias inputs as real views of
those inputs.  This module only adapts Kiln's graphs to what it expects and makes the
result behave like the graph it replaced:

* AOTAutograd wants a graph that returns a flat tuple; a graph returning one tensor or a
  nested structure is rewritten into one that does, and the result is rebuilt.
* AOTAutograd returns lists; the graph returned a tuple, so callers get a tuple.
* AOTAutograd bakes non-tensor inputs (ints, floats) into the graph.  The compiled
  callable checks on every call that they still have the values it was compiled for,
  instead of silently computing with the old ones.
* The backward graph is compiled eagerly (``force_non_lazy_backward_lowering``), so a
  backend that cannot handle it fails inside ``compile_graph``, where Kiln can fall
  back to eager, rather than in the middle of the user's ``loss.backward()``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
import torch.fx
import torch.utils._pytree as pytree

from kiln.exc import BackendError


def tuple_output_graph(gm: torch.fx.GraphModule):
    """Return ``(graph_module, rebuild)`` where the graph module returns a flat tuple.

    ``rebuild(flat_outputs)`` turns the flat outputs back into what ``gm`` returned.
    When ``gm`` already returns a flat tuple of nodes it is returned unchanged, with a
    ``rebuild`` that only makes sure the result is a tuple.  Otherwise a new
    GraphModule sharing ``gm``'s submodules and attributes is built, so ``gm`` itself
    (which Kiln keeps as its eager fallback) is never edited.
    """
    output_node = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    (result,) = output_node.args
    if isinstance(result, tuple) and all(isinstance(r, torch.fx.Node) for r in result):
        return gm, tuple
    leaves, spec = pytree.tree_flatten(result)
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in gm.graph.nodes:
        if node.op == "output":
            break
        env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output(tuple(env[x] if isinstance(x, torch.fx.Node) else x for x in leaves))
    flat_gm = torch.fx.GraphModule(gm, graph)

    def rebuild(flat):
        return pytree.tree_unflatten(list(flat), spec)

    return flat_gm, rebuild


def nontensor_guard(example_inputs: Sequence[Any], backend_name: str):
    """Return a checker for the non-tensor inputs baked in at compile time, or None."""
    baked = [(i, v) for i, v in enumerate(example_inputs) if not isinstance(v, torch.Tensor)]
    if not baked:
        return None

    def check(args):
        for i, v in baked:
            got = args[i]
            if type(got) is not type(v) or got != v:
                raise BackendError(
                    f"the {backend_name} backend compiled this graph with input {i} = {v!r} baked in, "
                    f"but it was called with {got!r}; Kiln must guard on that value and recompile"
                )

    return check


def boxed(fn: Callable) -> Callable:
    """Give ``fn(*args)`` AOTAutograd's boxed calling convention ``fn(list_of_args)``."""

    def run(args):
        return fn(*args)

    run._boxed_call = True
    return run


def aot_compile(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *,
                backend_name: str,
                fw_compiler: Callable,
                bw_compiler: Callable | None = None,
                keep_inference_input_mutations: bool = False) -> Callable:
    """Compile ``gm`` through AOTAutograd with the given graph compilers.

    Returns a plain ``fn(*args) -> tuple`` (or whatever ``gm`` returned).  Errors while
    tracing are re-raised as :class:`kiln.exc.BackendError` naming the backend, chained
    from the original so nothing is lost.
    """
    from torch._functorch import config as functorch_config
    from torch._functorch.aot_autograd import aot_module_simplified

    example_inputs = list(example_inputs)
    flat_gm, rebuild = tuple_output_graph(gm)
    try:
        with functorch_config.patch(force_non_lazy_backward_lowering=True):
            compiled = aot_module_simplified(
                flat_gm, example_inputs,
                fw_compiler=fw_compiler,
                bw_compiler=bw_compiler or fw_compiler,
                keep_inference_input_mutations=keep_inference_input_mutations,
            )
    except BackendError:
        raise
    except Exception as e:
        raise BackendError(f"the {backend_name} backend could not trace the graph through AOTAutograd: "
                           f"{type(e).__name__}: {_first_line(e)}") from e
    return wrap_runtime(compiled, example_inputs, rebuild, backend_name)


def wrap_runtime(compiled: Callable, example_inputs: Sequence[Any], rebuild: Callable,
                 backend_name: str) -> Callable:
    """Wrap an AOTAutograd-made callable: guard baked scalars, rebuild the output structure.

    The wrapper is a fresh function without ``_boxed_call`` (AOTAutograd copies that flag
    from the inner compiler onto its unboxed result, which would mislead a caller).
    """
    check = nontensor_guard(example_inputs, backend_name)
    if check is None:
        def run(*args):
            return rebuild(compiled(*args))
    else:
        def run(*args):
            check(args)
            return rebuild(compiled(*args))
    run.__qualname__ = run.__name__ = f"kiln_{backend_name}_compiled"
    return run


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "(no message)"
