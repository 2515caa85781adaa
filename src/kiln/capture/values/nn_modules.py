"""``nn.Module`` values: modules that existed before tracing (calls inline ``forward``,
or nn.Module's own call path when forward hooks are registered; backward hooks are
refused), and stateless ``torch.nn`` modules built in the frame.

``CrossEntropyLoss(ignore_index=-100)`` built in a model's ``forward`` (as Hugging Face
heads do) used to be a graph break.  A ``torch.nn`` module built from constant
arguments that ends up owning no parameters, buffers or submodules is built once at
trace time and its calls are inlined like any module's; see :class:`NewTorchModuleValue`
for what keeps that sound.
"""
from __future__ import annotations

import torch
from torch.nn.modules.lazy import LazyModuleMixin

from ...exc import Unsupported
from ..basics import param_source
from .attributes import lookup_class_attr
from .base import BoundContainerMethod, ConstantValue, ItemsValue, const, raise_python
from .iterators import IteratorValue
from .objects import ObjectValue
from .tensor import TensorValue


def has_backward_hooks(mod: torch.nn.Module) -> bool:
    g = torch.nn.modules.module
    return bool(mod._backward_hooks or getattr(mod, "_backward_pre_hooks", None) or g._global_backward_hooks
                or g._global_backward_pre_hooks)


class ModuleValue(ObjectValue):
    """An ``nn.Module`` instance; its calls inline ``forward``, or ``Module._call_impl``
    when forward hooks are registered (backward hooks are refused)."""

    def describe(self):
        where = self.source.describe() if self.source is not None else "?"
        return f"{type(self.obj).__name__}({where})"

    def getattr(self, tx, name):
        if name in ("_buffers", "_parameters", "_modules"):
            # buffer writes are recorded as attribute writes (Module.__setattr__ runs in the
            # replay); reading the dict itself (named_buffers, state_dict) would miss them
            d = self.obj.__dict__.get(name) or {}
            if any(tx.state.side_effects.pending_attr(self.obj, k) is not None for k in d):
                raise Unsupported(f"reading {name} of {self.describe()} after setting one of them")
        return super().getattr(tx, name)

    def _extra_attr(self, tx, name):
        obj = self.obj
        for kind in ("_parameters", "_buffers", "_modules"):
            d = obj.__dict__.get(kind)
            if d is not None and name in d:
                src = param_source(self.source, kind, name) if self.source is not None else None
                return tx.wrap(d[name], src)
        return None

    def call(self, tx, args, kwargs):
        mod = self.obj
        g = torch.nn.modules.module
        if isinstance(mod, LazyModuleMixin) and mod.has_uninitialized_params():
            initialize_lazy_module(tx, mod, args, kwargs)
        if has_backward_hooks(mod):
            # they wrap the call's inputs and outputs in autograd nodes (BackwardHook) that
            # call Python during backward(): made in Python, around the module's call
            raise Unsupported(f"{type(mod).__name__} has backward hooks (or global ones are registered); "
                              f"the module runs as Python")
        reused = tx.call_repeated_layer(self, args, kwargs)   # a layer like others: one body for all
        if reused is not None:
            return reused
        if mod._forward_hooks or mod._forward_pre_hooks or g._global_forward_hooks or g._global_forward_pre_hooks:
            # forward hooks are Python: nn.Module's own call path is traced, hooks and all;
            # it reads every hook dict (the module's and the global ones) through its
            # source, so adding or removing a hook changes a guarded key and recompiles
            call_impl = tx.wrap(torch.nn.Module._call_impl, None)
            return call_impl.call(tx, [self, *args], kwargs)
        guards = tx.state.guards
        # one check per module (and one for the global registries), not one per hook dict:
        # these run on every call
        if self.source is not None:
            guards.add("len", self.source, "not ({v}._forward_hooks or {v}._forward_pre_hooks or "
                       "{v}._backward_hooks or {v}._backward_pre_hooks)", f"{self.source.describe()} has no hooks",
                       plan=(("falsy_attrs", HOOK_DICTS),))
        registry = guards.ns.ref(g)
        guards.add("global_state", None, f"not ({registry}._global_forward_hooks or "
                   f"{registry}._global_forward_pre_hooks or {registry}._global_backward_hooks or "
                   f"{registry}._global_backward_pre_hooks)", "no global nn.Module hooks are registered",
               plan=(("on", g), ("falsy_attrs", GLOBAL_HOOK_DICTS)))
        if lookup_class_attr(type(mod), "__call__")[0] is not torch.nn.Module:
            # the class's own __call__ decides what calling the module means (the module's
            # type is guarded, so the override is too)
            return super().call(tx, args, kwargs)
        forward = self.getattr(tx, "forward")
        return forward.call(tx, args, kwargs)

    def setattr(self, tx, name, value):
        mod = self.obj
        if name in mod.__dict__.get("_parameters", {}):
            raise Unsupported(f"assigning to parameter {name!r} inside a compiled region")
        if name in mod.__dict__.get("_buffers", {}) and isinstance(value, TensorValue):
            tx.state.side_effects.store_attr(self, name, value)
            return
        super().setattr(tx, name, value)


