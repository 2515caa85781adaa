"""Tensor values: an fx node plus the fake tensor that carries its metadata.

Metadata (shape, dtype, device, strides, requires_grad) is read from the fake: static
sizes are constants the tensor guards make sound, symbolic ones SymInts.  What needs
the data (``item()``, a mask, ``nonzero``) is an unbacked value in the graph."""
from __future__ import annotations

import operator

import numpy as np
import torch
from torch._subclasses.fake_tensor import DataDependentOutputException

from ... import trace
from ...exc import DATA_DEPENDENT_IF, DATA_IN_PYTHON, AutogradEngineCall, Unsupported
from ..basics import SYMBOLIC_TYPES, contains_fake, has_unbacked
from ..basics import AsTensorSource, AttrSource, ItemSource, LocalSource
from .base import ConstantValue, Value, bound_attribute_type, const, no_attribute, type_lookup
from .containers import DictValue, ListValue, SliceValue, TupleValue
from .symbolic import SymNodeValue, size_value

# Methods whose answer is metadata only: evaluated on the fake, returned as constants.
METADATA_METHODS = frozenset({
    "size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous", "is_floating_point",
    "is_complex", "element_size", "get_device", "storage_offset", "is_signed", "is_inference",
    "has_names", "is_pinned", "is_shared", "is_sparse", "is_set_to",
})
# Attributes that are metadata.
METADATA_ATTRS = frozenset({
    "shape", "dtype", "device", "ndim", "is_cuda", "is_sparse", "is_quantized", "is_meta", "layout",
    "requires_grad", "is_leaf", "is_mps", "is_nested", "itemsize", "nbytes", "is_cpu", "is_xpu",
})
# Methods that need tensor data in Python.
DATA_DEPENDENT = frozenset({
    "item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__", "data_ptr",
    "untyped_storage", "storage", "__array__", "__format__",
})
# Hooks of higher value kinds (None: decline).  Methods: name -> fn(tx, tensor, args, kwargs)
# (``numpy``: values/numpy_arrays.py); graph ops: fn(tx, kind, target, args, kwargs), tried
# first (``__torch_function__`` overrides: values/tensor_subclasses.py).
METHOD_HOOKS: dict = {}
DISPATCH_HOOKS: list = []
# Methods that cannot be put in a graph.
UNSUPPORTED_METHODS = {
    "backward": "calling backward() inside a compiled region",
    "register_hook": "tensor hooks",
    "retain_grad": "retain_grad()",
    "record_stream": "record_stream()",
    "set_": "Tensor.set_()",
    "resize_": "Tensor.resize_()",
}


