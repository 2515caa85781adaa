"""numpy inside a traced frame: arrays that come from tensors are traced as tensor ops.

Why: preprocessing and metrics code moves between torch and numpy in the middle of a
forward (``x.numpy()``, ``np.log1p``, ``a.mean(axis=0)``, ``torch.from_numpy``).  Running
that as Python costs a graph break at every crossing.  torch ships ``torch._numpy``, a
numpy-compatible layer over tensors with numpy's type rules (float64 defaults
included), which is what torch.compile traces numpy code with; Kiln does the same:

- an array is a :class:`NumpyArrayValue` over the TensorValue holding its data;
  ``Tensor.numpy()`` gives one over the tensor itself (eager's array shares the
  tensor's memory, and so does this one), ``torch.from_numpy(a)`` a non-view alias of
  that tensor (``detach``), and an array that leaves the frame is ``t.numpy()`` of the
  graph's output (a numpy scalar: ``t.numpy()[()]``);
- a numpy function, an array method or a Python operator on arrays is one graph op: a
  runner (``numpy_<name>``) that wraps its tensor arguments as ``torch._numpy``
  arrays, calls ``torch._numpy``'s counterpart and returns tensors;
- **what numpy itself would give is checked**: the same call is made on real numpy,
  on zero-filled arrays of the same shapes and dtypes (zero-stride ones for large
  shapes), and the traced result must have numpy's type (array or which numpy
  scalar), dtype and static shape, else the call breaks; so does any call that
  writes to an argument (in-place operators, ``out=``, ``sort()``) and a call numpy
  refuses on zeros (symbolic sizes stand in with their example values);
- numpy calls on constants only (``np.finfo(np.float32).eps``, ``np.float32(2)``,
  ``np.sqrt(2.0)``) run at trace time when they give an immutable result (numpy
  scalars, dtypes, ``finfo``/``iinfo``): they are constants.  ``np.random`` is not in
  the table: its functions run as Python at a break, on numpy's own stream.

Values only up to the kernels' rounding are the same (torch's and numpy's
reductions and ``libm`` may differ in the last place); types and dtypes are numpy's.
"""
from __future__ import annotations

import math
import operator
import warnings

import numpy as np
import torch
import torch._numpy as tnp
from torch._numpy import _dtypes_impl

from ...exc import Unsupported
from ..basics import literal, SYMBOLIC_TYPES
from .base import ConstantValue, Value, const
from .callables import RealCallableValue, TorchFunctionValue
from .containers import ListValue, SliceValue, TupleValue
from .symbolic import SymNodeValue
from .tensor import METHOD_HOOKS, TensorValue, graph_call

# torch._numpy reads its default dtypes from torch._dynamo.config on first use; Kiln
# pins numpy's own defaults (float64, complex128, int64) so that import never happens
if _dtypes_impl._default_dtypes is None:
    _dtypes_impl._default_dtypes = _dtypes_impl.DefaultDTypes(torch.float64, torch.complex128, torch.int64)

#: numpy functions that write into an argument: never traced, never folded
_MUTATING = frozenset({"copyto", "put", "fill_diagonal", "place", "putmask"})
_MUTATING_METHODS = frozenset({"fill", "sort", "put", "resize", "itemset", "setflags", "partition", "setfield"})
#: immutable results a constant call may be folded to
_IMMUTABLE = (np.generic, np.dtype, np.finfo, np.iinfo, int, float, bool, complex, str, type(None), type)
_ORACLE_DENSE_LIMIT = 4096


def _namespace_table():
    """id(numpy callable) -> (numpy callable, torch._numpy counterpart or None): what
    numpy and torch._numpy both offer under one name, plus numpy's scalar types and
    type objects (``np.float32``, ``np.dtype``, ``np.finfo``) for constant calls."""
    table = {}
    for np_mod, t_mod in ((np, tnp), (np.linalg, tnp.linalg), (np.fft, tnp.fft)):
        for name in dir(np_mod):
            if name.startswith("_") or name in _MUTATING:
                continue
            obj = getattr(np_mod, name)
            counterpart = getattr(t_mod, name, None)
            scalar_type = isinstance(obj, type) and issubclass(obj, (np.generic, np.dtype, np.finfo, np.iinfo))
            if callable(obj) and (callable(counterpart) or scalar_type) and not isinstance(obj, type(np)):
                table[id(obj)] = (obj, counterpart if callable(counterpart) else None)
    return table


