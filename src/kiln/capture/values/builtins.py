"""Python builtins, ``math`` and ``operator`` functions, evaluated on Values.

One handler per builtin in the BUILTINS table below.  Handlers fold constants,
unroll over containers and hand tensor work to the graph.
"""
from __future__ import annotations

import builtins as _b
import collections
import functools
import inspect
import math
import operator
import types

import torch

from ...exc import TENSOR_MIN_MAX, Unsupported
from ...runtime import caches
from ..basics import ALL_OPERATOR_FUNCTIONS
from .base import (ConstantValue, TracedException, Value, check_iterable, const, raise_python, sort_by_keys,
                   type_lookup, type_name)
from .containers import DictValue, DictViewValue, ListValue, SetValue, SliceValue, TracedKey, TupleValue, key_of, set_items
from .deques import DEQUES
from .exceptions import ExceptionValue
from .introspection import INTROSPECTION, real_classes
from .iterators import ITERTOOLS, AdaptorValue, IteratorValue, as_iterator, iterator_type
from .shared_iterators import SHARED_ITERTOOLS
from .container_subclasses import tuple_new
from .operator_objects import OPERATOR_OBJECTS
from .sets import make as make_set
from .weakrefs import WEAKREFS
from .new_objects import NewObjectValue
from .objects import ClassValue, is_plain_class
from .super_value import make_super
from .symbolic import SymNodeValue
from .tensor import TensorValue, graph_call, number_of


class BuiltinValue(Value):
    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def real_object(self):
        return self.fn

    def python_type(self):
        return type(self.fn)

    def describe(self):
        return f"builtin {getattr(self.fn, '__name__', self.fn)}"

    def call(self, tx, args, kwargs):
        signature = _signature(self.fn)
        if signature is not None:
            try:   # the arguments fit as Python would check them (handlers take them as fitting)
                signature.bind(*args, **kwargs)
            except TypeError as e:
                raise_python(TypeError, f"{getattr(self.fn, '__name__', self.fn)}(): {e}")
        return BUILTINS[self.fn](tx, list(args), dict(kwargs))

    def getattr(self, tx, name):
        if isinstance(self.fn, type):
            try:
                return tx.wrap(getattr(self.fn, name), None)
            except AttributeError:
                pass
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def getitem(self, tx, key):
        """``list[Tensor]``, ``dict[str, int]``: a type annotation made at run time
        (``typing.cast(list[Tensor], x)``), a constant alias of real classes."""
        if isinstance(self.fn, type) and hasattr(self.fn, "__class_getitem__"):
            parts = key.items if isinstance(key, TupleValue) else [key]
            real = [getattr(p, "real_object", lambda: None)() if not isinstance(p, ConstantValue) else p.value
                    for p in parts]
            if all(r is None or isinstance(r, type) or isinstance(r, types.GenericAlias) for r in real):
                return const(self.fn[tuple(real) if isinstance(key, TupleValue) else real[0]])
        return super().getitem(tx, key)

    def reconstruct(self, cg):
        return cg.ref(self.fn)


@functools.lru_cache(maxsize=None)
def _signature(fn):
    """The builtin's signature when Python can tell it (``len(obj, /)``), else None."""
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


caches.register_lru("capture.values.builtins.signatures", _signature)


def _consts(args):
    return [a.as_constant() for a in args]


def _fold(fn):
    def handler(tx, args, kwargs):
        try:
            return const(fn(*_consts(args), **{k: v.as_constant() for k, v in kwargs.items()}))
        except Unsupported:
            raise
        except Exception as e:
            raise_python(type(e), *e.args)
    return handler


def _iter_items(tx, v: Value) -> list:
    """The items ``iter(v)`` yields, for the builtins that call ``iter`` first: a value
    whose type cannot be iterated raises iter()'s TypeError in the program."""
    check_iterable(v)
    return v.unpack(tx)


def _len(tx, args, kwargs):
    v = args[0]
    if isinstance(v, TensorValue) and v.fake.ndim and type(v).length is TensorValue.length:
        return v.dim_size(tx, 0)   # stays symbolic when the size is (a subclass's len dispatches)
    if isinstance(v, ConstantValue):
        return _fold(len)(tx, args, kwargs)
    try:
        cls = v.python_type()
    except Unsupported:
        return const(v.length(tx))
    if type_lookup(cls, "__len__")[1] is None:   # an iterator, a generator: asked of the type
        raise_python(TypeError, f"object of type '{type_name(cls)}' has no len()")
    return const(v.length(tx))