class TensorValue(Value):
    def __init__(self, node, fake, source=None):
        self.node = node
        self.fake = fake
        self.source = source

    def python_type(self):
        return torch.Tensor if isinstance(self.fake, torch.nn.Parameter) is False else torch.nn.Parameter

    def describe(self):
        where = self.source.describe() if self.source is not None else self.node.name
        return f"Tensor({where}, {tuple(self.fake.shape)}, {self.fake.dtype})"

    # -- attributes -----------------------------------------------------------------
    def getattr(self, tx, name):
        fake = self.fake
        if name in METADATA_ATTRS:
            value = getattr(fake, name)
            if name == "shape":
                return self.shape_value(tx)
            if _is_symbolic(value):
                # a size-derived attribute (nbytes): computed by the graph on the real tensor
                return graph_call(tx, "call_function", getattr, [self, const(name)], {})
            return const(value)
        if name == "T":
            return graph_call(tx, "call_method", "permute", [self, *[const(d) for d in reversed(range(fake.ndim))]], {})
        if name == "mT":
            return graph_call(tx, "call_method", "transpose", [self, const(-2), const(-1)], {})
        if name in ("H", "mH"):
            dims = [const(-2), const(-1)] if name == "mH" or fake.ndim == 2 else None
            if dims is None:
                raise Unsupported(f"Tensor.H on a {fake.ndim}-d tensor")
            t = graph_call(tx, "call_method", "transpose", [self, *dims], {})
            return graph_call(tx, "call_method", "conj", [t], {}) if fake.is_complex() else t
        if name in ("real", "imag"):
            return graph_call(tx, "call_function", getattr(torch, name), [self], {})
        if name == "data":
            return graph_call(tx, "call_method", "detach", [self], {})
        if name == "grad":
            if self.source is not None:
                real = tx.state.real_value(self.source)
                pending = tx.state.side_effects.pending_attr(real, "grad")
                if pending is not None:
                    return pending
                return tx.wrap(real.grad, AttrSource(self.source, "grad"))
            raise Unsupported("reading .grad of a tensor computed inside the compiled region")
        # data-dependent and unsupported methods refuse when called, so that a graph
        # break lands on the CALL (resumable), not on LOAD_METHOD
        if name == "__class__":
            return tx.wrap(getattr(self, "cls", torch.Tensor), None)
        if type_lookup(getattr(self, "cls", None) or self.python_type(), name)[0] is not None:
            # found on the type, as an instance finds it (not ``hasattr(torch.Tensor, name)``,
            # which also sees what the metaclass defines: ``__call__``, ``mro``)
            return TensorMethodValue(self, name)
        raise no_attribute(torch.Tensor, name)

    def setattr(self, tx, name, value):
        if name == "grad" and self.source is not None and self._fits_grad(value):
            # ``p.grad = None`` (zero_grad) or a gradient of p's own layout: a Python write,
            # replayed by the glue after the graph like any attribute write; later reads in
            # the trace see it
            tx.state.side_effects.store_attr(self, name, value, real=tx.state.real_value(self.source))
            return
        raise Unsupported(f"setting Tensor.{name} inside a compiled region is not supported yet")

    def _fits_grad(self, value) -> bool:
        """What eager's ``.grad`` setter accepts without raising: None, or a tensor of
        this tensor's size, dtype and device."""
        if isinstance(value, ConstantValue):
            return value.value is None
        return isinstance(value, TensorValue) and value.fake.shape == self.fake.shape \
            and value.fake.dtype == self.fake.dtype and value.fake.device == self.fake.device

    # -- protocols ------------------------------------------------------------------
    def truth(self, tx):
        raise Unsupported("branching on the value of a tensor (data-dependent control flow)", fix=DATA_DEPENDENT_IF)

    def length(self, tx):
        if self.fake.ndim == 0:
            raise Unsupported("len() of a 0-d tensor")
        return int(self.fake.shape[0])   # a Python int: specialises a symbolic size

    # -- sizes ----------------------------------------------------------------------
    def dim_size(self, tx, dim: int) -> Value:
        """``self.size(dim)``: a constant, or a SymNodeValue when the size is symbolic."""
        size = self.fake.shape[dim]
        if isinstance(size, torch.SymInt):
            return graph_call(tx, "call_method", "size", [self, const(dim)], {})
        return const(size)

    def shape_value(self, tx) -> Value:
        """``self.shape`` / ``self.size()``: a torch.Size constant when every size is static."""
        if not _is_symbolic(self.fake.shape):
            return const(self.fake.shape)
        return size_value([self.dim_size(tx, i) for i in range(self.fake.ndim)])

    def unpack(self, tx):
        if self.fake.ndim == 0:
            raise Unsupported("iteration over a 0-d tensor")
        out = graph_call(tx, "call_method", "unbind", [self, const(0)], {})
        return out.unpack(tx)

    def getitem(self, tx, key):
        if isinstance(key, SymNodeValue) and isinstance(key.fake, torch.SymInt) and self.fake.ndim:
            # ``x[n]``, ``n`` symbolic: ``select`` keeps it so (indexing would specialise it); out
            # of range fails in the graph and the frame's Python run raises eager's IndexError
            return graph_call(tx, "call_method", "select", [self, const(0), key], {})
        return graph_call(tx, "call_function", operator.getitem, [self, key], {})

    def setitem(self, tx, key, value):
        graph_call(tx, "call_function", operator.setitem, [self, key, value], {})

    def reconstruct(self, cg):
        return cg.tensor_expr(self)


_SAMPLE_TENSOR = torch.empty(0)   # torch.Tensor's methods bound to it have the type all do


