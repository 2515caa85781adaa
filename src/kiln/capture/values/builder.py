"""Turning real Python objects into Values (and guarding them), and turning the
results of fake-tensor computations back into Values.

``wrap`` is the one place that decides what kind of Value a real object becomes;
every guard on an input is installed here, at the moment Kiln first reads it.
"""
from __future__ import annotations

import collections
import collections.abc
import enum
import functools
import types

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor

from ...exc import Unsupported
from ..basics import SYMBOLIC_TYPES
from ..basics import AttrSource, CallSource, ConstSource, DictKeysSource, DictValuesSource, ItemSource, LocalSource
from .base import BoundContainerMethod, ConstantValue, Value, const
from .callables import realize, wrap_c_callable, wrap_class, wrap_python_function, wrap_special_object
from .construction import is_namedtuple_class
from .containers import DictValue, ListValue, NamedTupleValue, SetValue, TupleValue, key_of
from .contexts import wrap_autocast_exit, wrap_grad_mode_exit
from .deques import DequeValue
from .functions import BoundMethodValue, CachedFunctionValue, PartialValue, UserFunctionValue
from ...runtime import remaining_items
from .iterators import CARRIED_ITERATOR_TYPES, CarriedIteratorValue
from .nn_modules import ModuleValue
from .numpy_arrays import TORCH_FROM_ARRAY, NumpyArrayValue, NumpyFunctionValue, TorchFromArrayValue, is_numpy_callable
from .objects import ModuleGlobalsValue, ObjectValue, PythonModuleValue
from .symbolic import SymNodeValue, size_value
from .tensor import TensorMethodValue, TensorValue
from .tensor_subclasses import (is_parameter_subclass, is_traceable_wrapper, is_wrapper_of_fakes, wrap_wrapper_input, overrides_torch_function, subclass_refusal,
                                wrap_parameter_subclass, wrap_subclass_input)

_LITERALS = (int, float, bool, str, bytes, complex, type(None))
_METADATA_CONSTANTS = (torch.dtype, torch.device, torch.layout, torch.memory_format, torch.finfo, torch.iinfo,
                       range, slice, type(Ellipsis), type(NotImplemented))


def _is_structseq_class(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "n_sequence_fields")


def wrap(tx, obj, source) -> Value:
    """The Value for a real object read from ``source`` (None: a trusted constant).

    Asked in this order: an object already wrapped in this capture is that Value (a
    second source for it is guarded to be the same object); then ``_BY_TYPE``, keyed
    by the object's exact type (built-in containers and literals, whose subclasses are
    *not* the same thing); then ``_BY_KIND``, predicates tried in order (tensors first,
    the catch-all kinds last); then a plain object.  An entry may decline (return
    None), and the search goes on.  A new kind is a row in one of the tables."""
    state = tx.state
    known = state.known_value(obj)
    if known is not None:
        if source is not None and known.source is not None and source != known.source:
            state.guards.same_object(source, known.source)
        return known
    guards = state.guards if source is not None else None
    by_type = _BY_TYPE.get(type(obj))
    if by_type is not None:
        v = by_type(tx, obj, source, guards)
        if v is not None:
            return v
    for applies, make in _BY_KIND:
        if applies(obj):
            v = make(tx, obj, source, guards)
            if v is not None:
                return v
    if guards is not None:
        guards.type_is(source, obj)
    return state.remember(obj, ObjectValue(obj, source))


# -- exact types ---------------------------------------------------------------------

def _wrap_int(tx, obj, source, guards):
    state = tx.state
    # every value is remembered (0 and 1 too), so a position 0, 1, 2, ... is seen to vary
    # at 1 and is symbolic from 2 on; 0 and 1 themselves stay constants, as sizes do
    if isinstance(source, LocalSource) and state.shapes.int_is_dynamic(source.describe(), obj) and obj not in (0, 1):
        guards.type_is(source, obj)
        node, sym = state.builder.add_symint_input(obj, source, source.describe())
        v = SymNodeValue(node, sym)
        v.source = source
        return v
    return _wrap_literal(tx, obj, source, guards)


def _wrap_literal(tx, obj, source, guards):
    if guards is not None:
        return ConstantValue(obj, source, pending_guard=lambda: guards.constant(source, obj))
    return ConstantValue(obj, source)


def _items(tx, obj, source) -> list:
    return [wrap(tx, x, ItemSource(source, i) if source is not None else None) for i, x in enumerate(obj)]


