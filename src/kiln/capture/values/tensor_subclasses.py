"""Tensor subclasses: which ones Kiln traces, and how their ``__torch_function__`` runs.

A subclass that overrides ``__torch_function__`` (logging, unit tracking) is traced as a
tensor whose graph ops are those of plain tensors, with its type kept beside it
(``SubclassTensorValue``).  Every torch call that eager would hand to the override
(torch functions, methods, operators, attribute reads such as ``x.shape``) calls the
override at trace time, as user code, with exactly the ``func``, ``types`` and ``args``
eager passes: Kiln asks torch which those are by making the call on meta "probe"
tensors whose own override only records what it received (``_probe``).  So the
override's Python side effects (a list append, a print) are replayed as eager makes
them, once per call.  ``torch.Tensor.__torch_function__`` (what ``super()`` reaches) is
modelled: the call runs with dispatch off (``DisableTorchFunctionSubclass``, which is
modelled too) and tensor results are re-typed with ``as_subclass``.

At run time the graph gets the subclass inputs themselves and runs with torch-function
dispatch off (as eager's ``super().__torch_function__`` runs each op); outputs are
re-typed by the glue with ``as_subclass``.  The guards check the type and read the
metadata with dispatch off, so checking a call never calls the override.

Anything else (``__torch_dispatch__`` wrapper subclasses, DTensor, NestedTensor) is
refused with a message naming the subclass and what is missing.
"""
from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import is_traceable_wrapper_subclass, is_traceable_wrapper_subclass_type

from ...exc import Unsupported
from ..basics import AttrSource
from .base import ConstantValue, Value, const
from .functions import BoundMethodValue, UserFunctionValue
from .containers import DictValue, ListValue, TupleValue
from .symbolic import SymNodeValue
from .tensor import DISPATCH_HOOKS, METHOD_HOOKS, TensorMethodValue, TensorValue

_DEFAULT_TF = torch.Tensor.__torch_function__.__func__
_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter, torch.nn.parameter.Buffer)


def overrides_torch_function(cls) -> bool:
    """Whether instances of ``cls`` (a tensor type) take torch's ``__torch_function__``
    dispatch: their class defines one other than the disabled one (Parameter's)."""
    if cls in _PLAIN_TYPES or not isinstance(cls, type) or not issubclass(cls, torch.Tensor):
        return False
    tf = getattr(cls, "__torch_function__", None)
    return tf is not torch._C._disabled_torch_function_impl


def _is_wrapper_subclass(cls) -> bool:
    return getattr(cls, "__torch_dispatch__", None) is not getattr(torch.Tensor, "__torch_dispatch__", None)


def subclass_refusal(cls) -> str | None:
    """Why Kiln does not trace instances of tensor type ``cls`` (None: it does)."""
    if _is_wrapper_subclass(cls):
        return (f"tensor subclass {cls.__qualname__} defines __torch_dispatch__ (a wrapper subclass); "
                f"Kiln traces only traceable ones (__tensor_flatten__) outside torch.distributed/torch.nested")
    if not overrides_torch_function(cls) and not issubclass(cls, torch.nn.Parameter):
        return (f"tensor subclass {cls.__qualname__} turns __torch_function__ off without being a Parameter "
                f"subclass; Kiln does not trace it")
    return None


def is_parameter_subclass(cls) -> bool:
    """A subclass of ``nn.Parameter`` that keeps Parameter's disabled ``__torch_function__``
    (its instances behave as Parameters; it adds attributes or methods)."""
    return issubclass(cls, torch.nn.Parameter) and cls is not torch.nn.Parameter \
        and not overrides_torch_function(cls) and not _is_wrapper_subclass(cls)


def wrap_parameter_subclass(tx, obj: torch.Tensor, source, wrap_plain) -> Value:
    """A Parameter subclass: the plain tensor rule (its guard checks the exact type), then
    typed, so that its own attributes and methods are read as Python."""
    inner = wrap_plain(tx, obj, source, plain_type=True)
    v = SubclassTensorValue(inner.node, inner.fake, source, type(obj))
    tx.state.remember(obj, v)
    tx.state.fake_values[id(inner.fake)] = v
    return v


def plain_alias(t: torch.Tensor) -> torch.Tensor:
    """A plain ``torch.Tensor`` alias of ``t`` (sharing data, version and autograd)."""
    with torch._C.DisableTorchFunctionSubclass():
        return t.as_subclass(torch.Tensor)