class TensorMethodValue(Value):
    """``tensor.name`` before it is called."""

    def __init__(self, tensor: TensorValue, name: str):
        self.tensor = tensor
        self.name = name

    def describe(self):
        return f"Tensor.{self.name}"

    def python_type(self):
        # a C method binds to builtin_function_or_method, one of torch/_tensor.py's Python
        # methods (``__len__``, ``__iter__``) to a bound ``method``: asked of Python
        cls = getattr(self.tensor, "cls", None) or torch.Tensor
        return bound_attribute_type(cls, self.name, _SAMPLE_TENSOR)

    def reconstruct(self, cg):
        return f"{cg.expr(self.tensor)}.{self.name}"

    def contents(self):
        return [self.tensor]

    def call(self, tx, args, kwargs):
        name, t = self.name, self.tensor
        if name == "is_inference" and t.source is not None and not args and not kwargs:
            # not a property of the fake tensor: read from the real input, and guarded
            value = tx.state.real_value(t.source).is_inference()
            tx.state.guards.add("tensor", t.source, f"{{v}}.is_inference() is {value}",
                                f"{t.source.describe()}.is_inference() is {value}",
                                plan=(("method_is", "is_inference", value),))
            return const(value)
        if name in METADATA_METHODS:
            try:
                real_args = [a.as_constant() for a in args]
                real_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
                value = getattr(t.fake, name)(*real_args, **real_kwargs)
            except Unsupported:
                raise
            except Exception as e:
                raise Unsupported(f"Tensor.{name}(...) failed at trace time: {e}") from e
            if not _is_symbolic(value):
                return const(value)
            if name == "size":
                return t.dim_size(tx, real_args[0]) if real_args else t.shape_value(tx)
            # numel(), stride(), is_contiguous()... of a tensor with symbolic sizes: in the graph
            return graph_call(tx, "call_method", name, [t, *args], kwargs)
        if name == "item" and not args and not kwargs:
            out = item_value(tx, t)
            if out is not None:
                return out
        hook = METHOD_HOOKS.get(name)
        made = hook(tx, t, args, kwargs) if hook is not None else None
        if made is not None:
            return made
        if name in DATA_DEPENDENT:
            raise Unsupported(f"Tensor.{name}() needs the tensor's data in Python",
                              fix=DATA_IN_PYTHON if name in ("item", "tolist", "__int__", "__float__") else None)
        if name == "backward":
            raise AutogradEngineCall(f"{UNSUPPORTED_METHODS[name]} is not supported inside a compiled region")
        if name in UNSUPPORTED_METHODS:
            raise Unsupported(f"{UNSUPPORTED_METHODS[name]} is not supported inside a compiled region")
        if name == "type" and not args and not kwargs:
            return const(t.fake.type())
        if makes_autograd_leaf(tx, kwargs):
            raise Unsupported(f"Tensor.{name}(..., requires_grad=True) makes a new autograd leaf; "
                              f"Kiln makes it in Python")
        if name == "requires_grad_":
            if t.source is not None:
                raise Unsupported("requires_grad_() on an input tensor inside a compiled region")
            turns_on = not args and "requires_grad" not in kwargs or (args or [kwargs.get("requires_grad")])[0].as_constant()
            if turns_on and not t.fake.requires_grad:
                # a new autograd leaf: made in Python (at a break), so every backend receives it
                # as an input that requires grad; made inside an AOT graph it would carry no
                # autograd history and a later backward() through it would fail
                raise Unsupported("requires_grad_() makes a new autograd leaf; Kiln makes it in Python")
        if name == "__len__":
            return const(t.length(tx))
        if name == "__getitem__":
            return t.getitem(tx, *args)
        if name == "__setitem__":
            t.setitem(tx, *args)
            return const(None)
        return graph_call(tx, "call_method", name, [t, *args], kwargs)


# --------------------------------------------------------------------------------------
# Putting an op into the graph

_KEEP_EVEN_WITHOUT_OUTPUT = frozenset({operator.setitem, operator.delitem})