def _range(tx, args, kwargs):
    return _fold(range)(tx, args, kwargs)


def _enumerate(tx, args, kwargs):
    start = (args[1] if len(args) > 1 else kwargs.get("start", const(0))).as_constant()
    return AdaptorValue(enumerate, [as_iterator(tx, args[0])], start=start)


def _zip(tx, args, kwargs):
    strict = kwargs.get("strict", const(False)).as_constant()
    if strict:
        lists = [_iter_items(tx, a) for a in args]
        if len({len(x) for x in lists}) > 1:
            raise Unsupported("zip(strict=True) with different lengths")
        return IteratorValue([TupleValue(list(t)) for t in zip(*lists)], zip)
    return AdaptorValue(zip, [as_iterator(tx, a) for a in args])


def _reversed(tx, args, kwargs):
    """``reversed(v)`` as CPython decides it from the type: its ``__reversed__``, else
    the sequence protocol (``__len__`` and ``__getitem__``, not a mapping), else
    TypeError (a set, an iterator)."""
    t = args[0]
    if isinstance(t, TensorValue):
        # Tensor.__reversed__: the tensor flipped along dim 0 (a 0-d tensor is returned as is)
        return t if t.fake.ndim == 0 else graph_call(tx, "call_method", "flip", [t, const(0)], {})
    try:
        cls = t.python_type()
    except Unsupported:
        raise Unsupported(f"reversed() of {t.describe()}, whose type Kiln does not know") from None
    owner, raw = type_lookup(cls, "__reversed__")
    sequence = type_lookup(cls, "__getitem__")[0] is not None and type_lookup(cls, "__len__")[0] is not None \
        and not issubclass(cls, dict)
    if owner is None and not sequence or owner is not None and raw is None:   # ``__reversed__ = None``
        raise_python(TypeError, f"'{type_name(cls)}' object is not reversible")
    # torch.Size's own __getitem__ gives a tuple's items for int indices, so its reversal is a tuple's
    if cls is not torch.Size and not all(k.__module__ in ("builtins", "collections") for k in cls.__mro__):
        raise Unsupported(f"reversed() of a {cls.__name__} object (its class's own protocol)")
    return IteratorValue(list(reversed(_iter_items(tx, t))), iterator_type(reversed, t))


def _iter(tx, args, kwargs):
    if len(args) != 1:
        raise Unsupported("iter() with a sentinel")
    if isinstance(args[0], TensorValue):
        # Tensor.__iter__ is ``iter(self.unbind(0))``: a tuple's iterator
        return IteratorValue(args[0].unpack(tx), type(iter(())))
    return as_iterator(tx, args[0])


def _next(tx, args, kwargs):
    it = args[0]
    if not isinstance(it, IteratorValue):
        raise Unsupported(f"next() on {it.describe()}")
    v = it.next(tx)
    if v is None:
        if len(args) > 1:
            return args[1]
        raise_python(StopIteration)
    return v


def _list(tx, args, kwargs):
    return ListValue(_iter_items(tx, args[0]) if args else [])


def _tuple(tx, args, kwargs):
    if args and isinstance(args[0], TupleValue) and type(args[0]) is TupleValue:
        return args[0]
    return TupleValue(_iter_items(tx, args[0]) if args else [])


def _dict(tx, args, kwargs):
    d = DictValue({})
    if args:
        src = args[0]
        if isinstance(src, DictValue):
            d = DictValue(src.items, key_values=src.key_values)
        else:
            # pulled one pair at a time, as CPython does: a bad element leaves the rest
            # of an iterator unconsumed
            it, i = as_iterator(tx, src), 0
            while (pair := it.next(tx)) is not None:
                k, v = _dict_pair(tx, i, pair)
                i += 1
                d.setitem(tx, k, v)
    d.items.update(kwargs)
    return d


def _dict_pair(tx, i: int, pair: Value):
    """Element ``i`` of ``dict(iterable)`` as a (key, value) pair, with the errors CPython
    raises for an element that is no sequence or has the wrong length."""
    try:
        check_iterable(pair)
    except TracedException:
        raise_python(TypeError, f"cannot convert dictionary update sequence element #{i} to a sequence")
    items = pair.unpack(tx)
    if len(items) != 2:
        raise_python(ValueError, f"dictionary update sequence element #{i} has length {len(items)}; 2 is required")
    return items