def as_subclass_plainly(t: torch.Tensor, cls) -> torch.Tensor:
    """``t.as_subclass(cls)`` as eager's ``super().__torch_function__`` makes it (with
    dispatch off): the glue re-types a graph output with it."""
    with torch._C.DisableTorchFunctionSubclass():
        return t.as_subclass(cls)


def subclass_facts(t: torch.Tensor) -> tuple:
    """What a tensor guard checks, read with dispatch off (not calling the override)."""
    with torch._C.DisableTorchFunctionSubclass():
        return (t.dtype, t.device, t.requires_grad, tuple(t.shape), t.stride())


def without_subclass_dispatch(compiled):
    """The compiled graph run with torch-function dispatch off on plain aliases of its
    subclass inputs (whose overrides already ran at trace time): a backend sees plain
    tensors, as it did when it compiled the graph (AOTAutograd refuses others)."""
    def run(*args):
        with torch._C.DisableTorchFunctionSubclass():
            return compiled(*[a.as_subclass(torch.Tensor) if overrides_torch_function(type(a)) else a
                              for a in args])
    run.__wrapped__ = compiled
    return run


def wrap_subclass_input(tx, obj: torch.Tensor, source, wrap_plain) -> Value:
    """A subclass tensor that came into the frame: its plain alias wrapped by
    ``wrap_plain`` (the plain tensor rule), re-typed, with guards read with dispatch off."""
    cls = type(obj)
    why = subclass_refusal(cls)
    if why is not None:
        raise Unsupported(why)
    state = tx.state
    with torch._C.DisableTorchFunctionSubclass():
        plain = plain_alias(obj)
        state.keepalive.append(plain)
        inner = wrap_plain(tx, plain, source, guard=False)
        state.builder.subclass_inputs = True
        if source is not None:
            ns = state.guards.ns
            facts = subclass_facts(obj)
            state.guards.add("tensor", source, f"type({{v}}) is {ns.ref(cls)} and {ns.ref(subclass_facts)}({{v}}) == "
                             f"{ns.ref(facts)}", f"{source.describe()} is a {cls.__qualname__} of dtype {facts[0]}, "
                             f"shape {facts[3]}, stride {facts[4]}, requires_grad={facts[2]}")
    v = SubclassTensorValue(inner.node, inner.fake, source, cls)
    state.remember(obj, v)
    return v


# -- traceable wrapper subclasses (``__torch_dispatch__`` + ``__tensor_flatten__``) -----------

def is_traceable_wrapper(cls) -> bool:
    """A wrapper subclass the fake mode can fakeify (``TwoTensor``): inner tensors listed by
    ``__tensor_flatten__``, rebuilt by ``__tensor_unflatten__``, no ``__torch_function__``."""
    # (DTensor and the jagged NestedTensor need their meshes, placements and ragged sizes
    # modelled first: still refused)
    return is_traceable_wrapper_subclass_type(cls) and not overrides_torch_function(cls) \
        and not issubclass(cls, torch.nn.Parameter) \
        and not cls.__module__.startswith(("torch.distributed", "torch.nested"))


def is_wrapper_of_fakes(t) -> bool:
    """A graph op's result that is a wrapper subclass Kiln traces, over fake tensors."""
    if not is_traceable_wrapper_subclass(t) or not is_traceable_wrapper(type(t)):
        return False
    names, _ = t.__tensor_flatten__()
    return all(isinstance(getattr(t, n), FakeTensor) for n in names)


def wrapper_facts(t) -> tuple:
    """What a guard checks of a wrapper subclass: its flatten metadata and each inner
    tensor's type, dtype, device, requires_grad, sizes and strides (and the outer ones)."""
    names, ctx = t.__tensor_flatten__()
    inner = tuple((n, type(getattr(t, n)), getattr(t, n).dtype, getattr(t, n).device, getattr(t, n).requires_grad,
                   tuple(getattr(t, n).shape), getattr(t, n).stride()) for n in names)
    return (ctx, inner, t.dtype, t.requires_grad, tuple(t.shape), t.stride())