def graph_call(tx, kind: str, target, args: list, kwargs: dict) -> Value:
    """Record ``target(*args, **kwargs)`` in the graph and wrap what it returns.

    Non-tensor results computed from metadata alone (``torch.is_floating_point(x)``)
    become constants and the node is dropped."""
    state, made = tx.state, DISPATCH_HOOKS[0](tx, kind, target, args, kwargs) if DISPATCH_HOOKS else None
    if made is not None:
        return made
    if target in _TENSOR_FROM_DATA and kind == "call_function" and args and _holds_data_number(args[0]):
        made = _tensor_from_numbers(tx, args[0], args[1:], kwargs)
        if made is not None:
            return made
    tensors = [a.fake for a in args if isinstance(a, TensorValue)]
    if (not tensors or target in _TENSOR_FROM_DATA or target == "new_tensor") \
            and _holds_numpy_scalar([*args, *kwargs.values()]):
        # without a tensor beside it, torch types a numpy scalar by its numpy dtype
        # (torch.tensor(np.float64(1)) is float64), unlike the Python number it lowers to
        raise Unsupported(f"a numpy scalar passed to {getattr(target, '__name__', target)} with no tensor beside it")
    if target in _SCALAR_FRIENDLY and tensors and all(t.dim() for t in tensors):
        # only next to tensors with dimensions: there a 0-d tensor promotes like the Python
        # number it stands for; next to a 0-d tensor it would not (0.01 * loss.sum() would
        # come out float64), so the number stays a constant
        floating = any(t.is_floating_point() or t.is_complex() for t in tensors)
        args = [_scalar_input(tx, a, floating) for a in args]
    written = kwargs.get("out") if kwargs.get("out") is not None else (args[0] if args else None)
    if isinstance(written, TensorValue) and _writes_in_place(kind, target, kwargs) and _overlaps(written.fake):
        # eager's kernels refuse most such writes ("more than one element of the written-to
        # tensor refers to a single memory location") and do others element by element
        # (zero_, fill_); a functional graph computes neither: the write runs as Python
        raise Unsupported(f"an in-place write to {written.describe()}, whose elements overlap in memory "
                          f"(an expanded tensor)")
    node_args, fake_args = zip(*[_lower(tx, a) for a in args]) if args else ((), ())
    node_kwargs, fake_kwargs = {}, {}
    for k, v in kwargs.items():
        node_kwargs[k], fake_kwargs[k] = _lower(tx, v)
    try:
        node, result = state.builder.call(kind, target, tuple(node_args), node_kwargs, tuple(fake_args), fake_kwargs)
    except Unsupported as e:
        converted = _scalar_kwargs_as_numbers(tx, kind, target, kwargs, e)
        if converted is None:
            raise
        return graph_call(tx, kind, target, args, converted)
    trace.note_origin(node, tx)
    mutating = (kind == "call_method" and target.endswith("_") and not target.startswith("__")) \
        or target in _KEEP_EVEN_WITHOUT_OUTPUT or kwargs.get("out") is not None
    if not mutating and kind == "call_function":
        # torch.relu_(t), torch.nn.init.*_ (t): in place on their first argument (checked
        # only inside higher-order operator bodies; the node is kept either way)
        name = getattr(target, "__name__", "") or ""
        if name.endswith("_") and not name.startswith("_") and contains_fake(result):
            state.note_tensor_mutation(args, kwargs)
    if not contains_fake(result) and not mutating:
        state.builder.graph.erase_node(node)
        return tx.wrap_fake_result(None, result)
    if mutating:
        state.note_tensor_mutation(args, kwargs)
    return tx.wrap_fake_result(node, result)


_TENSOR_FROM_DATA = frozenset({torch.tensor, torch.as_tensor})


def _holds_numpy_scalar(values) -> bool:
    return any((isinstance(v, ConstantValue) and isinstance(v.peek(), np.generic))
               or (isinstance(v, (TupleValue, ListValue)) and _holds_numpy_scalar(v.items)) for v in values)


def _holds_data_number(v: Value) -> bool:
    """Whether ``v`` (a number or a nest of lists and tuples) holds a number read from
    tensor data (an unbacked symbol)."""
    if isinstance(v, SymNodeValue):
        return has_unbacked(v.fake)
    if isinstance(v, (ListValue, TupleValue)):
        return any(_holds_data_number(i) for i in v.items)
    return False