def _wrap_tuple(tx, obj, source, guards):
    if guards is not None:
        guards.length(source, obj)
    items = _items(tx, obj, source)
    return TupleValue(items, source) if type(obj) is tuple else NamedTupleValue(items, type(obj), source)


def _wrap_list(tx, obj, source, guards):
    if guards is not None:
        guards.length(source, obj)
    v = ListValue(_items(tx, obj, source), source)
    v.real = obj
    return tx.state.remember(obj, v)


def _wrap_deque(tx, obj, source, guards):
    if source is None:
        return None
    guards.length(source, obj)
    guards.constant(AttrSource(source, "maxlen"), obj.maxlen)
    v = DequeValue(_items(tx, obj, source), obj.maxlen, source)
    v.real = obj
    return tx.state.remember(obj, v)


def _wrap_set(tx, obj, source, guards):
    state = tx.state
    if not all(type(k) in _LITERALS for k in obj):
        raise Unsupported("sets of non-constant items read from outside the frame")
    frozen = type(obj) is frozenset
    if guards is not None:
        # the same items of the same types in the same iteration order (equal sets may
        # iterate differently: the order is the hash table's)
        guards.type_is(source, obj)
        typed = [(type(k), k) for k in obj]
        guards.add("const", source, f"[(type(k), k) for k in {{v}}] == {state.ns.ref(typed)}",
                   f"{source.describe()} == {obj!r}, in this order")
    if frozen:
        return ConstantValue(obj, source)
    v = SetValue({k: const(k) for k in obj}, source)
    v.borrowed, v.real_set = True, obj
    return state.remember(obj, v)


_BY_TYPE = {
    **{t: _wrap_literal for t in _LITERALS}, int: _wrap_int,
    tuple: _wrap_tuple, list: _wrap_list,
    dict: lambda tx, obj, source, guards: _wrap_dict(tx, obj, source),
    collections.OrderedDict: lambda tx, obj, source, guards: _wrap_dict(tx, obj, source),
    collections.defaultdict: lambda tx, obj, source, guards: _wrap_dict(tx, obj, source),
    collections.deque: _wrap_deque, set: _wrap_set, frozenset: _wrap_set,
}


# -- kinds, in order ------------------------------------------------------------------

def _wrap_immutable(tx, obj, source, guards):
    # immutable, so a constant whose own methods run on the real object; guarded by type
    # and value: a str subclass (``torch.__version__``, a TorchVersion), numpy scalars,
    # dtypes and finfo / iinfo
    if guards is not None:
        guards.type_is(source, obj)
        guards.constant(source, obj)
    return ConstantValue(obj, source)


def _wrap_metadata_constant(tx, obj, source, guards):
    if guards is not None:
        if isinstance(obj, (torch.dtype, enum.Enum, type(Ellipsis), type(NotImplemented))):
            guards.identity(source, obj, "constant")
        else:
            guards.constant(source, obj)
    return ConstantValue(obj, source)


def _wrap_ndarray(tx, obj, source, guards):
    # a numpy array from outside the frame (an argument, a value carried over a break): its
    # data is a graph input read as ``torch.from_numpy(a)`` (the same memory), guarded as a
    # tensor is; arrays torch cannot view (object dtypes, read-only memory) stay objects
    if source is None or obj.dtype.hasobject or not obj.flags.writeable or obj.dtype.byteorder == ">":
        return None
    try:
        data = torch.from_numpy(obj)
    except (TypeError, RuntimeError, ValueError):
        return None
    guards.type_is(source, obj)
    guards.constant(AttrSource(source, "dtype"), obj.dtype)
    tx.state.keepalive.append(data)
    tensor = _wrap_tensor(tx, data, CallSource(id(torch.from_numpy), source, (), fn=torch.from_numpy))
    return tx.state.remember(obj, NumpyArrayValue(tensor, source=source))


def _wrap_size(tx, obj, source, guards):
    if guards is not None:
        guards.constant(source, obj)
    return ConstantValue(obj, source)


def _wrap_module(tx, obj, source, guards):
    # guarded by type, not identity: every attribute, parameter and submodule read
    # through it is guarded on its own, so layers of one class share entries
    if guards is not None:
        guards.type_is(source, obj)
    return tx.state.remember(obj, ModuleValue(obj, source))


_CONTAINER_TYPES = (list, dict, set, frozenset, tuple, collections.deque, collections.OrderedDict,
                    collections.defaultdict)