def _set(tx, args, kwargs):
    if args:
        check_iterable(args[0])
    return make_set(tx, args[0] if args else None, frozen=False)


def _frozenset(tx, args, kwargs):
    if args:
        check_iterable(args[0])
    return make_set(tx, args[0] if args else None, frozen=True)


def _minmax(fn):
    """``max``/``min`` as CPython runs them: the first item that no later item beats with
    ``>`` (``<`` for min), comparing ``key(item)`` when a key is given.  Ints of which
    some are symbolic sizes stay symbolic (``torch.sym_max``: no guard); anything else is
    compared in Python, so a symbolic comparison is decided (and guarded) by the ShapeEnv."""
    beats = operator.gt if fn is max else operator.lt
    sym_fn = torch.sym_max if fn is max else torch.sym_min

    def handler(tx, args, kwargs):
        key, default = kwargs.pop("key", None), kwargs.pop("default", None)
        if kwargs or (default is not None and len(args) != 1):
            raise_python(TypeError, f"{fn.__name__}() got an unexpected keyword argument")
        if key is not None and isinstance(key, ConstantValue) and key.value is None:
            key = None
        items = _iter_items(tx, args[0]) if len(args) == 1 else list(args)
        if not items:
            if default is not None:
                return default
            try:          # the message is the version's own (3.12 reworded it): asked of Python
                fn(())
            except ValueError as e:
                raise_python(ValueError, *e.args)
        if key is None and len(items) > 1 and any(isinstance(i, SymNodeValue) for i in items) \
                and all(i.python_type() is int for i in items):
            best = items[0]
            for i in items[1:]:
                best = graph_call(tx, "call_function", sym_fn, [best, i], {})
            return best
        if key is None and any(isinstance(i, TensorValue) for i in items) and len(items) > 1:
            # Python compares with `>` / `<` and branches on the result: not torch.maximum
            raise Unsupported(f"{fn.__name__}() over tensors compares their values (data-dependent)",
                              fix=TENSOR_MIN_MAX)
        keys = [key.call(tx, [i], {}) for i in items] if key is not None else items
        best = 0
        for i in range(1, len(items)):
            if tx.apply_operator(beats, keys[i], keys[best]).truth(tx):
                best = i
        return items[best]
    return handler


def _sum(tx, args, kwargs):
    items = _iter_items(tx, args[0])
    start = args[1] if len(args) > 1 else kwargs.get("start", const(0))
    total = start
    for i in items:
        total = tx.apply_operator(operator.add, total, i)
    return total


def _all_any(fn):
    """``all`` / ``any``: items pulled one at a time until one decides (an iterator is
    consumed exactly as far as Python consumes it)."""
    decisive = fn is any

    def handler(tx, args, kwargs):
        it = as_iterator(tx, args[0])
        while (item := it.next(tx)) is not None:
            if item.truth(tx) is decisive:
                return const(decisive)
        return const(not decisive)
    return handler


def _abs(tx, args, kwargs):
    if isinstance(args[0], TensorValue):
        return graph_call(tx, "call_function", torch.abs, args, {})
    return _fold(abs)(tx, args, kwargs)


def _number_data(v):
    """The one-element tensor holding a value's number when it is not a tensor itself (a
    numpy scalar or 0-d array: ``number_tensor()``, values/numpy_arrays.py), else ``v``."""
    held = getattr(v, "number_tensor", None)
    found = held() if callable(held) else None
    return v if found is None else found


def _numeric(cls):
    def handler(tx, args, kwargs):
        if len(args) == 1 and not kwargs:
            args = [_number_data(args[0])]
        if len(args) == 1 and not kwargs and isinstance(args[0], (TensorValue, SymNodeValue)):
            # a number read from tensor data stays in the graph (an unbacked symbol)
            out = number_of(tx, args[0], cls)
            if out is not None:
                return out
        if args and isinstance(args[0], TensorValue):
            raise Unsupported(f"{cls.__name__}() of a tensor needs its data")
        return _fold(cls)(tx, args, kwargs)
    return handler


def _bool(tx, args, kwargs):
    if len(args) == 1 and not kwargs:
        args = [_number_data(args[0])]
    if len(args) == 1 and not kwargs and isinstance(args[0], (TensorValue, SymNodeValue)):
        out = number_of(tx, args[0], bool)   # kept in the graph; a branch on it still breaks
        if out is not None:
            return out
    return const(args[0].truth(tx)) if args else const(False)


