"""Python operators on Values: folded when both sides are constants, recorded as graph
ops when a tensor is involved, and handled structurally for containers."""
from __future__ import annotations

import collections
import operator

import torch

from ...exc import Unsupported
from ..basics import COMPARE_OPS, DUNDER as _DUNDER, INPLACE_TO_BINARY, REFLECTED as _REFLECTED, UNARY_OPS
from ..values import const, ConstantValue, dict_views, raise_python, sets, type_lookup, Value
from ..values import DictValue, DictViewValue, ListValue, SequenceValue, SetValue, TupleValue, key_of
from ..values import graph_call, NewObjectValue, ObjectValue, SizeValue, SymNodeValue, TensorValue
from ..values import NumpyArrayValue, numpy_operator


def _fold(fn, *values):
    try:
        return const(fn(*[v.as_constant() for v in values]))
    except Unsupported:
        raise
    except Exception as e:
        raise_python(type(e), *e.args)


def _numeric(v: Value) -> bool:
    return isinstance(v, SymNodeValue) or isinstance(v, ConstantValue) and type(v.peek()) in (int, float, bool)


def _symbolic(tx, fn, *operands):
    """An operator on a symbolic size: a graph op when every operand is a number (the
    result stays symbolic); else the sizes are specialised to their values (Python needs
    them, ``[0] * n``) and the caller carries on with constants.  Returns (result or
    None, operands)."""
    if not any(isinstance(v, SymNodeValue) for v in operands):
        return None, operands
    if all(_numeric(v) for v in operands):
        return graph_call(tx, "call_function", fn, list(operands), {}), operands
    return None, tuple(const(v.as_constant()) if isinstance(v, SymNodeValue) else v for v in operands)


def binary(tx, fn, a: Value, b: Value) -> Value:
    if isinstance(a, NumpyArrayValue) or isinstance(b, NumpyArrayValue):
        return numpy_operator(tx, fn, a, b)
    if isinstance(a, TensorValue) or isinstance(b, TensorValue):
        return graph_call(tx, "call_function", fn, [a, b], {})
    result, (a, b) = _symbolic(tx, fn, a, b)
    if result is not None:
        return result
    if isinstance(a, ConstantValue) and isinstance(b, ConstantValue):
        lazy = _lazy_arithmetic(fn, a, b)
        return lazy if lazy is not None else _fold(fn, a, b)
    if isinstance(a, SequenceValue) or isinstance(b, SequenceValue):
        # a constant tuple or list next to a symbolic one (``(-1,) + shape[1:]``, ``() + (t,)``):
        # the same sequence, item by item
        a, b = _as_sequence(a), _as_sequence(b)
        if fn is operator.add and isinstance(b, SizeValue) and type(a) is TupleValue:
            return b.like(a.items + b.items)   # torch.Size.__radd__: a tuple + a Size is a Size
    structural = _sequence_op(tx, fn, a, b)
    if structural is not None:
        return structural
    if a.is_constant() and b.is_constant() and not isinstance(a, (ListValue, SetValue)):
        return _fold(fn, a, b)
    user = _user_dunder(tx, fn, a, b)
    if user is not None:
        return user
    raise Unsupported(f"operator {fn.__name__} on {a.describe()} and {b.describe()}")


_ARITHMETIC = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
               operator.floordiv: "//", operator.mod: "%", operator.pow: "**"}


def _lazy_arithmetic(fn, a: ConstantValue, b: ConstantValue):
    """Arithmetic on numbers that are not specialised yet stays unspecialised.

    The result knows its value (for whoever needs it, which then guards both operands)
    but the glue recomputes it from the operands' sources, so a running total or a
    loop index flowing through continuations does not recompile per value.
    """
    symbol = _ARITHMETIC.get(fn)
    if symbol is None or not (a.is_lazy() or b.is_lazy()):
        return None
    va, vb = a.peek(), b.peek()
    if not all(type(v) in (int, float) for v in (va, vb)):
        return None
    try:
        value = fn(va, vb)
    except Exception:
        return None

    def consume():
        _ = a.value, b.value

    def rebuild(cg):
        return f"({cg.expr(a)} {symbol} {cg.expr(b)})"

    return ConstantValue(value, None, pending_guard=consume, rebuild=rebuild)