def _bound_builtin_kind(obj):
    """The Value kind of a builtin method bound to a tensor or a builtin container."""
    owner = getattr(obj, "__self__", None) if isinstance(obj, types.BuiltinMethodType) else None
    if isinstance(owner, torch.Tensor):
        return TensorMethodValue if hasattr(torch.Tensor, obj.__name__) else None
    if type(owner) in _CONTAINER_TYPES and isinstance(getattr(type(owner), obj.__name__, None),
                                                      types.MethodDescriptorType):
        return BoundContainerMethod
    return None


def _wrap_bound_builtin(tx, obj, source, guards):
    # ``x.add`` / ``out.append`` handed over a graph break: a new object on every call;
    # traced as the method of its object, guarded by type and name (the object on its own)
    if guards is not None:
        guards.type_is(source, obj)
        guards.constant(AttrSource(source, "__name__"), obj.__name__)
    self_v = wrap(tx, obj.__self__, AttrSource(source, "__self__") if source else None)
    return _bound_builtin_kind(obj)(self_v, obj.__name__)


_C_CALLABLE_TYPES = (types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodDescriptorType,
                     types.WrapperDescriptorType, types.MethodWrapperType, types.ClassMethodDescriptorType)


def _is_c_callable(obj) -> bool:
    return isinstance(obj, _C_CALLABLE_TYPES) or type(obj).__name__ in ("OpOverloadPacket", "OpOverload")


def _by_identity(kind: str, make):
    """An object that is the same object on every call (a function, module, class):
    guarded by identity (``kind`` names it in the guard), then made by ``make``."""
    def wrap_identified(tx, obj, source, guards):
        if guards is not None:
            guards.identity(source, obj, kind)
        return make(tx, obj, source)
    return wrap_identified


def _wrap_partial(tx, obj, source, guards):
    if guards is not None:
        guards.type_is(source, obj)
        guards.length(AttrSource(source, "args"), obj.args)
        guards.dict_keys(AttrSource(source, "keywords"), obj.keywords)
    func = wrap(tx, obj.func, AttrSource(source, "func") if source else None)
    args = [wrap(tx, a, ItemSource(AttrSource(source, "args"), i) if source else None) for i, a in enumerate(obj.args)]
    kwargs = {k: wrap(tx, a, ItemSource(AttrSource(source, "keywords"), k) if source else None)
              for k, a in obj.keywords.items()}
    return PartialValue(func, args, kwargs, source, obj)


def _wrap_bound_method(tx, obj, source, guards):
    special = wrap_grad_mode_exit(tx, obj, source) or wrap_autocast_exit(tx, obj, source)
    if special is not None:
        return special
    if guards is not None:
        guards.type_is(source, obj)
    func = wrap(tx, obj.__func__, AttrSource(source, "__func__") if source else None)
    self_v = wrap(tx, obj.__self__, AttrSource(source, "__self__") if source else None)
    return BoundMethodValue(func, self_v, source)


def _wrap_carried_iterator(tx, obj, source, guards):
    if source is None:
        return None
    rest = remaining_items(obj)
    if rest is None:
        return None
    guards.type_is(source, obj)
    return tx.state.remember(obj, CarriedIteratorValue(obj, source, rest))


_BY_KIND = [
    (lambda obj: isinstance(obj, torch.Tensor), lambda tx, obj, source, guards: _wrap_tensor(tx, obj, source)),
    (lambda obj: isinstance(obj, str), _wrap_immutable),        # exact str is a literal (_BY_TYPE)
    (lambda obj: isinstance(obj, (*_METADATA_CONSTANTS, enum.Enum)), _wrap_metadata_constant),
    (lambda obj: isinstance(obj, torch.Size), _wrap_size),
    (lambda obj: isinstance(obj, (np.generic, np.dtype, np.finfo, np.iinfo)), _wrap_immutable),
    (lambda obj: type(obj) is np.ndarray, _wrap_ndarray),
    (is_numpy_callable, _by_identity("function", lambda tx, obj, source: NumpyFunctionValue(obj, source))),
    (lambda obj: any(obj is f for f in TORCH_FROM_ARRAY),
     _by_identity("function", lambda tx, obj, source: TorchFromArrayValue(obj, source))),
    (lambda obj: is_namedtuple_class(type(obj)) or _is_structseq_class(type(obj)), _wrap_tuple),
    (lambda obj: isinstance(obj, torch.nn.Module), _wrap_module),
    (lambda obj: isinstance(obj, types.FunctionType), lambda tx, obj, source, guards: _wrap_function(tx, obj, source)),
    (lambda obj: isinstance(obj, functools._lru_cache_wrapper),
     _by_identity("function", lambda tx, obj, source: tx.state.remember(
         obj, CachedFunctionValue(obj, source, realize)))),
    (_bound_builtin_kind, _wrap_bound_builtin),
    (_is_c_callable, _by_identity("function", wrap_c_callable)),
    (lambda obj: isinstance(obj, types.ModuleType),
     _by_identity("module", lambda tx, obj, source: PythonModuleValue(obj, source))),
    (lambda obj: isinstance(obj, type), _by_identity("class", wrap_class)),
    (lambda obj: isinstance(obj, functools.partial), _wrap_partial),
    (lambda obj: isinstance(obj, types.MethodType), _wrap_bound_method),
    (lambda obj: type(obj) in CARRIED_ITERATOR_TYPES, _wrap_carried_iterator),
    (lambda obj: True, lambda tx, obj, source, guards: wrap_special_object(tx, obj, source)),
]