_TABLE = _namespace_table()


def is_numpy_callable(obj) -> bool:
    entry = _TABLE.get(id(obj))
    return entry is not None and entry[0] is obj


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    try:
        return np.dtype(str(dtype).rpartition(".")[2])
    except TypeError:
        raise Unsupported(f"a numpy array of torch dtype {dtype}, which numpy has no dtype for") from None


class NumpyArrayValue(Value):
    """A numpy array (or numpy scalar, ``scalar_type``) whose data is ``tensor``."""

    def __init__(self, tensor: TensorValue, scalar_type: type | None = None, source=None):
        self.tensor = tensor
        self.scalar_type = scalar_type
        self.source = source      # a real array from outside the frame: that very object

    def python_type(self):
        return self.scalar_type or np.ndarray

    def describe(self):
        kind = self.scalar_type.__name__ if self.scalar_type else "ndarray"
        return f"numpy {kind}({tuple(self.tensor.fake.shape)}, {self.tensor.fake.dtype})"

    def contents(self):
        return [self.tensor]

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.source_expr(self.source)
        return f"{cg.expr(self.tensor)}.numpy()" + ("[()]" if self.scalar_type else "")

    def getattr(self, tx, name):
        fake = self.tensor.fake
        if name == "shape":
            return TupleValue([self.tensor.dim_size(tx, i) for i in range(fake.ndim)])
        if name == "ndim":
            return const(fake.ndim)
        if name == "size":
            if any(isinstance(d, SYMBOLIC_TYPES) for d in fake.shape):
                return graph_call(tx, "call_method", "numel", [self.tensor], {})
            return const(fake.numel())
        if name == "dtype":
            return const(numpy_dtype(fake.dtype))
        if name == "itemsize":
            return const(fake.element_size())
        if name in ("T", "real", "imag", "flat") or not callable(getattr(np.ndarray, name, None)):
            if name not in ("T", "real", "imag"):
                raise Unsupported(f"attribute {name!r} of a numpy array")
            return numpy_call(tx, _attribute_getter(name), name, [self], {})
        if name in _MUTATING_METHODS:
            raise Unsupported(f"ndarray.{name}(), which changes the array in place")
        return NumpyMethodValue(self, name)

    def getitem(self, tx, key):
        return numpy_call(tx, operator.getitem, "getitem", [self, key], {})

    def setitem(self, tx, key, value):
        raise Unsupported("item assignment into a numpy array (an in-place change)")

    def length(self, tx):
        fake = self.tensor.fake
        if fake.ndim == 0:
            raise Unsupported("len() of a 0-d numpy array")
        return self.tensor.length(tx)

    def truth(self, tx):
        raise Unsupported("the truth value of a numpy array (its data in Python)")

    def number_tensor(self):
        """``float(a)`` / ``int(a)`` / ``bool(a)`` of a numpy scalar or 0-d array read its
        one element as ``item()`` does a tensor's (an array with dimensions, which numpy
        converts with a DeprecationWarning, is left to Python)."""
        return self.tensor if self.tensor.fake.ndim == 0 else None


def _attribute_getter(name):
    def get(a):
        return getattr(a, name)
    get.__name__ = name
    return get


class NumpyMethodValue(Value):
    """``array.name`` before it is called."""

    def __init__(self, array: NumpyArrayValue, name: str):
        self.array = array
        self.name = name

    def describe(self):
        return f"ndarray.{self.name}"

    def reconstruct(self, cg):
        return f"{cg.expr(self.array)}.{self.name}"

    def contents(self):
        return [self.array]

    def call(self, tx, args, kwargs):
        name = self.name

        def method(a, *rest, **kw):
            return getattr(a, name)(*rest, **kw)
        method.__name__ = name
        return numpy_call(tx, method, name, [self.array, *args], kwargs)


