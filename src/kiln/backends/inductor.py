"""The ``inductor`` backend: TorchInductor's ``compile_fx`` (C++/OpenMP on CPU, Triton on CUDA).

Imported lazily (the registry imports this module on first lookup, and this module
imports inductor only when a graph is compiled) because importing inductor takes
seconds and Kiln must stay cheap to import.

``compile_fx`` drives AOTAutograd itself, so training, input mutation and output
aliasing behave as under ``aot_eager``.  Three adaptations:

* ``compile_fx`` takes ownership of the graph module it is given and may rewrite it.
  Kiln keeps the original graph as the eager fallback, so inductor gets its own
  GraphModule over a copy of the graph (sharing parameters, not copying them).
* Like every AOTAutograd result it is specialized on grad mode and ``requires_grad``
  flags, so it is wrapped in :class:`kiln.backends._aot.GradSpecialized`, which compiles
  a variant per situation (training step, ``no_grad`` evaluation, ...).
* The backward graph is compiled up front, so a failure there is a compile-time
  failure that Kiln's fallback policy can handle, not an error inside ``backward()``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
import torch.fx

from kiln.exc import BackendError

from ._aot import GradSpecialized, first_line, refuse_redrawing_graph, wrap_inner_compiler
from ..runtime.backward_reach import copy_graph


def inductor(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]):
    """Compile ``gm`` with TorchInductor for the device its inputs are on."""
    refuse_redrawing_graph(gm, "inductor")
    try:
        # imported on first use: inductor takes ~2 s to import, paid only by its users
        from torch._functorch import config as functorch_config
        from torch._inductor.compile_fx import compile_fx, compile_fx_inner  # (see above)
    except Exception as e:  # pragma: no cover - depends on the torch build
        raise BackendError(f"the inductor backend is not available in this PyTorch build: "
                           f"{type(e).__name__}: {first_line(e)}") from e

    def compile_flat(flat_gm, inputs):
        # a private GraphModule over a copy of the graph; submodules/params are shared
        private = torch.fx.GraphModule(flat_gm, copy_graph(flat_gm.graph))
        from torch._inductor import config as inductor_config  # loaded by compile_fx above
        # forward and backward share compile_fx_inner; is_backward tells them apart
        inner = _by_direction(wrap_inner_compiler(compile_fx_inner, "inductor", "forward"),
                              wrap_inner_compiler(compile_fx_inner, "inductor", "backward"))
        try:
            # fallback_random: random ops run eager's kernels on the global generator, so
            # the stream (dropout masks, later draws) is eager's; inductor's own RNG is not.
            # backward_pass_autocast="off": as in _aot.aot_compile
            with functorch_config.patch(force_non_lazy_backward_lowering=True, backward_pass_autocast="off"), \
                    inductor_config.patch(fallback_random=True):
                return compile_fx(private, inputs, inner_compile=inner)
        except Exception as e:
            raise BackendError(f"inductor could not compile the graph: {type(e).__name__}: {first_line(e)}") from e

    return GradSpecialized(gm, example_inputs, compile_flat, "inductor")


def _by_direction(forward: Callable, backward: Callable) -> Callable:
    """One ``inner_compile`` that sends forward graphs to ``forward``, backward to ``backward``."""
    if forward is backward:   # no wrapper registered: inductor's own compile_fx_inner
        return forward

    def inner(gm, example_inputs, *args, **kwargs):
        fn = backward if kwargs.get("is_backward") else forward
        return fn(gm, example_inputs, *args, **kwargs)

    return inner


# AOTAutograd functionalizes the graph: inputs change only after every op has run, so a
# graph that raised changed no input (see backends/contract.py, runtime/fallback.py).
# It does not run the graph as it is (no ``runs_graph_as_is``): one autograd node for
# the graph, tensors made inside it are constants
inductor.applies_input_mutations_last = True
# compiled graphs are cached on disk (AOTAutograd's cache, the FX graph cache); both need
# a shape environment in the tracing context (see capture/compile_frame._compile_graph)
inductor.caches_compiled_graphs = True