def _hash(tx, args, kwargs):
    """``hash(v)``: a class's own ``__hash__`` written in Python is traced (``key_of``);
    anything else must be a constant (an identity hash is a fact of the run)."""
    if len(args) == 1 and not kwargs and not isinstance(args[0], ConstantValue):
        key = key_of(args[0], tx)
        if isinstance(key, TracedKey):
            return const(hash(key))
        tp = _python_type_or_none(args[0])
        if tp is not None and tp.__hash__ is object.__hash__:
            # an identity hash of an object made or read in the frame is a fact of the run
            raise Unsupported(f"hash() of {args[0].describe()}: it hashes by identity (a run-time id)")
    return _fold(hash)(tx, args, kwargs)


def _python_type_or_none(v):
    try:
        return v.python_type()
    except Exception:   # noqa: BLE001 - a Value that cannot say its type
        return None



def _map(tx, args, kwargs):
    fn, *its = args
    return AdaptorValue(map, [as_iterator(tx, i) for i in its], fn)


def _filter(tx, args, kwargs):
    fn, it = args
    if isinstance(fn, ConstantValue) and fn.value is None:
        fn = None
    return AdaptorValue(filter, [as_iterator(tx, it)], fn)


def _sorted(tx, args, kwargs):
    lst = ListValue(_iter_items(tx, args[0]))
    lst.call_method(tx, "sort", [], kwargs) if False else _sort_in_place(tx, lst, kwargs)
    return lst


def _sort_in_place(tx, lst, kwargs):
    key = kwargs.get("key")
    reverse = bool(kwargs.get("reverse", const(False)).as_constant())
    if key is not None and not (isinstance(key, ConstantValue) and key.value is None):
        keys = [key.call(tx, [i], {}).as_constant() for i in lst.items]
    else:
        keys = [i.as_constant() for i in lst.items]
    sort_by_keys(lst.items, keys, reverse)


def _print(tx, args, kwargs):
    raise Unsupported("print() has a side effect Kiln does not capture")


def _super(tx, args, kwargs):
    return make_super(tx, args)


def _slice(tx, args, kwargs):
    parts = list(args) + [const(None)] * (3 - len(args))
    if len(args) == 1:
        parts = [const(None), args[0], const(None)]
    return SliceValue(*parts)


def _round(tx, args, kwargs):
    if isinstance(args[0], TensorValue):
        raise_python(TypeError, "type Tensor doesn't define __round__ method")
    return _fold(round)(tx, args, kwargs)


def _pow(tx, args, kwargs):
    if len(args) == 2:
        return tx.apply_operator(operator.pow, args[0], args[1])
    return _fold(pow)(tx, args, kwargs)


def _divmod(tx, args, kwargs):
    return _fold(divmod)(tx, args, kwargs)


def _str(tx, args, kwargs):
    if args and isinstance(args[0], ExceptionValue) and args[0].cls.__module__ == "builtins" \
            and not args[0].attrs:
        # ``str(e)`` of a builtin exception: BaseException.__str__ over its constant args
        exc = args[0]
        return const(str(exc.cls(*[a.as_constant() for a in exc.args])))
    if args and isinstance(args[0], DictViewValue):
        return const(str(args[0].python_value(tx)))      # the view of the dict as it is now
    if args and not args[0].is_constant():
        if isinstance(args[0], ClassValue) and type(args[0].obj).__str__ is type.__str__:
            return const(str(args[0].obj))
        raise Unsupported(f"str() of {args[0].describe()}")
    return _fold(str)(tx, args, kwargs)


def _object_new(tx, args, kwargs):
    if not args:
        raise_python(TypeError, "object.__new__(): not enough arguments")
    cls = real_classes(tx, args[0])
    if not isinstance(cls, type):
        raise_python(TypeError, f"object.__new__(X): X is not a type object ({type(cls).__name__})")
    if not is_plain_class(cls, python_new=True):
        raise Unsupported(f"object.__new__({cls.__name__})")
    obj = NewObjectValue(cls)
    tx.state.side_effects.track_new(obj)
    return obj


def _operator(fn):
    """A function of the ``operator`` module: Python's operator semantics on Values."""
    def handler(tx, args, kwargs):
        return tx.apply_operator(fn, *args)
    return handler


def _getitem(tx, args, kwargs):
    return args[0].getitem(tx, args[1])