class NumpyFunctionValue(RealCallableValue):
    """A numpy function or scalar type read from outside the frame (guarded by identity)."""

    def python_type(self):
        return type(self.fn)

    def is_constant(self):
        return True

    def as_constant(self):
        return self.fn

    def describe(self):
        return f"numpy.{getattr(self.fn, '__name__', self.fn)}"

    def getattr(self, tx, name):
        return tx.wrap(getattr(self.fn, name), None)

    def call(self, tx, args, kwargs):
        if "out" in kwargs:
            raise Unsupported(f"{self.describe()}(..., out=...), which writes into an array")
        if not _holds_array([*args, *kwargs.values()]):
            folded = _fold_constant_call(self.fn, args, kwargs)
            if folded is not None:
                return folded
        counterpart = _TABLE[id(self.fn)][1]
        if counterpart is None:
            raise Unsupported(f"{self.describe()} with these arguments (torch._numpy has no counterpart)")
        return numpy_call(tx, counterpart, self.fn.__name__, list(args), kwargs, oracle=self.fn)


def _holds_array(values, kinds=(NumpyArrayValue, TensorValue)) -> bool:
    for v in values:
        if isinstance(v, kinds):
            return True
        if isinstance(v, (TupleValue, ListValue)) and _holds_array(v.items, kinds):
            return True
    return False


def _fold_constant_call(fn, args, kwargs):
    """``fn`` on constants, run now, when it gives an immutable result; else None."""
    if not all(a.is_constant() for a in [*args, *kwargs.values()]):
        return None
    try:
        real_args = [a.as_constant() for a in args]
        real_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
    except Exception:
        return None
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = fn(*real_args, **real_kwargs)
    except Exception as e:
        raise Unsupported(f"numpy.{getattr(fn, '__name__', fn)} raised {type(e).__name__} on constants") from e
    items = result if isinstance(result, tuple) else (result,)
    if all(isinstance(r, _IMMUTABLE) for r in items):
        return const(result)
    return None


# -- recording a call ---------------------------------------------------------------

def _to_tnp(x):
    if isinstance(x, torch.Tensor):
        return tnp.ndarray(x)
    if isinstance(x, (tuple, list)):
        return type(x)(_to_tnp(i) for i in x)
    return x


def _from_tnp(x):
    if isinstance(x, tnp.ndarray):
        return x.tensor
    if isinstance(x, (tuple, list)):
        return type(x)(_from_tnp(i) for i in x)
    if isinstance(x, tnp.generic):   # torch._numpy's scalar types are 0-d arrays
        return x.tensor
    return x


def _runner(fn, label, scalars=()):
    """The graph op: ``fn`` on torch._numpy arrays.  ``scalars`` names the arguments that
    were numpy scalars (position or keyword, with their dtype): fx passes them as Python
    numbers, and they are made numpy scalars again, which numpy types strongly
    (float16 array + np.float32 is float32) where a Python number is weak."""
    scalars = dict(scalars)

    def run(*args, **kwargs):
        args = [_to_tnp(a) if i not in scalars else getattr(tnp, scalars[i])(a) for i, a in enumerate(args)]
        kwargs = {k: _to_tnp(v) if k not in scalars else getattr(tnp, scalars[k])(v) for k, v in kwargs.items()}
        # numpy's default float is float64 where torch._numpy falls back on torch's default
        # dtype (int64 array / int is float32 there); the oracle checks every result's dtype
        before = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            return _from_tnp(fn(*args, **kwargs))
        finally:
            torch.set_default_dtype(before)
    run.__name__ = run.__qualname__ = f"numpy_{label}"
    return run


def _numpy_scalar_dtype(v: Value):
    if isinstance(v, ConstantValue) and isinstance(v.peek(), (np.bool_, np.number)) \
            and hasattr(tnp, v.peek().dtype.name):
        return v.peek().dtype.name
    return None


def _lower_arrays(v: Value) -> Value:
    """The argument with every array replaced by the tensor holding its data."""
    if isinstance(v, NumpyArrayValue):
        return v.tensor
    if isinstance(v, TensorValue):
        raise Unsupported("a torch tensor passed to a numpy function (numpy converts it with __array__)")
    dtype_like = v.as_constant() if isinstance(v, (NumpyFunctionValue, ConstantValue)) else None
    if isinstance(dtype_like, np.dtype) or isinstance(dtype_like, type) and issubclass(dtype_like, np.generic):
        return const(np.dtype(dtype_like).name)      # torch._numpy takes dtype names; fx cannot print types
    if isinstance(v, TupleValue):
        return TupleValue([_lower_arrays(i) for i in v.items])
    if isinstance(v, ListValue):
        return ListValue([_lower_arrays(i) for i in v.items])
    return v