def _wrap_tensor(tx, obj: torch.Tensor, source, guard: bool = True, plain_type: bool = False) -> Value:
    state = tx.state
    if type(obj) not in (torch.Tensor, torch.nn.Parameter, torch.nn.parameter.Buffer) \
            and not isinstance(obj, torch.nn.parameter.Buffer) and not plain_type:
        if is_parameter_subclass(type(obj)):
            return wrap_parameter_subclass(tx, obj, source, _wrap_tensor)
        if is_traceable_wrapper(type(obj)):
            return wrap_wrapper_input(tx, obj, source)
        if overrides_torch_function(type(obj)):
            return wrap_subclass_input(tx, obj, source, _wrap_tensor)
        raise Unsupported(subclass_refusal(type(obj)) or f"tensor subclass {type(obj).__name__} is not supported")
    if isinstance(obj, FakeTensor):
        raise Unsupported("a fake tensor leaked into a real value (internal error)")
    if obj.is_sparse or obj.layout != torch.strided:
        raise Unsupported(f"tensors with layout {obj.layout} are not supported")
    dims, marked, guarded = set(), {}, source is not None
    if source is None:
        source = ConstSource(id(obj), obj)
    elif guard:   # a subclass input keeps static sizes (its guards read no symbolic ones)
        dims, marked = state.shapes.tensor_dims(source.describe(), obj)
    node, fake = state.builder.add_input(obj, source, source.describe(), dims, marked)
    if guarded and guard:
        state.guards.tensor(source, obj, fake)
    v = TensorValue(node, fake, source)
    v.cls = type(obj)
    if guard:   # (a subclass's plain alias is remembered as the subclass value)
        state.remember(obj, v)
    state.fake_values[id(fake)] = v
    return v


def _wrap_dict(tx, obj: dict, source) -> Value:
    module_globals = ModuleGlobalsValue.for_dict(tx, obj, source)   # a module's one store
    if module_globals is not None:
        return module_globals
    state = tx.state
    lazy_keys = source is not None and all(type(k) in (str, int, bytes) for k in obj)
    if source is not None:
        state.guards.type_is(source, obj)
        if not lazy_keys:
            state.guards.dict_keys(source, obj)
    items, key_values = {}, {}
    for i, (k, val) in enumerate(obj.items()):
        if type(k) in _LITERALS:
            src = ItemSource(source, k) if source is not None else None
        else:
            src = DictValuesSource(source, i) if source is not None else None
            kv = wrap(tx, k, DictKeysSource(source, i) if source is not None else None)
            # keyed as lookups will key it: a tensor key by its Value's identity
            k = key_of(kv, tx)
            key_values[k] = kv
        items[k] = wrap(tx, val, src)
    factory = None
    if type(obj) is collections.defaultdict and obj.default_factory is not None:
        factory = wrap(tx, obj.default_factory, AttrSource(source, "default_factory") if source else None)
    v = DictValue(items, source, cls=type(obj), key_values=key_values, default_factory=factory)
    v.real = obj
    if lazy_keys:
        v._keys_guard, v._keys_source = (lambda: state.guards.dict_keys(source, obj)), source
    return state.remember(obj, v)