def wrap_wrapper_input(tx, obj, source) -> Value:
    """A wrapper subclass input: faked by the fake mode as the subclass over fake inner
    tensors (its ``__torch_dispatch__`` runs on them at trace time); the graph gets the
    subclass itself (AOTAutograd flattens it for the AOT backends)."""
    state = tx.state
    if source is None:
        raise Unsupported(f"a {type(obj).__qualname__} constant in a compiled region")
    node, fake = state.builder.add_input(obj, source, source.describe())
    ns, facts = state.guards.ns, wrapper_facts(obj)
    state.guards.add("tensor", source, f"type({{v}}) is {ns.ref(type(obj))} and {ns.ref(wrapper_facts)}({{v}}) == "
                     f"{ns.ref(facts)}", f"{source.describe()} is a {type(obj).__qualname__} with inner tensors "
                     f"{[i[0] for i in facts[1]]} of shapes {[i[5] for i in facts[1]]}")
    v = TensorValue(node, fake, source)
    v.cls = type(obj)
    state.remember(obj, v)
    state.fake_values[id(fake)] = v
    return v


class SubclassTensorValue(TensorValue):
    """A tensor of a ``__torch_function__`` subclass: the plain tensor's node and fake,
    and its type."""

    def __init__(self, node, fake, source, cls):
        super().__init__(node, fake, source)
        self.cls = cls

    def python_type(self):
        return self.cls

    def describe(self):
        return f"{self.cls.__qualname__}({super().describe()})"

    def getattr(self, tx, name):
        if _dispatch_off(tx) or name.startswith("__") or name == "grad":
            with torch._C.DisableTorchFunctionSubclass():   # (``.grad`` is read from the real input)
                return super().getattr(tx, name)
        owner = next((k for k in self.cls.__mro__ if name in k.__dict__), None)
        if owner is None or not (owner is torch.Tensor or owner is torch._C.TensorBase):
            if owner is None and self.source is not None:
                with torch._C.DisableTorchFunctionSubclass():
                    real = tx.state.real_value(self.source)
                    attrs = getattr(real, "__dict__", {})
                if name in attrs:
                    return tx.wrap(real.__dict__[name], AttrSource(self.source, name))
            if owner is not None:   # the subclass's own method or property: traced as user code
                return _bind(tx, owner.__dict__[name], self)
            return super().getattr(tx, name)
        attr = owner.__dict__[name]
        if callable(attr) and not isinstance(attr, property):
            return SubclassMethodValue(self, name)
        made = dispatch(tx, "getattr", name, [self], {})
        return made if made is not None else super().getattr(tx, name)

    def length(self, tx):
        made = dispatch(tx, "call_function", len, [self], {})   # eager: Tensor.__len__ dispatches
        return super().length(tx) if made is None else made.as_constant()

    def reconstruct(self, cg):
        if self.node.op == "placeholder" and self.source is not None:
            return cg.source_expr(self.source)
        return cg.new_object(self, f"{cg.ref(as_subclass_plainly)}({cg.tensor_expr(self)}, {cg.ref(self.cls)})")


def _bind(tx, attr, self_value):
    if isinstance(attr, property):
        return UserFunctionValue(attr.fget, None).call(tx, [self_value], {})
    if isinstance(attr, (staticmethod, classmethod)):
        raise Unsupported(f"a {type(attr).__name__} of tensor subclass {self_value.cls.__qualname__}")
    if callable(attr) and hasattr(attr, "__code__"):
        return BoundMethodValue(UserFunctionValue(attr, None), self_value)
    return tx.wrap(attr, None)


class SubclassMethodValue(TensorMethodValue):
    """``x.name`` of a subclass tensor before it is called: calling it dispatches."""

    def call(self, tx, args, kwargs):
        if not _dispatch_off(tx):
            made = dispatch(tx, "call_method", self.name, [self.tensor, *args], kwargs)
            if made is not None:
                return made
        return super().call(tx, args, kwargs)


def _dispatch_off(tx) -> bool:
    return tx.state.subclass_dispatch_off > 0


# -- asking torch what eager hands the override ------------------------------------------

class _Probed(Exception):
    pass


