"""Stateless ``torch.nn`` modules constructed inside a compiled frame.

``CrossEntropyLoss(ignore_index=-100)`` built in a model's ``forward`` (as Hugging Face
heads do) used to be a graph break.  A ``torch.nn`` module built from constant
arguments that ends up owning no parameters, buffers or submodules is built once at
trace time and its calls are inlined like any module's; see :class:`NewTorchModuleValue`
for what keeps that sound.
"""
from __future__ import annotations

import torch

from ...exc import Unsupported
from .objects import ModuleValue

_IMMUTABLE_ATTRS = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device)


class NewTorchModuleValue(ModuleValue):
    """A stateless ``torch.nn`` module built in the frame, e.g. ``CrossEntropyLoss(ignore_index=-100)``.

    Built at trace time from constant arguments (see ``builder.construct``); it owns no
    parameters, buffers or submodules.  Calls inline its ``forward``; only immutable
    attributes can be read and none written (a module being configured in the frame is
    a graph break), so nothing done to the trace-time instance can be lost.  The glue
    builds a fresh instance per call, from the same arguments, if the module escapes.
    """

    def __init__(self, obj, args: tuple, kwargs: dict):
        super().__init__(obj, None)
        self.args, self.kwargs = args, kwargs

    def describe(self):
        return f"new {type(self.obj).__name__} module"

    def generic_getattr(self, tx, name):
        value = self.obj.__dict__.get(name, _IMMUTABLE_ATTRS)
        if value is not _IMMUTABLE_ATTRS and not _immutable(value):
            raise Unsupported(f"reading {name!r} of a {self.describe()} built inside a compiled region")
        return super().generic_getattr(tx, name)

    def setattr(self, tx, name, value):
        raise Unsupported(f"setting {name!r} of a {self.describe()} built inside a compiled region")

    def generic_setattr(self, tx, name, value):
        self.setattr(tx, name, value)

    def delattr(self, tx, name):
        raise Unsupported(f"deleting {name!r} of a {self.describe()} built inside a compiled region")

    def reconstruct(self, cg):
        cls = type(self.obj)
        return cg.new_object(self, f"{cg.ref(cls)}(*{cg.ref(self.args)}, **{cg.ref(self.kwargs)})")


def _immutable(value) -> bool:
    if isinstance(value, tuple):
        return all(_immutable(v) for v in value)
    return type(value) in _IMMUTABLE_ATTRS


def build_stateless_torch_module(cls, args: tuple, kwargs: dict):
    """``cls(*args, **kwargs)`` for a ``torch.nn`` module class, or None if the result
    would own state (parameters, buffers, submodules) or the class is not torch's own.

    Built under the meta device, so a module that turns out to own parameters allocated
    and initialised nothing (no random numbers drawn) before being refused.
    """
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)
            and cls.__module__.startswith("torch.nn.modules.")) or "device" in kwargs:
        return None
    try:
        with torch.device("meta"):
            mod = cls(*args, **kwargs)
    except Exception:
        return None
    d = mod.__dict__
    if (d.get("_modules") or any(v is not None for v in d.get("_parameters", {}).values())
            or any(v is not None for v in d.get("_buffers", {}).values())
            or any(isinstance(v, torch.Tensor) or not _immutable(v)
                   for k, v in d.items() if not k.startswith("_"))):
        return None
    return mod