def inplace(tx, fn, a: Value, b: Value) -> Value:
    if isinstance(a, NumpyArrayValue):
        raise Unsupported(f"in-place operator {fn.__name__} on a numpy array")
    if isinstance(a, TensorValue):
        return graph_call(tx, "call_function", fn, [a, b], {})
    if isinstance(a, ListValue) and fn is operator.iadd:
        a.call_method(tx, "extend", [b], {})
        return a
    if isinstance(a, DictValue) and fn is operator.ior:
        a.call_method(tx, "update", [b], {})
        return a
    if isinstance(a, SetValue):
        in_place = sets.inplace(tx, INPLACE_TO_BINARY[fn], a, b)
        if in_place is not None:
            return in_place
        if not isinstance(b, DictViewValue):
            # set.__ior__ declined; so does set.__or__ against anything but a set
            result = sets.binary(tx, INPLACE_TO_BINARY[fn], a, b, suffix="=")
            if result is not None:
                return result
    result = binary(tx, INPLACE_TO_BINARY[fn], a, b)
    if isinstance(a, ListValue) and type(result) is type(a) and result is not a:
        # list *= n: Python mutates the left operand itself
        tx.state.side_effects.mutated(a)
        a.items[:] = result.items
        return a
    return result


def _as_sequence(v: Value) -> Value:
    if isinstance(v, ConstantValue) and type(v.peek()) in (tuple, list, torch.Size):
        items = [const(x) for x in v.value]
        if type(v.value) is torch.Size:
            return SizeValue(items)
        return TupleValue(items) if type(v.value) is tuple else ListValue(items)
    return v


def _sequence_op(tx, fn, a, b):
    if fn is operator.add and isinstance(a, SequenceValue) and isinstance(b, SequenceValue):
        if a.concat_type() is not b.concat_type():
            raise_python(TypeError, f'can only concatenate {a.concat_type().__name__} '
                                    f'(not "{b.python_type().__name__}") to {a.concat_type().__name__}')
        return a.like(a.items + b.items)
    if fn is operator.mul:
        seq, n = (a, b) if isinstance(a, SequenceValue) else (b, a)
        if isinstance(seq, SequenceValue) and isinstance(n, ConstantValue):
            if not isinstance(n.value, int):
                raise_python(TypeError, f"can't multiply sequence by non-int of type '{type(n.value).__name__}'")
            return seq.like(seq.items * n.value)
    if fn is operator.or_ and isinstance(a, DictValue) and isinstance(b, DictValue):
        return DictValue({**a.items, **b.items}, key_values={**a.key_values, **b.key_values})
    if fn in (operator.or_, operator.and_, operator.sub, operator.xor) and \
            (isinstance(a, DictViewValue) or isinstance(b, DictViewValue)):
        # a keys / items view acts as a set: a plain set, built the way CPython builds it
        return dict_views.view_binary(tx, fn, a, b)
    if fn in (operator.or_, operator.and_, operator.sub, operator.xor):
        return sets.binary(tx, fn, a, b)   # run by Python on the sets' shadows
    return None


def _user_dunder(tx, fn, a, b):
    """``a.__op__(b)`` (``b`` None: unary), then ``b.__rop__(a)``, for instances of user classes."""
    result = _dunder(tx, a, _DUNDER.get(fn), [] if b is None else [b])
    if b is not None and (result is None or _not_implemented(result)):
        reflected = _dunder(tx, b, _REFLECTED.get(fn), [a])
        if reflected is not None and not _not_implemented(reflected):
            return reflected
        if result is not None and fn in _REFLECTED:
            raise_python(TypeError, f"unsupported operand type(s) for {fn.__name__}: "
                                    f"{a.python_type().__name__!r} and {b.python_type().__name__!r}")
        return None   # == / != fall back to identity in the caller
    return result


