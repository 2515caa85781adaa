"""``kiln.export``: a program captured by Kiln, handed on as a ``torch.export.ExportedProgram``.

Two halves.  The front is Kiln's: the frame (a module's ``forward`` or a function) is
traced from its bytecode with ``fullgraph``, so Python control flow on shapes and
Python values is decided and guarded, module lists are unrolled, and anything that
cannot be one graph is an ``Unsupported`` naming the user's line
(``capture.frames.whole_frame``).  What comes out is one plain function that reads the graph's
inputs through Kiln's sources, checks the size facts the trace assumed, calls the
graph and rebuilds the return value: no user Python is left in it.

The back is torch's: that function becomes the ``forward`` of a root module that shares
the original module's parameter, buffer and submodule dicts (so the exported signature
names them as the module does, and ``state_dict`` keys match), and torch.export's
non-strict mode traces it into an aten-level, functional ExportedProgram: parameters and
buffers lifted, buffer mutations in the signature, ``range_constraints`` from the
symbols of ``dynamic_shapes``, higher-order operators kept.  Tracing that function
without Dynamo is sound exactly because it has no Python left to bake in: the
non-strict mode's weakness (whatever one run of the user's Python did) is what Kiln's
half has already decided, under guards.  Neither half runs the program on real tensors,
so exporting does not change the module's state.
"""
from __future__ import annotations

import inspect
import types
import warnings

import torch

from .api import Compiler, original_module
from .capture import capture_whole
from .compile_settings import CompileSettings
from .exc import ConstraintViolation, Unsupported
from .runtime import has_hooks
from .export_problems import explain_failure
from .export_shapes import export_shapes


def _functional_backend(gm, example_inputs):     # never called: the graph goes to torch.export
    raise AssertionError("kiln.export does not compile graphs with a backend")


def export(f, args, kwargs=None, *, dynamic_shapes=None, strict=True) -> torch.export.ExportedProgram:
    """Export ``f`` (an ``nn.Module`` or a function) called with ``args``/``kwargs`` as a
    ``torch.export.ExportedProgram``.

    ``dynamic_shapes``: as torch.export takes it (``torch.export.Dim``, ``Dim.AUTO``,
    ``Dim.DYNAMIC``).  ``strict=True``: a program that is not one graph raises
    ``kiln.Unsupported`` naming the user's line; ``strict=False``: it is exported by
    torch.export's non-strict mode instead, with a warning saying why (that mode runs the
    Python once and keeps what it did)."""
    if not isinstance(args, tuple):
        raise TypeError(f"kiln.export: args must be a tuple, got {type(args).__name__}")
    kwargs = dict(kwargs or {})
    fn, self_arg, signature_of = _frame_of(f)
    shapes = export_shapes(signature_of, args, kwargs, dynamic_shapes)
    compiler = Compiler(CompileSettings(_functional_backend, "export", fullgraph=True, dynamic=False))
    frame_args = args if self_arg is None else (self_arg, *args)
    try:
        whole = capture_whole(fn, frame_args, kwargs, compiler, shapes)
    except Unsupported as e:
        if strict:
            raise explain_failure(f, args, kwargs, e) from None
        warnings.warn(f"kiln.export: not one graph ({e}); exported with torch.export's non-strict mode",
                      stacklevel=2)
        try:
            return torch.export.export(_as_module(f), args, kwargs, dynamic_shapes=dynamic_shapes, strict=False)
        except Exception as torch_error:      # neither can: Kiln's account of why, torch's chained
            raise explain_failure(f, args, kwargs, e) from torch_error
    root = _root_module(self_arg, fn, whole, signature_of)
    try:
        return torch.export.export(root, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    except Exception as e:
        if whole.shape_checks and "onstraints violated" in str(e):
            assumed = "\n".join(f"  {c}" for c in whole.shape_checks)
            raise ConstraintViolation(f"dynamic_shapes allows sizes the program does not handle alike; "
                                      f"Kiln's capture assumed:\n{assumed}\ntorch.export says: {e}") from e
        raise


def _frame_of(f):
    """(the Python function traced, its bound ``self`` or None, what ``dynamic_shapes``
    binds against)."""
    if isinstance(f, torch.nn.Module):
        mod = original_module(f)
        forward = mod.__dict__.get("forward", type(mod).forward)
        if isinstance(forward, types.MethodType):
            forward = forward.__func__
        if not isinstance(forward, types.FunctionType):
            raise TypeError(f"kiln.export: {type(mod).__name__}.forward is not a Python function")
        call = getattr(type(mod), "_call_impl", None)
        if has_hooks(mod) and isinstance(call, types.FunctionType):
            # torch.export exports what calling the module does, hooks included: the frame
            # is then nn.Module._call_impl, which runs the hooks around forward (as Kiln
            # traces a submodule with hooks)
            return call, mod, types.MethodType(forward, mod)
        return forward, mod, types.MethodType(forward, mod)
    if isinstance(f, types.MethodType) and isinstance(f.__func__, types.FunctionType):
        return f.__func__, f.__self__, f
    if isinstance(f, types.FunctionType):
        return f, None, f
    raise TypeError(f"kiln.export expects an nn.Module or a Python function, got {type(f).__name__}")


class _ExportRoot(torch.nn.Module):
    """The module torch.export traces: the original's parameters, buffers and submodules
    (the same dicts, so torch.export's swapping in of fake parameters is what the
    captured function reads through the original), and a ``forward`` that runs the
    captured graph (set per export)."""


def _root_module(self_arg, fn, whole, signature_of) -> torch.nn.Module:
    root = _ExportRoot()
    if isinstance(self_arg, torch.nn.Module):
        for name in ("_parameters", "_buffers", "_modules", "_non_persistent_buffers_set"):
            object.__setattr__(root, name, getattr(self_arg, name))
        root.training = self_arg.training
    run = whole.function
    lead = () if self_arg is None else (self_arg,)

    def forward(self, *args, **kwargs):
        return run(fn, *lead, *args, **kwargs)

    params = list(inspect.signature(signature_of).parameters.values())
    forward.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), *params])
    root.forward = types.MethodType(forward, root)
    root.kiln_graph_source = whole.source
    return root


def _as_module(f) -> torch.nn.Module:
    if isinstance(f, torch.nn.Module):
        return original_module(f)
    root = _ExportRoot()
    root.forward = f
    return root

