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

``kiln.compile(..., backend="inductor", mode=..., options=...)`` has torch.compile's
meaning: ``with_options`` (the hook of ``backends/contract.py``) turns the mode into
inductor's settings with torch's own table (``torch._inductor.list_mode_options``),
checks each option against inductor's config as torch.compile does, and returns an
inductor backend that compiles under those settings.  ``fallback_random`` stays on (it
is what keeps random ops drawing eager's numbers): turning it off is refused.
"""
from __future__ import annotations

import difflib
import typing
from typing import Any, Callable, Sequence

import torch
import torch.fx

from kiln.exc import BackendError

from ._aot import GradSpecialized, first_line, refuse_redrawing_graph, wrap_inner_compiler
from ..runtime import copy_graph


def inductor(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]):
    """Compile ``gm`` with TorchInductor for the device its inputs are on."""
    return _compile(gm, example_inputs, {})


def _compile(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], settings: dict):
    """``inductor``, with inductor's config patched by ``settings`` (``with_options``)."""
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
                    inductor_config.patch({**settings, "fallback_random": True}):
                return compile_fx(private, inputs, inner_compile=inner)
        except Exception as e:
            raise BackendError(f"inductor could not compile the graph: {type(e).__name__}: {first_line(e)}") from e

    return GradSpecialized(gm, example_inputs, compile_flat, "inductor")


class ConfiguredInductor:
    """The inductor backend under a mode and options (``with_options``)."""

    __name__ = "inductor"
    # what inductor declares (see the end of this module)
    applies_input_mutations_last = True
    caches_compiled_graphs = True

    def __init__(self, settings: dict):
        self.settings = settings

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]):
        return _compile(gm, example_inputs, self.settings)

    def __repr__(self):
        return f"<kiln inductor backend with {self.settings}>"


def with_options(mode: str | None, options: dict) -> ConfiguredInductor:
    """Inductor under torch.compile's ``mode`` and ``options`` (the module docstring);
    ``ValueError`` naming what was passed and what is valid where torch.compile refuses."""
    try:
        # imported when a mode or options are asked for (see ``inductor``)
        import torch._inductor as inductor_package
        from torch._inductor import config as inductor_config  # (the same cost)
    except Exception as e:  # pragma: no cover - depends on the torch build
        raise BackendError(f"the inductor backend is not available in this PyTorch build: "
                           f"{type(e).__name__}: {first_line(e)}") from e
    settings: dict = {}
    if mode not in (None, "default"):
        modes = inductor_package.list_mode_options()
        if mode not in modes:
            raise ValueError(f"kiln.compile: mode={mode!r} is not one of inductor's modes: "
                             f"{', '.join(map(repr, modes))}")
        settings.update(inductor_package.list_mode_options(mode))
    known = inductor_config.get_config_copy()
    for key, value in options.items():
        name = key.replace("-", "_")
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=3)
            hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
            raise ValueError(f"kiln.compile: options={{{key!r}: ...}}: inductor has no setting {key!r}{hint}; "
                             f"torch._inductor.list_options() lists the {len(known)} it has")
        expected = inductor_config.get_type(name)
        if typing.get_origin(expected) is None and isinstance(expected, type) and not isinstance(value, expected):
            raise ValueError(f"kiln.compile: options={{{key!r}: {value!r}}}: inductor's {name} is a "
                             f"{type(known[name]).__name__}, got {type(value).__name__}")
        if name == "fallback_random" and not value:
            raise ValueError("kiln.compile: options={'fallback_random': False} is refused: Kiln runs inductor "
                             "with fallback_random on, so random ops draw the numbers eager draws")
        settings[name] = value
    return ConfiguredInductor(settings)


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
inductor.with_options = with_options