def _dunder(tx, v, name, args):
    # instances only: for a class object these names are its unbound methods
    if not name or not isinstance(v, (ObjectValue, NewObjectValue)) or issubclass(v.python_type(), type):
        return None
    if type_lookup(v.python_type(), name)[1] is None:
        return None   # Python asks the type's slot: never the instance, never __getattr__
    try:
        method = v.getattr(tx, name)
    except Unsupported:
        return None
    return method.call(tx, args, {})


def _not_implemented(v) -> bool:
    return isinstance(v, ConstantValue) and v.value is NotImplemented


def compare(tx, fn, a: Value, b: Value) -> Value:
    if isinstance(a, NumpyArrayValue) or isinstance(b, NumpyArrayValue):
        return numpy_operator(tx, fn, a, b)
    if isinstance(a, TensorValue) or isinstance(b, TensorValue):
        if isinstance(a, TensorValue) and isinstance(b, ConstantValue) and b.value is None:
            return const(fn is operator.ne)
        return graph_call(tx, "call_function", fn, [a, b], {})
    result, (a, b) = _symbolic(tx, fn, a, b)
    if result is not None:
        return result
    views = dict_views.view_compare(tx, fn, a, b)   # a keys / items view against a set or view
    if views is not None:
        return views
    ordered_sets = sets.binary(tx, fn, a, b)   # set against set: Python compares the shadows
    if ordered_sets is not None:
        return ordered_sets
    if fn in (operator.eq, operator.ne):
        if isinstance(a, ConstantValue) and isinstance(b, ConstantValue):
            return _fold(fn, a, b)
        if isinstance(a, SequenceValue) and isinstance(b, SequenceValue):
            if len(a.items) != len(b.items) or type(a) is not type(b):
                return const(fn is operator.ne)
            results = [compare(tx, operator.eq, x, y) for x, y in zip(a.items, b.items)]
            same = all(r.as_constant() for r in results)
            return const(same if fn is operator.eq else not same)
        if isinstance(a, (SetValue, DictValue)) and isinstance(b, (SetValue, DictValue)):
            same = a.equals(tx, b)   # keys compared as the dict / set compares them (user __eq__ traced)
            return const(same if fn is operator.eq else not same)
        if _compares_by_identity(a, b):
            return const((fn is operator.eq) == identical(tx, a, b))
        if a.is_constant() and b.is_constant():
            return _fold(fn, a, b)
        if getattr(a, "real_object", None) and getattr(b, "real_object", None) and not _defines_eq(a):
            same = a.real_object() is b.real_object()
            return const(same if fn is operator.eq else not same)
        user = _user_dunder(tx, fn, a, b)
        if user is not None:
            return user
        if a is b:
            return const(fn is operator.eq)
        raise Unsupported(f"comparing {a.describe()} and {b.describe()}")
    if a.is_constant() and b.is_constant():
        return _fold(fn, a, b)
    user = _user_dunder(tx, fn, a, b)
    if user is not None:
        return user
    raise Unsupported(f"ordering comparison of {a.describe()} and {b.describe()}")


def _defines_eq(v) -> bool:
    t = v.python_type()
    return getattr(t, "__eq__", object.__eq__) is not object.__eq__ and t.__module__ != "builtins"


# How to make an empty instance of each exact builtin type whose ``==`` answers by type alone (its
# items never decide whether it declines): Python itself is asked whether both sides'
# ``__eq__`` return NotImplemented for the other's type, in which case ``==`` is identity
# (``d.keys() == ["a"]`` is False; a values view is equal to nothing but itself).
_EMPTY_OF = {type(make()): make for make in (
    int, float, complex, bool, str, bytes, bytearray, list, tuple, lambda: range(0), dict,
    collections.OrderedDict, collections.defaultdict, set, frozenset, lambda: {}.keys(),
    lambda: {}.items(), lambda: {}.values(), lambda: None)}