def _tensor_from_numbers(tx, data: Value, rest: list, kwargs: dict) -> Value | None:
    """``torch.tensor([f, 2.0])`` where ``f`` was read from tensor data: the data cannot be
    read at trace time, so the tensor is built in the graph from 0-d tensors of each number
    (``scalar_tensor``, ``stack``), with the dtype ``torch.tensor`` infers from the Python
    numbers (bool < int64 < the default float dtype) and its device.  None: a form this
    does not cover (more arguments, complex numbers, empty lists), left to the fakes."""
    if rest or set(kwargs) - {"dtype", "device"}:
        return None
    kinds = set()

    def walk(v):
        if isinstance(v, (ListValue, TupleValue)):
            return bool(v.items) and all(walk(i) for i in v.items)
        kind = v.python_type() if isinstance(v, (SymNodeValue, ConstantValue)) else None
        kinds.add(kind)
        return kind in (bool, int, float)

    if not walk(data):
        return None
    dtype = kwargs.get("dtype", const(None)).as_constant()
    if dtype is None:
        dtype = torch.get_default_dtype() if float in kinds else torch.int64 if int in kinds else torch.bool
    device = kwargs.get("device", const(None))

    def build(v):
        if isinstance(v, (ListValue, TupleValue)):
            parts = [build(i) for i in v.items]
            return graph_call(tx, "call_function", torch.stack, [ListValue(parts)], {})
        return graph_call(tx, "call_function", torch.scalar_tensor, [v], {"dtype": const(dtype), "device": device})

    return build(data)


_INPLACE_OPERATORS = frozenset({
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.imod,
    operator.ipow, operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift, operator.imatmul,
})


_INPLACE_DUNDERS = frozenset(f"__{f.__name__}__" for f in _INPLACE_OPERATORS)


def _writes_in_place(kind: str, target, kwargs: dict) -> bool:   # into its first argument or out=
    name = target if kind == "call_method" else getattr(target, "__name__", "") or ""
    return (name.endswith("_") and not name.startswith("_")) or kwargs.get("out") is not None \
        or target in _INPLACE_OPERATORS or target in _KEEP_EVEN_WITHOUT_OUTPUT \
        or name in _INPLACE_DUNDERS


def _overlaps(fake) -> bool:
    """Whether some elements of ``fake`` share a memory location (a stride-0 dimension of
    size > 1, as ``expand`` makes), decided without guarding symbolic sizes."""
    for size, stride in zip(fake.shape, fake.stride()):
        if isinstance(stride, torch.SymInt):
            stride = stride.node.expr
        if stride == 0 and (isinstance(size, torch.SymInt) or size > 1):
            return True
    return False


# Elementwise arithmetic where a Python number and a 0-d tensor of the matching kind
# (int64 for int, float64 for float) give the same result dtype and values.
_SCALAR_FRIENDLY = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
    operator.iadd, operator.isub, operator.imul, operator.itruediv,
})


def _scalar_input(tx, v: Value, floating_operand: bool) -> Value:
    """A number that is not specialised yet (a loop index or an ``item()`` carried into a
    continuation) enters the graph as a 0-d tensor input instead of being baked in, so a
    new value is not a recompile.  A number read from an object, a global or a cell
    rather than given to the frame is baked in until a capture sees it change
    (``ShapePolicy.number_varies``).

    Its dtype keeps eager's type promotion: a 0-d tensor does not promote a tensor of its
    own category (int64 for an int, float64 for a float next to a floating tensor), and a
    float next to an integer tensor gives the default dtype, as a Python float does
    (float64 there would give float64 results)."""
    if not (isinstance(v, ConstantValue) and v.is_lazy() and v.source is not None):
        return v
    value = v.peek()
    if type(value) not in (int, float):
        return v
    if not (_given_to_frame(v.source) and tx.state.shapes.frame_numbers_are_inputs) \
            and not tx.state.shapes.number_varies(v.source.describe(), value):
        return v
    if type(value) is int:
        dtype = torch.int64
    else:
        dtype = torch.float64 if floating_operand else torch.get_default_dtype()
    state = tx.state
    state.guards.add("type", v.source, f"type({{v}}) is {state.ns.ref(type(value))}",
                     f"{v.source.describe()} is a {type(value).__name__}", change=(type(value), "{v}"))
    source = AsTensorSource(v.source, dtype)
    real = torch.tensor(value, dtype=dtype)
    state.keepalive.append(real)
    node, fake = state.builder.add_input(real, source, f"{v.source.describe()}_scalar")
    out = TensorValue(node, fake, source)
    out.cls = torch.Tensor
    state.fake_values[id(fake)] = out
    return out