class _Probe(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise _Probed(func, args, kwargs or {})


def _probe_of(tx, v, table):
    if isinstance(v, TensorValue):
        shape = [s if isinstance(s, int) else 2 for s in v.fake.shape]
        p = torch.empty(shape, dtype=v.fake.dtype, device="meta").as_subclass(
            _Probe if overrides_torch_function(getattr(v, "cls", torch.Tensor)) else torch.Tensor)
        table[id(p)] = (p, v)
        return p
    if isinstance(v, (TupleValue, ListValue)):
        return (tuple if isinstance(v, TupleValue) else list)(_probe_of(tx, i, table) for i in v.items)
    if isinstance(v, SymNodeValue):
        real = v.fake.node.hint
    elif isinstance(v, ConstantValue):
        real = v.value
    else:
        raise _NotProbed
    table.setdefault(("const", type(real), repr(real)), (real, v))
    return real


class _NotProbed(Exception):
    pass


def _back(x, table):
    hit = table.get(id(x))
    if hit is not None and hit[0] is x:
        return hit[1]
    if isinstance(x, (tuple, list)):
        items = [_back(i, table) for i in x]
        return TupleValue(items) if isinstance(x, tuple) else ListValue(items)
    hit = table.get(("const", type(x), repr(x)))
    return hit[1] if hit is not None else const(x)


def _holds_override(values) -> bool:
    for v in values:
        if isinstance(v, TensorValue) and overrides_torch_function(getattr(v, "cls", torch.Tensor)):
            return True
        if isinstance(v, (TupleValue, ListValue)) and _holds_override(v.items):
            return True
    return False


def _eager_call(kind, target, args, kwargs):
    if kind == "call_method":
        return getattr(args[0], target)(*args[1:], **kwargs)
    if kind == "getattr":
        return getattr(args[0], target)
    return target(*args, **kwargs)


def dispatch(tx, kind: str, target, args: list, kwargs: dict) -> Value | None:
    """Eager's ``__torch_function__`` dispatch of ``target(*args, **kwargs)`` where an
    argument is a subclass tensor: the overrides called at trace time in eager's order.
    None: no override would run (the plain rule records the op)."""
    if _dispatch_off(tx) or not _holds_override([*args, *kwargs.values()]):
        return None   # (checked first: probing reads constants, which would specialise lazy ones)
    table: dict = {}
    try:
        probe_args = [_probe_of(tx, a, table) for a in args]
        probe_kwargs = {k: _probe_of(tx, v, table) for k, v in kwargs.items()}
    except _NotProbed:
        return None
    if not any(isinstance(p, _Probe) for p, _ in table.values()):
        return None
    try:
        with torch._subclasses.fake_tensor.unset_fake_temporarily():
            _eager_call(kind, target, probe_args, probe_kwargs)
    except _Probed as e:
        func, got_args, got_kwargs = e.args
    except Exception:
        return None
    else:
        return None
    values = [_back(a, table) for a in got_args]
    kw = {k: _back(v, table) for k, v in got_kwargs.items()}
    classes = []
    for p, v in table.values():
        c = getattr(v, "cls", None)
        if isinstance(p, _Probe) and c not in classes:
            classes.append(c)
    classes.sort(key=lambda c: sum(issubclass(c, o) and c is not o for o in classes), reverse=True)
    func_v = TorchFuncValue(func, kind, target)
    types_v = TupleValue([tx.wrap(c, None) for c in classes])
    for cls in classes:
        override = tx.wrap(cls, None).getattr(tx, "__torch_function__")
        out = override.call(tx, [func_v, types_v, TupleValue(values), DictValue(kw)], {})
        if not (isinstance(out, ConstantValue) and out.value is NotImplemented):
            return out
    raise Unsupported(f"no __torch_function__ of {', '.join(c.__qualname__ for c in classes)} handled "
                      f"{getattr(func, '__name__', func)} (eager raises TypeError)")


class TorchFuncValue(Value):
    """The ``func`` an override receives: reads as the real function; calling it runs the
    op the way the call it stands for would (a method, an attribute read, a function)."""

    def __init__(self, fn, kind, target):
        self.fn, self.kind, self.target = fn, kind, target

    def python_type(self):
        return type(self.fn)

    def describe(self):
        return f"torch function {getattr(self.fn, '__qualname__', self.fn)}"

    def real_object(self):
        return self.fn

    def reconstruct(self, cg):
        return cg.ref(self.fn)

    def getattr(self, tx, name):
        try:
            return tx.wrap(getattr(self.fn, name), None)
        except AttributeError:
            raise Unsupported(f"{self.describe()} has no attribute {name!r}")

    def call(self, tx, args, kwargs):
        name = getattr(self.fn, "__name__", "")
        owner = getattr(self.fn, "__objclass__", None) or getattr(getattr(self.fn, "__self__", None), "__objclass__", None)
        if name == "__get__" and self.kind == "getattr":
            return _with_dispatch_off(tx, lambda: args[0].getattr(tx, self.target))
        if owner in (torch.Tensor, torch._C.TensorBase) and args and isinstance(args[0], TensorValue):
            return _with_dispatch_off(tx, lambda: TensorMethodValue(args[0], name).call(tx, list(args[1:]), kwargs)) \
                if _dispatch_off(tx) else TensorMethodValue(args[0], name).call(tx, list(args[1:]), kwargs)
        return tx.wrap(self.fn, None).call(tx, args, kwargs)


def _with_dispatch_off(tx, thunk):
    state = tx.state
    state.subclass_dispatch_off = state.subclass_dispatch_off + 1
    try:
        return thunk()
    finally:
        state.subclass_dispatch_off -= 1


def retype(tx, v: Value, cls) -> Value:
    """``_convert(ret, cls)`` of torch/_tensor.py: tensors not already of ``cls`` made so."""
    if isinstance(v, TensorValue):
        if issubclass(getattr(v, "cls", torch.Tensor) or torch.Tensor, cls):
            return v
        return SubclassTensorValue(v.node, v.fake, None, cls) if cls is not torch.Tensor else v
    if isinstance(v, TupleValue) and type(v) is TupleValue:
        return TupleValue([retype(tx, i, cls) for i in v.items])
    if isinstance(v, ListValue) and type(v) is ListValue:
        return ListValue([retype(tx, i, cls) for i in v.items])
    return v


class DefaultTorchFunctionValue(Value):
    """``torch.Tensor.__torch_function__`` (``super().__torch_function__(...)``)."""

    def python_type(self):
        return type(_DEFAULT_TF)

    def describe(self):
        return "torch.Tensor.__torch_function__"

    def call(self, tx, args, kwargs):
        params = ["cls", "func", "types", "args", "kwargs"]
        bound = dict(zip(params, args))
        bound.update(kwargs)
        cls = getattr(bound["cls"], "obj", None)
        func = bound["func"]
        call_args = bound.get("args", TupleValue([]))
        call_kwargs = bound.get("kwargs", const(None))
        types = [getattr(t, "obj", None) for t in bound["types"].unpack(tx)]
        if not all(isinstance(t, type) and issubclass(cls, t) for t in types):
            return const(NotImplemented)
        kw = {} if isinstance(call_kwargs, ConstantValue) else \
            {k.as_constant() if isinstance(k, Value) else k: v for k, v in call_kwargs.items.items()}
        ret = _with_dispatch_off(tx, lambda: func.call(tx, list(call_args.unpack(tx)), kw))
        real_func = getattr(func, "fn", None)
        if real_func is not None and _hashable_in(real_func, torch.overrides.get_default_nowrap_functions()):
            return ret
        return retype(tx, ret, cls)


def _hashable_in(x, s) -> bool:
    try:
        return x in s
    except TypeError:
        return False


class DisableSubclassDispatchValue(Value):
    """``torch._C.DisableTorchFunctionSubclass()`` (and ``DisableTorchFunction()``): within
    the block, ops on subclass tensors do not call their overrides."""

    def __init__(self, cls):
        self.cls = cls

    def python_type(self):
        return self.cls

    def describe(self):
        return f"{self.cls.__name__}()"

    def enter(self, tx):
        tx.state.subclass_dispatch_off = tx.state.subclass_dispatch_off + 1
        return const(None)

    def exit(self, tx):
        tx.state.subclass_dispatch_off -= 1
        return const(None)

    def reconstruct(self, cg):
        return f"{cg.ref(self.cls)}()"


def _as_subclass(tx, t, args, kwargs):
    """``t.as_subclass(cls)``: the same node and fake, typed ``cls`` (dispatched first
    where ``t`` is itself a subclass tensor with dispatch on)."""
    if len(args) != 1 or kwargs:
        return None
    cls = getattr(args[0], "obj", None)
    if not (isinstance(cls, type) and issubclass(cls, torch.Tensor)):
        return None
    if cls is torch.Tensor:
        return _plain(tx, t)
    if subclass_refusal(cls) is not None or not overrides_torch_function(cls):
        raise Unsupported(subclass_refusal(cls) or f"as_subclass({cls.__qualname__}), a subclass without "
                                                    f"__torch_function__")
    return SubclassTensorValue(t.node, t.fake, None, cls)


def _plain(tx, t):
    v = TensorValue(t.node, t.fake)
    v.cls = torch.Tensor
    return v


METHOD_HOOKS["as_subclass"] = _as_subclass
DISPATCH_HOOKS.append(dispatch)


def subclass_special_functions() -> dict:
    return {_DEFAULT_TF: DefaultTorchFunctionValue()}