def _hint(size) -> int:
    """A size for the stand-in: a symbolic size's example value (the types numpy gives do
    not depend on sizes; shapes are compared only where static)."""
    if isinstance(size, torch.SymInt):
        hint = size.node.hint
        if hint is None:
            raise Unsupported("a numpy array with a size computed from tensor data")
        return int(hint)
    return int(size)


def _oracle_arg(v: Value):
    """A real numpy stand-in for ``v``: zeros of the array's shape and dtype."""
    if isinstance(v, NumpyArrayValue):
        fake = v.tensor.fake
        dtype = numpy_dtype(fake.dtype)
        if v.scalar_type is not None:
            return v.scalar_type(0)
        shape = tuple(_hint(d) for d in fake.shape)
        if math.prod(shape) <= _ORACLE_DENSE_LIMIT:
            return np.zeros(shape, dtype)
        return np.broadcast_to(np.zeros((), dtype), shape)
    if isinstance(v, SymNodeValue):
        return type(v.fake.node.hint)(v.fake.node.hint) if v.fake.node.hint is not None else v.as_constant()
    if isinstance(v, SliceValue):
        return slice(*[_oracle_arg(p) for p in (v.start, v.stop, v.step)])
    if isinstance(v, (TupleValue, ListValue)):
        items = [_oracle_arg(i) for i in v.items]
        return tuple(items) if isinstance(v, TupleValue) else items
    return v.as_constant()


def _numpy_result(tx, oracle, args, kwargs, label):
    """What real numpy gives for this call on zero-filled stand-ins."""
    try:
        real_args = [_oracle_arg(a) for a in args]
        real_kwargs = {k: _oracle_arg(v) for k, v in kwargs.items()}
    except Unsupported:
        raise
    except Exception as e:
        raise Unsupported(f"numpy {label} with arguments Kiln cannot stand in for ({e})") from e
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return oracle(*real_args, **real_kwargs)
    except Exception as e:
        raise Unsupported(f"numpy {label} refused the arguments' shapes and dtypes "
                          f"({type(e).__name__}: {e})") from e


def _check_error_state(tx, label):
    """numpy's floating-point error handling (``np.seterr`` / ``np.errstate``) where it
    makes a bad value an exception or a callback: the graph cannot tell, so the call runs
    as Python; the state is guarded, so a change recompiles."""
    state = np.geterr()
    guards = tx.state.guards
    guards.add("global_state", None, f"{guards.ns.ref(np.geterr)}() == {literal(state)}",
               f"numpy's error state is {state}")
    if any(how in ("raise", "call", "log") for how in state.values()):
        raise Unsupported(f"numpy {label} under np.errstate / np.seterr that raises or calls on bad values")


def numpy_call(tx, fn, label, args, kwargs, oracle=None):
    """Record numpy's ``fn(*args, **kwargs)`` as one graph op through torch._numpy and
    wrap the result as numpy would type it (checked against real numpy)."""
    _check_error_state(tx, label)
    expected = _numpy_result(tx, oracle or fn, args, kwargs, label)
    inputs = [v.tensor.fake for v in [*args, *kwargs.values()] if isinstance(v, NumpyArrayValue)]
    versions = [t._version for t in inputs]
    scalars = [(i, _numpy_scalar_dtype(a)) for i, a in enumerate(args)]
    scalars += [(k, _numpy_scalar_dtype(v)) for k, v in kwargs.items()]
    run = _runner(fn, label, tuple((key, d) for key, d in scalars if d is not None))
    result = graph_call(tx, "call_function", run, [_lower_arrays(a) for a in args],
                        {k: _lower_arrays(v) for k, v in kwargs.items()})
    if [t._version for t in inputs] != versions:
        raise Unsupported(f"numpy {label} changes an array in place")
    return _typed_like(result, expected, label)