def _given_to_frame(source) -> bool:
    """Whether ``source`` is an argument of the frame or an item of one (``args[0]``)."""
    while isinstance(source, ItemSource):
        source = source.base
    return isinstance(source, LocalSource)


def _is_symbolic(value) -> bool:
    if isinstance(value, SYMBOLIC_TYPES):
        return True
    return isinstance(value, tuple) and any(isinstance(v, SYMBOLIC_TYPES) for v in value)


def _torch_caller(tx) -> bool:
    g = getattr(tx, "f_globals", None)
    name = g.get("__name__", "") if isinstance(g, dict) else ""
    return name == "torch" or name.startswith("torch.")


def item_value(tx, t: TensorValue) -> Value | None:
    """``t.item()`` of a one-element tensor: a Python number computed by the graph (None:
    not one, so the call runs as Python, where eager raises or reads it).

    It is a symbol with no value at trace time (an "unbacked" SymInt / SymFloat / SymBool
    of the capture's ShapeEnv), bound to the ``item`` node.  Python arithmetic on it is
    recorded and runs on the real number (so ``lr / (1 - beta1 ** step)`` rounds as eager's
    Python floats do), it can be handed to ops as a scalar or a size, and anything that
    needs its value in Python (a branch, ``range(n)``, a constant argument) cannot be
    decided and becomes a graph break right there, where the graph so far hands the real
    number to the Python that follows.  No guard is ever made on it."""
    fake = t.fake
    if _is_symbolic(fake.shape) or fake.numel() != 1 or fake.is_complex():
        return None
    builder = tx.state.builder
    builder.fake_mode.allow_scalar_outputs = True
    try:
        out = graph_call(tx, "call_method", "item", [t], {})
    finally:
        builder.fake_mode.allow_scalar_outputs = False
    return out   # a constant when the fake knew the value (a tensor made from a constant in the frame)


def number_of(tx, v: Value, cls) -> Value | None:
    """``int(v)`` / ``float(v)`` / ``bool(v)`` of a one-element tensor or of a number read
    from tensor data, kept symbolic in the graph with Python's conversion (None: not such
    a value, so the caller folds it as a constant).  ``int`` of a float truncates as
    ``int()`` does (``torch.sym_int``); ``bool`` of a number is ``!= 0``."""
    if isinstance(v, TensorValue):
        if v.fake.dtype is torch.bool and cls is not bool:
            return None   # int(True) of a bool tensor: a Python int made from a bool, as Python
        v = item_value(tx, v)
        if v is None or isinstance(v, ConstantValue):
            return None if v is None else const(cls(v.value))
    if not (isinstance(v, SymNodeValue) and has_unbacked(v.fake)):
        return None
    kind = type(v.fake)
    if cls is bool:
        if kind is torch.SymBool:
            return v
        return tx.apply_operator(operator.ne, v, const(0))
    if kind is torch.SymBool:
        return None   # int(b) of a bool read from data: 0 or 1 decided in Python (a break)
    if cls is int:
        return v if kind is torch.SymInt else graph_call(tx, "call_function", torch.sym_int, [v], {})
    if cls is float:
        return v if kind is torch.SymFloat else graph_call(tx, "call_function", torch.sym_float, [v], {})
    return None