def _wrap_function(tx, fn: types.FunctionType, source) -> Value:
    state = tx.state
    if source is not None:
        # closures and functions defined inside functions (lambdas, inner defs) are new
        # objects on every call of their maker: guard their code (defaults and cells
        # are guarded where they are read), not their identity
        if fn.__closure__ or "<locals>" in fn.__qualname__:
            state.guards.add("id", source, f"{{v}}.__code__ is {state.ns.ref(fn.__code__)}",
                             f"{source.describe()} runs the same code", plan=(("attr_is", "__code__", fn.__code__),))
        else:
            state.guards.identity(source, fn, "function")
    special = wrap_python_function(tx, fn, source)
    if special is not None:
        return special
    return UserFunctionValue(fn, source)


# ----------------------------------------------------------------------------------------
# Results of computations


def wrap_fake_result(tx, node, result) -> Value:
    """Wrap what a graph op returned on fakes; ``node`` is None when the op was dropped."""
    state = tx.state
    if isinstance(result, FakeTensor) or is_wrapper_of_fakes(result):
        existing = state.fake_values.get(id(result))
        if existing is not None:
            return existing
        if node is None:
            raise Unsupported("internal: tensor result without a graph node")
        v = TensorValue(node, result)
        v.cls = type(result) if not isinstance(result, FakeTensor) else torch.Tensor
        state.fake_values[id(result)] = v
        return v
    if isinstance(result, SYMBOLIC_TYPES):
        if node is None:
            raise Unsupported("internal: symbolic result without a graph node")
        return SymNodeValue(node, result)
    if isinstance(result, torch.Size) and any(isinstance(d, torch.SymInt) for d in result):
        return size_value([SymNodeValue(state.builder.getitem(node, i, d), d) if isinstance(d, torch.SymInt)
                           else const(d) for i, d in enumerate(result)])
    if isinstance(result, (tuple, list)) and not isinstance(result, torch.Size):
        items = []
        for i, r in enumerate(result):
            if isinstance(r, (FakeTensor, *SYMBOLIC_TYPES)) and id(r) not in state.fake_values:
                items.append(wrap_fake_result(tx, state.builder.getitem(node, i, r), r))
            elif isinstance(r, (tuple, list)) and not isinstance(r, torch.Size) and node is not None:
                items.append(wrap_fake_result(tx, state.builder.getitem(node, i, r), r))
            else:
                items.append(wrap_fake_result(tx, None, r))
        if type(result) is list:
            return ListValue(items)
        if type(result) is tuple:
            return TupleValue(items)
        nt = NamedTupleValue(items, type(result))
        if _is_structseq_class(type(result)):
            nt.field_order = _structseq_fields(result)
        return nt
    if isinstance(result, torch.Tensor):
        why = subclass_refusal(type(result)) if type(result) is not torch.Tensor else None
        raise Unsupported(f"a graph op made a {type(result).__qualname__}: {why}" if why else
                          "a real tensor was produced while tracing (internal error)")
    if result is None or type(result) in _LITERALS or isinstance(result, (torch.Size, *_METADATA_CONSTANTS)):
        return const(result)
    raise Unsupported(f"graph op returned an unsupported {type(result).__name__}")


def _structseq_fields(result) -> list:
    names = [n for n in dir(type(result)) if not n.startswith("_") and n not in
             ("count", "index", "n_fields", "n_sequence_fields", "n_unnamed_fields")]
    order = []
    for i, item in enumerate(result):
        for n in names:
            if getattr(result, n) is item and n not in order:
                order.append(n)
                break
    return order


def wrap_traced_object(tx, real) -> Value:
    """Map a structure holding fakes (from a replayed constructor) back to Values."""
    state = tx.state
    if isinstance(real, FakeTensor):
        v = state.fake_values.get(id(real))
        if v is None:
            raise Unsupported("an object built in the frame holds a tensor Kiln did not trace")
        return v
    if isinstance(real, torch.Tensor):
        return wrap(tx, real, None)
    replayed = state.replayed.get(id(real))
    if replayed is not None:
        return replayed
    if type(real) in (tuple, list):
        items = [wrap_traced_object(tx, r) for r in real]
        return TupleValue(items) if type(real) is tuple else ListValue(items)
    if type(real) is dict:
        return DictValue({k: wrap_traced_object(tx, v) for k, v in real.items()})
    if isinstance(real, (collections.abc.KeysView, collections.abc.ValuesView, collections.abc.ItemsView)):
        return TupleValue([wrap_traced_object(tx, r) for r in real])
    return wrap(tx, real, None)