def _setitem(tx, args, kwargs):
    args[0].setitem(tx, args[1], args[2])
    return const(None)


def _truth(tx, args, kwargs):
    return const(args[0].truth(tx))


def _not(tx, args, kwargs):
    return const(not args[0].truth(tx))


def _math_fn(fn):
    def handler(tx, args, kwargs):
        if any(isinstance(a, TensorValue) for a in args):
            # math.* converts its argument with float(): the tensor's data, and a float result
            raise Unsupported(f"math.{fn.__name__} of a tensor needs its data")
        return _fold(fn)(tx, args, kwargs)
    return handler


def _reduce(tx, args, kwargs):
    fn, it = args[0], args[1]
    try:
        check_iterable(it)
    except TracedException:
        raise_python(TypeError, "reduce() arg 2 must support iteration")
    it = it.unpack(tx)
    if len(args) < 3 and not it:
        raise_python(TypeError, "reduce() of empty iterable with no initial value")
    acc = args[2] if len(args) > 2 else it.pop(0)
    for i in it:
        acc = fn.call(tx, [acc, i], {})
    return acc


BUILTINS: dict = {
    _b.len: _len, _b.range: _range,
    _b.enumerate: _enumerate, _b.zip: _zip, _b.reversed: _reversed, _b.iter: _iter, _b.next: _next,
    _b.list: _list, _b.tuple: _tuple, _b.dict: _dict, _b.set: _set, _b.frozenset: _frozenset,
    _b.min: _minmax(min), _b.max: _minmax(max), _b.sum: _sum,
    _b.all: _all_any(all), _b.any: _all_any(any), _b.abs: _abs, _b.int: _numeric(int),
    _b.float: _numeric(float), _b.bool: _bool, _b.str: _str,
    _b.map: _map, _b.filter: _filter, _b.sorted: _sorted, _b.print: _print, _b.super: _super,
    _b.slice: _slice, _b.round: _round, _b.pow: _pow, _b.divmod: _divmod,
    _b.repr: _fold(repr), _b.format: _fold(format), _b.ord: _fold(ord), _b.chr: _fold(chr),
    _b.hash: _hash, _b.complex: _fold(complex), object.__new__: _object_new,
    operator.getitem: _getitem, operator.setitem: _setitem, operator.is_: _operator(operator.is_),
    operator.contains: _operator(operator.contains), operator.truth: _truth, operator.not_: _not,
    operator.index: _fold(operator.index),
    functools.reduce: _reduce,
}
BUILTINS.update(INTROSPECTION)
BUILTINS.update(ITERTOOLS)
BUILTINS.update(SHARED_ITERTOOLS)


def _tuple_new(tx, args, kwargs):
    if not args or not isinstance(args[0], ClassValue) or kwargs:
        raise Unsupported("tuple.__new__ with these arguments")
    return tuple_new(tx, args[0].obj, list(args[1:]))


BUILTINS[tuple.__new__] = _tuple_new
BUILTINS.update(OPERATOR_OBJECTS)
BUILTINS.update(DEQUES)
BUILTINS.update(WEAKREFS)


def _fromkeys(cls):
    """``dict.fromkeys(iterable, value=None)`` and the same classmethod of OrderedDict /
    defaultdict (whose default_factory is then None): every key maps to the one value."""
    def handler(tx, args, kwargs):
        if not 1 <= len(args) <= 2 or kwargs:
            raise_python(TypeError, f"fromkeys expected 1 or 2 arguments, got {len(args)}")
        value = args[1] if len(args) > 1 else const(None)
        d = DictValue({}, cls=cls)
        for k in _iter_items(tx, args[0]):
            d.setitem(tx, k, value)
        return d
    return handler


for _cls in (dict, collections.OrderedDict, collections.defaultdict):
    BUILTINS[_cls.fromkeys] = _fromkeys(_cls)
for _op in ALL_OPERATOR_FUNCTIONS:
    BUILTINS[_op] = _operator(_op)
for _name in ("sqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "floor", "ceil", "pow",
              "isnan", "isinf", "isfinite", "gcd", "fabs", "prod", "trunc", "atan", "atan2", "erf", "log1p",
              "expm1", "lcm", "copysign", "comb", "factorial", "hypot", "isclose", "radians", "degrees"):
    _f = getattr(math, _name, None)
    if _f is not None:
        BUILTINS[_f] = _math_fn(_f)
_ = (SliceValue,)