def _compares_by_identity(a, b) -> bool:
    try:
        ta, tb = a.python_type(), b.python_type()
    except Unsupported:
        return False
    if ta not in _EMPTY_OF or tb not in _EMPTY_OF:
        return ta is not tb and (ta is type(None) or tb is type(None))
    ea, eb = _EMPTY_OF[ta](), _EMPTY_OF[tb]()    # two objects, so identity never answers
    return ta.__eq__(ea, eb) is NotImplemented and tb.__eq__(eb, ea) is NotImplemented


def identical(tx, a: Value, b: Value) -> bool:
    """Python's ``is`` on two Values."""
    if a is b:
        return True
    if isinstance(a, ConstantValue) and isinstance(b, ConstantValue):
        return a.value is b.value
    ra, rb = getattr(a, "real_object", None), getattr(b, "real_object", None)
    if ra is not None and rb is not None:
        same = ra() is rb()
        _guard_identity(tx, a, b, same)
        return same
    if isinstance(a, ConstantValue) or isinstance(b, ConstantValue):
        return False  # a constant is never the same object as a symbolic value
    if type(a) is not type(b):
        return False
    return False


def _guard_identity(tx, a: Value, b: Value, same: bool) -> None:
    """``a is b`` was decided on the real objects: make later calls check it again."""
    sa, sb = a.source, b.source
    if sa is None and sb is None:
        return
    guards = tx.state.guards
    if sa is None:
        sa, sb, a, b = sb, None, b, a
    other = guards.ns.ref(b.real_object()) if sb is None else "{v1}"
    check = f"{{v}} is {other}" if same else f"{{v}} is not {other}"
    desc = f"{sa.describe()} {'is' if same else 'is not'} {sb.describe() if sb else b.describe()}"
    plan = None if not same else (("same",),) if sb is not None else (("is", b.real_object()),)
    guards.add("alias", sa, check, desc, uses=(sb,) if sb is not None else (), plan=plan)


def contains(tx, container: Value, item: Value) -> bool:
    if isinstance(container, TensorValue):
        raise Unsupported("`in` on a tensor depends on its data")
    if isinstance(container, ConstantValue):
        if isinstance(container.value, (set, frozenset, dict)):
            return key_of(item, tx) in container.value   # hashed as Python would (a user __hash__ traced)
        needle = item.as_constant()
        try:   # ``1 in 5``, ``[] in "ab"``: constants of builtin types, no user code
            return needle in container.value
        except Exception as e:   # noqa: BLE001 - the program's exception
            raise_python(type(e), *e.args)
    result = container.call_method(tx, "__contains__", [item], {})
    return bool(result.as_constant())


def unary(tx, fn, a: Value) -> Value:
    if isinstance(a, NumpyArrayValue) and fn in (operator.neg, operator.pos, operator.abs, operator.invert):
        return numpy_operator(tx, fn, a)
    if isinstance(a, TensorValue):
        return graph_call(tx, "call_function", fn, [a], {})
    result, (a,) = _symbolic(tx, fn, a)
    if result is not None:
        return result
    if a.is_constant():
        return _fold(fn, a)
    user = _user_dunder(tx, fn, a, None) if fn is operator.neg else None
    if user is not None:
        return user
    raise Unsupported(f"unary {fn.__name__} on {a.describe()}")


_UNARY = frozenset(UNARY_OPS)
_COMPARE_FNS = frozenset(COMPARE_OPS.values())


def apply_operator(tx, fn, *args: Value) -> Value:
    """A function of the ``operator`` module applied to Values (``Tracer.apply_operator``):
    how values below this layer, and ``operator.add(a, b)`` in user code, reach it."""
    if fn is operator.is_:
        return const(identical(tx, *args))
    if fn is operator.is_not:
        return const(not identical(tx, *args))
    if fn is operator.contains:
        return const(contains(tx, *args))
    if fn in _UNARY:
        return unary(tx, fn, *args)
    if fn in _COMPARE_FNS:
        return compare(tx, fn, *args)
    if fn in INPLACE_TO_BINARY:
        return inplace(tx, fn, *args)
    return binary(tx, fn, *args)