def _typed_like(result: Value, expected, label):
    if isinstance(expected, (np.ndarray, np.generic)):
        if not isinstance(result, TensorValue):
            raise Unsupported(f"numpy {label}: torch._numpy gave {result.describe()}, numpy a {type(expected).__name__}")
        fake = result.fake
        if numpy_dtype(fake.dtype) != expected.dtype:
            raise Unsupported(f"numpy {label}: torch._numpy computes {fake.dtype}, numpy {expected.dtype}")
        if isinstance(expected, np.ndarray) and not any(isinstance(d, SYMBOLIC_TYPES) for d in fake.shape) \
                and tuple(fake.shape) != expected.shape:
            raise Unsupported(f"numpy {label}: torch._numpy's shape {tuple(fake.shape)}, numpy's {expected.shape}")
        if isinstance(expected, np.generic) and fake.ndim != 0:
            raise Unsupported(f"numpy {label}: numpy gives a scalar, torch._numpy a {fake.ndim}-d array")
        return NumpyArrayValue(result, type(expected) if isinstance(expected, np.generic) else None)
    if isinstance(expected, tuple) and isinstance(result, (TupleValue, ListValue)) \
            and len(result.items) == len(expected):
        return TupleValue([_typed_like(r, e, label) for r, e in zip(result.items, expected)])
    if isinstance(expected, _IMMUTABLE) and isinstance(result, ConstantValue) and result.as_constant() == expected:
        return result
    raise Unsupported(f"numpy {label} returns a {type(expected).__name__}, which Kiln does not trace")


def numpy_operator(tx, fn, *operands: Value) -> Value:
    """A Python operator with a numpy array operand: numpy's ``__add__`` & co."""
    if any(isinstance(v, TensorValue) for v in operands):
        raise Unsupported(f"operator {fn.__name__} between a numpy array and a torch tensor")
    return numpy_call(tx, fn, fn.__name__.strip("_"), list(operands), {})


# -- where arrays meet torch -------------------------------------------------------

def tensor_numpy(tx, t: TensorValue, args, kwargs):
    """``t.numpy()``: the array over ``t`` itself (it shares ``t``'s memory)."""
    if args or kwargs:
        return None
    fake = t.fake
    if fake.requires_grad or fake.device.type != "cpu" or fake.is_conj() or fake.is_neg():
        return None   # eager raises (or copies): Python decides at a break
    numpy_dtype(fake.dtype)
    return NumpyArrayValue(t)


METHOD_HOOKS["numpy"] = tensor_numpy


class TorchFromArrayValue(TorchFunctionValue):
    """``torch.from_numpy``, ``torch.as_tensor``, ``torch.tensor`` given a traced array:
    ``from_numpy`` and ``as_tensor`` make a new tensor on the array's memory (a non-view
    alias; ``as_tensor`` to another dtype converts), ``tensor`` a contiguous copy.  Other
    arguments are the torch function's ordinary call."""

    def call(self, tx, args, kwargs):
        fn = self.fn
        array = args[0] if len(args) == 1 and isinstance(args[0], NumpyArrayValue) else None
        if array is None or set(kwargs) - ({"dtype"} if fn is not torch.from_numpy else set()):
            if fn is torch.from_numpy:
                raise Unsupported("torch.from_numpy of something other than a traced numpy array")
            if _holds_array([*args, *kwargs.values()], NumpyArrayValue):
                raise Unsupported(f"torch.{fn.__name__} of a numpy array with these arguments")
            return super().call(tx, args, kwargs)
        if array.scalar_type is not None and fn is not torch.tensor:
            raise Unsupported(f"torch.{fn.__name__} of a numpy scalar")
        dtype = kwargs.get("dtype", const(None)).as_constant()
        same = dtype is None or dtype == array.tensor.fake.dtype
        if fn is torch.tensor:
            out = graph_call(tx, "call_method", "clone", [array.tensor], {"memory_format": const(torch.contiguous_format)})
        else:
            out = graph_call(tx, "call_method", "detach", [array.tensor], {}) if same else array.tensor
        if not same:
            out = graph_call(tx, "call_method", "to", [out, const(dtype)], {})
        return out


#: torch functions that take a numpy array
TORCH_FROM_ARRAY = (torch.from_numpy, torch.as_tensor, torch.tensor)