def _scalar_kwargs_as_numbers(tx, kind, target, kwargs: dict, error):
    """A 0-d floating tensor passed as a number argument (``p.addcdiv_(a, b, value=-lr /
    bc)`` with a tensor learning rate): the op reads it with ``item()``, which fakes
    cannot answer.  Kiln makes that ``item()`` explicit (a float computed by the graph,
    ``item_value``), so the op gets the same number.  Only keyword arguments that
    torch's schema for the op types ``Scalar`` are converted; None means nothing to do."""
    if not isinstance(error.__cause__, DataDependentOutputException):
        return None
    name = target if kind == "call_method" else getattr(target, "__name__", "")
    packet = getattr(torch.ops.aten, name, None) if isinstance(name, str) else None
    if packet is None:
        return None
    scalar_names = {a.name for ov in packet.overloads() for a in getattr(packet, ov)._schema.arguments
                    if str(a.type) in ("Scalar", "number")}
    out, changed = dict(kwargs), False
    for k, v in kwargs.items():
        if k in scalar_names and isinstance(v, TensorValue) and v.fake.dim() == 0 and v.fake.is_floating_point():
            out[k] = item_value(tx, v)
            changed = changed or not isinstance(out[k], TensorValue)
    return out if changed else None


def graph_argument(v: Value) -> bool:
    """Whether ``_lower`` can put ``v`` into a graph op (tensors, numbers, constants and
    containers of them); anything else makes a torch Python function traced instead."""
    if isinstance(v, (TensorValue, SymNodeValue, ConstantValue)):
        return True
    if isinstance(v, (TupleValue, ListValue)):
        return all(graph_argument(i) for i in v.items)
    if isinstance(v, SliceValue):
        return all(graph_argument(p) for p in (v.start, v.stop, v.step))
    if isinstance(v, DictValue):
        return all(graph_argument(i) for i in v.items.values())
    return getattr(v, "graph_constant", None) is not None


def _lower(tx, v: Value):
    """A Value as (what the fx node gets, what the fake computation gets)."""
    if isinstance(v, (TensorValue, SymNodeValue)):
        # a value of an enclosing graph becomes an input of a body's subgraph
        return tx.state.builder.lift(v.node, v.fake), v.fake
    if isinstance(v, ConstantValue):
        value = v.value
        if isinstance(value, np.generic):
            # a numpy scalar: torch takes it as the Python number (a wrapped number, as
            # np.float64 * int tensor -> the default float dtype shows); graph_call only
            # lets it reach an op next to a tensor argument
            if not isinstance(value, (np.bool_, np.number)):
                raise Unsupported(f"a numpy {type(value).__name__} passed into a graph op")
            value = value.item()
        return value, value
    if isinstance(v, (TupleValue, ListValue)):
        pairs = [_lower(tx, i) for i in v.items]
        ctor = tuple if isinstance(v, TupleValue) else list
        return ctor(p[0] for p in pairs), ctor(p[1] for p in pairs)
    if isinstance(v, SliceValue):
        parts = [_lower(tx, p) for p in (v.start, v.stop, v.step)]
        return slice(*[p[0] for p in parts]), slice(*[p[1] for p in parts])
    if isinstance(v, DictValue):
        node_d, fake_d = {}, {}
        for k, val in v.items.items():
            node_d[k], fake_d[k] = _lower(tx, val)
        return node_d, fake_d
    real = getattr(v, "graph_constant", None)
    if real is not None:
        obj = real()
        return obj, obj
    raise Unsupported(f"{v.describe()} cannot be passed into a graph op")


def makes_autograd_leaf(tx, kwargs: dict) -> bool:
    """A factory call with ``requires_grad=True`` (``torch.zeros(3, requires_grad=True)``,
    ``x.new_ones(2, requires_grad=True)``) that must run as Python at a break: made inside
    a graph that a backend functionalizes (AOTAutograd) the leaf would be a constant with
    no autograd history (outputs computed from it would not require grad, and it would
    get no ``.grad``).  A graph run as it is makes a real leaf, but only a backend that
    declares ``runs_graph_as_is`` (the eager backend; ``backends/contract.py``) is known to:
    one that declares nothing (a user's wrapper around ``aot_eager``) may functionalize."""
    if not tx.state.functional_backend:
        return False
    flag = kwargs.get("requires_grad")
    if flag is None:
        return False
    try:
        return bool(flag.as_constant())
    except Exception:         # not a constant: it may be True
        return True
