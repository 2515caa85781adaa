"""Callables that are not user bytecode: torch functions (recorded in the graph),
Python builtins (evaluated symbolically), C functions, special torch objects and
the grad-mode context managers.
"""
from __future__ import annotations

import copy
import dataclasses
import inspect
import sys
import types

import torch

from ...exc import AutogradEngineCall, Unsupported
from ...markers import UNBOUND, CompiledFunctionBase, graph_break, is_disabled
from ..basics import AttrSource
from .base import ConstantMethodValue, ConstantValue, Value, const
from .builtins import BUILTINS, BuiltinValue
from .contexts import (ANNOTATION_CONTEXTS, AnnotationContextClassValue, AutocastClassValue, GradModeClassValue,
                       GradModeValue, is_autocast_class, wrap_autocast_object)
from .containers import DictValue, ListValue
from .functions import BoundMethodValue, UserFunctionValue
from .new_objects import ReplayedObjectValue
from .objects import ClassValue
from .tensor import graph_argument, graph_call, makes_autograd_leaf
from .tensor_metadata import tensor_metadata_functions
from .tensor_subclasses import DisableSubclassDispatchValue, subclass_special_functions


def _torch_owned(obj) -> bool:
    mod = getattr(obj, "__module__", None) or ""
    if mod == "torch" or mod.startswith("torch."):
        return True
    qual = getattr(obj, "__qualname__", "") or ""
    self_obj = getattr(obj, "__self__", None)
    if isinstance(self_obj, types.ModuleType) and self_obj.__name__.startswith("torch"):
        return True
    if isinstance(obj, (types.MethodDescriptorType, types.WrapperDescriptorType)) and \
            getattr(obj, "__objclass__", None) in (torch.Tensor, torch._C.TensorBase):
        return True
    return qual.startswith("_VariableFunctions") or type(obj).__name__ in ("OpOverloadPacket", "OpOverload")


# torch Python functions that Kiln inlines instead of recording as one op
# (optimizers, gradient clipping, parametrizations, distributions: they work on objects
# and on state fakes do not carry, such as ``.grad``, so they are not single ops)
_INLINE_TORCH_MODULES = ("torch.utils._contextlib", "torch.nn.modules.", "torch.utils._pytree", "torch.optim.",
                         "torch.nn.utils.", "torch.utils._foreach_utils", "torch.distributions.")



def wrap_python_function(tx, fn: types.FunctionType, source):
    """Special meaning for some Python functions; None means: inline it as user code."""
    special = tx.state.special_functions().get(fn)
    if special is not None:
        return special
    if is_disabled(fn):
        return DisabledFunctionValue(fn, source)
    if "__marked_compile_region_fn__" in getattr(fn, "__dict__", {}):
        # torch.compiler.nested_compile_region's wrapper (a torch function by its module):
        # traced as user code, its call of the placeholder is a region (hops/layers.py)
        return None
    mod = getattr(fn, "__module__", None) or ""
    if (mod == "torch" or mod.startswith("torch.")) and not mod.startswith(_INLINE_TORCH_MODULES):
        return TorchFunctionValue(fn, source)
    return None


def wrap_c_callable(tx, fn, source):
    special = tx.state.special_functions().get(fn) if _hashable(fn) else None
    if special is not None:
        return special
    if _hashable(fn) and fn in BUILTINS:
        return BuiltinValue(fn, source)
    if _torch_owned(fn):
        return TorchFunctionValue(fn, source)
    return CFunctionValue(fn, source)


def wrap_class(tx, cls: type, source):
    if cls in BUILTINS:
        return BuiltinValue(cls, source)
    if cls in (torch.no_grad, torch.enable_grad, torch.set_grad_enabled, torch.inference_mode):
        return GradModeClassValue(cls, source)
    if cls in ANNOTATION_CONTEXTS:
        return AnnotationContextClassValue(cls, source)
    if is_autocast_class(cls):
        return AutocastClassValue(cls, source)
    if cls in (torch._C.DisableTorchFunctionSubclass, torch._C.DisableTorchFunction):
        return DisableSubclassDispatchClassValue(cls, source)
    return ClassValue(cls, source)