# the hook dicts a module call reads (guarded empty: one check per module, planned as one step)
HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
GLOBAL_HOOK_DICTS = tuple(f"_global{name}" for name in HOOK_DICTS)
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


class NewModuleListValue(ItemsValue):
    """An ``nn.ModuleList`` / ``nn.Sequential`` built in the frame from modules that exist
    (``self.layers[:n]``: ModuleList slicing builds a new container of the same modules).

    Its items are the existing modules' values: iterating, indexing, ``len`` and calling
    (Sequential) inline them as usual.  Nothing can be stored on it.  If it escapes, the
    glue builds a new container of the same modules, as eager does on every call.
    """

    def __init__(self, cls: type, items: list):
        self.cls = cls
        self.items = list(items)

    def python_type(self):
        return self.cls

    def describe(self):
        return f"new {self.cls.__name__} of {len(self.items)} modules"

    def getitem(self, tx, key):
        k = key.as_constant()
        if isinstance(k, slice):
            return NewModuleListValue(self.cls, self.items[k])
        if not isinstance(k, int):
            raise Unsupported(f"{self.cls.__name__} indices must be integers or slices, got {type(k).__name__}")
        try:
            return self.items[k]
        except IndexError:
            raise_python(IndexError, f"index {k} is out of range")

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__len__":
            return const(len(self.items))
        if name == "__iter__":
            return IteratorValue(list(self.items))
        return super().call_method(tx, name, args, kwargs)

    def call(self, tx, args, kwargs):
        if not issubclass(self.cls, torch.nn.Sequential) or len(args) != 1 or kwargs:
            raise Unsupported(f"calling a {self.describe()}")
        out = args[0]
        for mod in self.items:
            out = mod.call(tx, [out], {})
        return out

    def getattr(self, tx, name):
        if name in ("__getitem__", "__len__", "__iter__"):
            return BoundContainerMethod(self, name)
        raise Unsupported(f"attribute {name!r} of a {self.describe()} built inside a compiled region")

    def reconstruct(self, cg):
        items = ", ".join(cg.expr(i) for i in self.items)
        return cg.new_object(self, f"{cg.ref(self.cls)}([{items}])")


def is_module_container(cls) -> bool:
    """ModuleList and Sequential (and subclasses that keep their constructor)."""
    return isinstance(cls, type) and any(issubclass(cls, c) and cls.__init__ is c.__init__
                                         for c in (torch.nn.ModuleList, torch.nn.Sequential))


def initialize_lazy_module(tx, mod, args: list, kwargs: dict) -> None:
    """A lazy module's first call (``nn.LazyLinear``) initialises it at trace time, as
    its forward pre-hook would at that point in eager: ``_infer_parameters`` on the
    fakes of the arguments gives the parameters their shapes (real tensors, drawn from
    the global generator by ``reset_parameters``), removes the hook and turns the module
    into its ``cls_to_become``.  The trace then goes on with the real parameters as graph
    inputs; the next call finds the new class (a failing type guard: one recompile, as
    under torch.compile).  Exact only where the draws come where eager's do: the graph so
    far draws no random numbers (the frame runs after the trace), the arguments' shapes
    are static, and it is not inside a higher-order operator's body; otherwise a break."""
    state = tx.state
    drew = any(n.meta.get("kiln_draws") for n in state.builder.graph.nodes)
    fakes, fake_kwargs = [], {}
    for where, v in [*((None, a) for a in args), *kwargs.items()]:
        if isinstance(v, TensorValue) and not any(isinstance(d, torch.SymInt) for d in v.fake.shape):
            real = v.fake
        elif isinstance(v, ConstantValue):
            real = v.value
        else:
            raise Unsupported(f"initialising the lazy module {type(mod).__name__} from {v.describe()}")
        if where is None:
            fakes.append(real)
        else:
            fake_kwargs[where] = real
    if drew or state.side_effects.in_hop:
        raise Unsupported(f"initialising the lazy module {type(mod).__name__} after random draws in the graph "
                          f"(or inside a higher-order operator): it runs as Python")
    mod._infer_parameters(mod, tuple(fakes), fake_kwargs)