class DisableSubclassDispatchClassValue(ClassValue):
    """``torch._C.DisableTorchFunctionSubclass`` itself: calling it makes the context."""

    def call(self, tx, args, kwargs):
        if args or kwargs:
            raise Unsupported(f"{self.obj.__name__}(...) with arguments")
        return DisableSubclassDispatchValue(self.obj)


def wrap_special_object(tx, obj, source):
    if isinstance(obj, CompiledFunctionBase):
        fn = tx.wrap(obj._kiln_fn, AttrSource(source, "_kiln_fn") if source is not None else None)
        if obj._kiln_self is not None and obj._kiln_self is not UNBOUND:
            return BoundMethodValue(fn, tx.wrap(obj._kiln_self, AttrSource(source, "_kiln_self") if source else None))
        return fn
    if isinstance(obj, torch._C._TensorMeta) or obj is torch.Tensor:
        return None
    if isinstance(obj, (torch.no_grad, torch.enable_grad)):
        return GradModeValue(isinstance(obj, torch.enable_grad))
    return wrap_autocast_object(tx, obj, source)


def _hashable(x) -> bool:
    try:
        hash(x)
        return True
    except TypeError:
        return False


class RealCallableValue(Value):
    """A callable that exists outside the frame: rebuilt from its source, or by reference."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def real_object(self):
        return self.fn

    def reconstruct(self, cg):
        return cg.source_expr(self.source) if self.source is not None else cg.ref(self.fn)


class TorchFunctionValue(RealCallableValue):
    """A function from torch: calling it records one op in the graph."""

    def python_type(self):
        return type(self.fn)

    def describe(self):
        return f"torch function {getattr(self.fn, '__qualname__', self.fn)}"

    def call(self, tx, args, kwargs):
        if isinstance(self.fn, types.FunctionType) and not all(map(graph_argument, [*args, *kwargs.values()])):
            # a Python function of torch handed modules, generators or other objects
            # (clip_grad_norm_(model.parameters()), an optimizer's step, parametrizations)
            # is not an op: its body is traced like user code
            return UserFunctionValue(self.fn, self.source).call(tx, args, kwargs)
        if any(isinstance(getattr(a, "obj", None), torch.nn.Module) for a in args):
            raise Unsupported(f"{getattr(self.fn, '__name__', self.fn)} called with an nn.Module argument")
        if self.fn in _AUTOGRAD_ENGINE_CALLS:
            # the engine walks the real autograd graph, which reaches back past this graph's
            # inputs; run on fakes it would see leaves and answer None (silently wrong)
            raise AutogradEngineCall(f"{self.describe()} runs the autograd engine; it runs as Python",
                                     raw_gradients=self.fn is torch.autograd.grad)
        if makes_autograd_leaf(tx, kwargs):
            raise Unsupported(f"{self.describe()}(..., requires_grad=True) makes a new autograd leaf; "
                              f"Kiln makes it in Python")
        if touches_global_state(self.fn):
            # checked before the call: recording runs the function on fakes, which for
            # these would change (or read) the real process state at trace time
            raise Unsupported(f"{self.describe()} reads or changes torch's global state (RNG, autocast, "
                              f"defaults); it runs as Python")
        fn = self.fn
        if fn in _SAME_AS and len(args) == 1 and not kwargs and \
                getattr(getattr(args[0], "fake", None), "dtype", None) is torch.bool:
            fn = _SAME_AS[fn]
        result = graph_call(tx, "call_function", fn, list(args), dict(kwargs))
        if isinstance(self.fn, types.FunctionType) and result.is_constant() and result.as_constant() is None:
            # a Python function returning None was called for what it does, which the
            # fakes may not show (``_clip_grads_with_norm_`` scales ``p.grad``, absent on
            # fakes); dropping the node would drop that, so its body is traced instead
            return UserFunctionValue(self.fn, self.source).call(tx, args, kwargs)
        return result

    def getattr(self, tx, name):
        try:
            return tx.wrap(getattr(self.fn, name), None)
        except AttributeError:
            raise Unsupported(f"{self.describe()} has no attribute {name!r}")


# ops recorded as the op they are on a bool tensor: ``torch._is_all_true(t)`` (which
# torch.distributions' argument validation calls) is ``t.all()`` there, and the C function
# fails on fakes with symbolic sizes (an internal assert in torch's argument parser)
_SAME_AS = {torch._is_all_true: torch.all, torch._is_any_true: torch.any}

_AUTOGRAD_ENGINE_CALLS = frozenset({torch.autograd.grad, torch.autograd.backward})


_GLOBAL_STATE_NAMES = frozenset({
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "get_rng_state_all",
    "fork_rng", "use_deterministic_algorithms", "autocast_increment_nesting", "autocast_decrement_nesting",
    "clear_autocast_cache", "_enter_autocast", "_exit_autocast",
})


def touches_global_state(fn) -> bool:
    """torch functions whose point is process state: the RNG (seeding, saving and restoring
    it), autocast, default dtype/device, determinism and thread settings (``set_*``).
    None of them is an op on tensors, so none can be put in the graph; Kiln refuses them
    and they run as Python at a graph break, in program order."""
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str):
        return False
    return name in _GLOBAL_STATE_NAMES or name.startswith(("set_", "_set_"))


_IMMUTABLE_BUILTINS = (str, bytes, int, float, complex, bool, tuple, frozenset)


class CFunctionValue(RealCallableValue):
    """A C function Kiln has no model of: calling it is unsupported (a graph break)."""

    def describe(self):
        name = getattr(self.fn, "__qualname__", None) or repr(self.fn)
        mod = getattr(self.fn, "__module__", None)
        return f"{mod}.{name}" if mod else name

    def call(self, tx, args, kwargs):
        if self.fn is object.__setattr__ and len(args) == 3 and not kwargs and args[1].is_constant():
            # object.__setattr__(self, name, value) in a class's own __setattr__: the plain store
            target = args[0]
            store = getattr(target, "generic_setattr", None)
            if store is None:
                raise Unsupported(f"object.__setattr__ on {target.describe()}")
            store(tx, args[1].as_constant(), args[2])
            return const(None)
        if getattr(self.fn, "__objclass__", None) in _IMMUTABLE_BUILTINS:
            # an unbound method of str / int / tuple...: pure on constants (str.upper)
            if not args or not args[0].is_constant():
                raise Unsupported(f"{self.describe()} on {args[0].describe() if args else 'nothing'}")
            return ConstantMethodValue(args[0], self.fn.__name__, self.fn.__get__(args[0].as_constant())) \
                .call(tx, list(args[1:]), kwargs)
        raise Unsupported(f"call to {self.describe()}, a C function Kiln does not model")


class DisabledFunctionValue(RealCallableValue):
    """A function marked with kiln.disable / torch.compiler.disable: never traced."""

    def describe(self):
        return f"disabled function {getattr(self.fn, '__qualname__', self.fn)}"

    def call(self, tx, args, kwargs):
        raise Unsupported(f"{self.describe()} is excluded from compilation (kiln.disable / torch.compiler.disable)")


class ConstantFunctionValue(Value):
    """A function whose result Kiln knows at trace time (``is_compiling`` -> True)."""

    def __init__(self, fn, result, guard_global_state=False):
        self.fn = fn
        self.result = result
        self.guard_global_state = guard_global_state

    def real_object(self):
        return self.fn

    def describe(self):
        return f"{getattr(self.fn, '__qualname__', self.fn)}"

    def call(self, tx, args, kwargs):
        if not callable(self.result):
            return const(self.result)
        # the arguments matter (torch.is_autocast_enabled("cpu") is not the no-argument
        # form, which asks about CUDA); non-constant ones are refused
        try:
            real_args = [a.as_constant() for a in args]
            real_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
        except Unsupported:
            raise Unsupported(f"{self.describe()} with arguments that are not constants")
        return const(self.result(*real_args, **real_kwargs))


def caller_module(tx) -> str:
    """The ``__name__`` of the module whose code makes the current call."""
    g = getattr(tx, "f_globals", None)
    return g.get("__name__", "") if isinstance(g, dict) else ""


def in_torch_code(tx) -> bool:
    name = caller_module(tx)
    return name == "torch" or name.startswith("torch.")


class IsCompilingValue(ConstantFunctionValue):
    """``torch.compiler.is_compiling()``: True for user code, which asks to steer around
    what a compiler cannot capture; eager's False inside torch's own code, whose
    compiling branches serve torch.compile's backends and change results (an optimizer's
    step count kept as a float32 tensor instead of eager's Python float, grouping left to
    inductor).  Kiln traces eager's branches there, so results stay eager's bit for bit."""

    def call(self, tx, args, kwargs):
        return const(not in_torch_code(tx))


class InferenceModeQueryValue(ConstantFunctionValue):
    """``torch.is_inference_mode_enabled()``: the innermost ``inference_mode`` block being
    traced decides (Kiln traces those blocks as no_grad), else the real mode."""

    def call(self, tx, args, kwargs):
        t = tx
        while t is not None:
            for ctx in reversed(t.context_stack):
                if getattr(ctx, "inference", None) is not None:
                    return const(ctx.inference)
            t = t.parent
        return const(torch.is_inference_mode_enabled())


class IgnoredFunctionValue(Value):
    """A function whose call can be dropped while tracing (returns None)."""

    def __init__(self, fn):
        self.fn = fn

    def real_object(self):
        return self.fn

    def call(self, tx, args, kwargs):
        return const(None)


class GraphBreakFunctionValue(Value):
    """``kiln.graph_break()`` / ``torch._dynamo.graph_break()``."""

    def __init__(self, fn):
        self.fn = fn

    def real_object(self):
        return self.fn

    def call(self, tx, args, kwargs):
        if self.fn is not graph_break and in_torch_code(tx):
            # torch's own ``torch._dynamo.graph_break()`` calls (around an optimizer's
            # step) shape the graphs torch.compile hands AOTAutograd; they change nothing
            # a program computes, and Kiln honours only the breaks its users ask for
            return const(None)
        raise Unsupported("explicit graph break (kiln.graph_break())")


class TraceTimeFunctionValue(Value):
    """A pure function of its arguments' identity and code (``inspect.signature``):
    run for real at trace time on the real objects the arguments stand for."""

    def __init__(self, fn):
        self.fn = fn

    def real_object(self):
        return self.fn

    def describe(self):
        return f"{getattr(self.fn, '__module__', '')}.{getattr(self.fn, '__qualname__', self.fn)}"

    def call(self, tx, args, kwargs):
        real_args = [realize(a, tx) for a in args]
        real_kwargs = {k: realize(v, tx) for k, v in kwargs.items()}
        try:
            result = self.fn(*real_args, **real_kwargs)
        except Exception as e:
            raise Unsupported(f"{self.describe()}() raised {type(e).__name__}: {e}") from e
        return tx.wrap(result, None)


def realize(v: Value, tx=None):
    """The real object a Value stands for, when it stands for one (else Unsupported)."""
    if isinstance(v, ConstantValue):
        return v.value
    if isinstance(v, BoundMethodValue):
        return types.MethodType(realize(v.func, tx), realize(v.self_value, tx))
    real = getattr(v, "real_object", None)
    if real is not None:
        return real()
    if isinstance(v, ReplayedObjectValue):
        # built on fakes by its own constructor: right class and fields (dataclasses.fields,
        # is_dataclass); a fake leaking out of the call is refused when the result is wrapped
        return v.instance
    if isinstance(v, (DictValue, ListValue)) and getattr(v, "real", None) is not None and tx is not None \
            and id(v) not in tx.state.side_effects.mutated_containers and not v.dirty:
        return v.real
    raise Unsupported(f"{v.describe()} has no real object Kiln can pass to a trace-time call")


class CopyFunctionValue(TraceTimeFunctionValue):
    """``copy.copy`` / ``copy.deepcopy`` of a real object holding no tensors or modules:
    copied at trace time (such objects are configuration, read but not guarded deeply)."""

    def call(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            raise Unsupported(f"{self.describe()} with {len(args)} arguments")
        real = realize(args[0], tx)
        if _holds_tensors(real, depth=0, seen=set()):
            raise Unsupported(f"{self.describe()} of an object holding tensors or modules")
        result = super().call(tx, args, kwargs)
        # the copy exists only inside this capture: its mutations are not replayed
        tx.state.side_effects.trace_local_ids.add(id(realize(result, tx)))
        return result


def _holds_tensors(obj, depth, seen) -> bool:
    if isinstance(obj, (torch.Tensor, torch.nn.Module)):
        return True
    if depth > 6 or id(obj) in seen or isinstance(obj, (str, bytes, int, float, bool, type(None), type)):
        return False
    seen.add(id(obj))
    if isinstance(obj, dict):
        return any(_holds_tensors(v, depth + 1, seen) for v in obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return any(_holds_tensors(v, depth + 1, seen) for v in obj)
    d = getattr(obj, "__dict__", None)
    return isinstance(d, dict) and any(_holds_tensors(v, depth + 1, seen) for v in d.values())


def trace_time_functions() -> dict:
    fns = [inspect.signature, inspect.isfunction, inspect.ismethod, inspect.isclass, inspect.ismodule,
           inspect.iscoroutinefunction, inspect.isgeneratorfunction, dataclasses.fields, dataclasses.is_dataclass]
    table = {f: TraceTimeFunctionValue(f) for f in fns}
    table[copy.copy] = CopyFunctionValue(copy.copy)
    table[copy.deepcopy] = CopyFunctionValue(copy.deepcopy)
    return table


def torch_special_functions() -> dict:
    """Functions with a fixed meaning while Kiln traces."""
    table = {
        torch.compiler.is_compiling: IsCompilingValue(torch.compiler.is_compiling, True),
        torch.compiler.is_dynamo_compiling: IsCompilingValue(torch.compiler.is_dynamo_compiling, True),
        torch.jit.is_scripting: ConstantFunctionValue(torch.jit.is_scripting, False),
        torch.jit.is_tracing: ConstantFunctionValue(torch.jit.is_tracing, False),
        torch._C._get_tracing_state: ConstantFunctionValue(torch._C._get_tracing_state, None),
        torch.is_grad_enabled: ConstantFunctionValue(torch.is_grad_enabled, torch.is_grad_enabled),
        torch.is_inference_mode_enabled: InferenceModeQueryValue(torch.is_inference_mode_enabled, None),
        torch.is_autocast_enabled: ConstantFunctionValue(torch.is_autocast_enabled, torch.is_autocast_enabled),
        torch.get_default_dtype: ConstantFunctionValue(torch.get_default_dtype, torch.get_default_dtype),
        torch.is_tensor: None,  # handled by builtins-like isinstance logic below
        torch._assert: IgnoredFunctionValue(torch._assert),
        torch._C._log_api_usage_once: IgnoredFunctionValue(torch._C._log_api_usage_once),
    }
    table.pop(torch.is_tensor)
    table.update(trace_time_functions())
    table.update(tensor_metadata_functions())
    table.update(subclass_special_functions())
    table[graph_break] = GraphBreakFunctionValue(graph_break)
    # Code written for torch.compile may call torch._dynamo's markers; Kiln never
    # imports torch._dynamo itself, it only recognises them if the user already did.
    dyn = sys.modules.get("torch._dynamo")
    if dyn is not None:
        if hasattr(dyn, "graph_break"):
            table[dyn.graph_break] = GraphBreakFunctionValue(dyn.graph_break)
        if hasattr(dyn, "is_compiling"):
            table[dyn.is_compiling] = IsCompilingValue(dyn.is_compiling, True)
    ext = sys.modules.get("torch._dynamo.external_utils")
    if ext is not None and hasattr(ext, "is_compiling"):
        table[ext.is_compiling] = IsCompilingValue(ext.is_compiling, True)
    for modname, names in (("torch.compiler", ("is_exporting",)), ("torch.onnx", ("is_in_onnx_export",))):
        mod = __import__(modname, fromlist=["_"])
        for n in names:
            if hasattr(mod, n):
                table[getattr(mod, n)] = ConstantFunctionValue(getattr(mod, n), False)
    return table

