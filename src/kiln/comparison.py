"""Comparing what a compiled call did with what eager did: values, metadata, aliasing, mutation.

Kiln's promise is that a compiled call returns what eager returns, and mutates and
aliases what eager does.  The tests, ``kiln.testing`` and ``kiln.debug`` all check that
promise, each with its own strictness (bit-for-bit or within a tolerance, strides or
not, ``is_leaf`` or not); this module is the one implementation they share, so that a
rule (NaN equals NaN, an empty tensor aliases nothing, how a module is looked into) is
written once and a caller picks its strictness with :class:`Rules` instead of keeping a
copy of the walk.

Four pieces, each usable alone:

* :func:`children` / :func:`walk`: a structure as ``(path, leaf)`` pairs.  It looks
  into mappings, sequences, ``nn.Module`` (its state dict and plain attributes) and user
  objects (``__dict__`` and ``__slots__``); functions, classes, Python modules, sets and
  scalars are leaves; an object met again on the way down is a cycle, not a loop.
  ``Walk(objects=False)`` (``REPORT_WALK``) looks only into mappings, lists, tuples and
  dataclasses, for ``kiln.debug``'s reports about model outputs, where a user object is a
  value, not a structure.
* :func:`differences`: two structures side by side, returning readable differences
  (``[]`` when they agree); :func:`assert_same` raises them.
* :func:`aliasing` / :func:`aliasing_differences`: which tensor leaves share storage,
  which are views and which are the very objects passed in.
* :class:`InputWatch`: which input tensors a call changed (values or metadata) and
  whose version counter it bumped.

Only torch is imported, so every layer above may use it.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import math
import types
from collections.abc import Mapping
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

__all__ = ["Rules", "Walk", "Difference", "children", "walk", "tensor_leaves", "differences", "assert_same",
           "tensor_differences", "same_values", "Aliasing", "aliasing", "aliasing_differences", "roots_aliasing_differences",
           "InputWatch", "readable_path", "REPORT_WALK", "parts", "storage_key"]


# -- walking a structure -----------------------------------------------------------------

#: leaves compared with ``==`` (after the type): scalars, and objects that are names of
#: things rather than state (a function is the same function, not an equal one)
_ATOMS = (int, float, complex, str, bytes, bool, type(None), type, torch.dtype, torch.device,
          torch.layout, torch.memory_format, set, frozenset, slice,
          types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType,
          types.BuiltinMethodType, functools.partial, type(Ellipsis))


#: a dict's keys, values and items views: sequences in the dict's order
_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))


def readable_path(parent: str, key: Any) -> str:
    """``parent.key`` for an identifier, else ``parent[key]``: a report names a tensor the
    way a user reaches it (``output.logits``, ``grad[encoder.layer.0.weight]``)."""
    if isinstance(key, str) and key.isidentifier():
        return f"{parent}.{key}"
    return f"{parent}[{key}]"


def python_path(parent: str, key: Any, attribute: bool) -> str:
    """``parent.name`` for an attribute, ``parent[key!r]`` for an item: a path a reader can
    paste back into Python, which keeps ``'1'`` and ``1`` apart."""
    return f"{parent}.{key}" if attribute else f"{parent}[{key!r}]"


@dataclasses.dataclass(frozen=True)
class Walk:
    """How a structure is looked into.

    ``objects``: look into modules and user objects (the tests compare their state);
    without it only mappings, sequences and dataclasses are structure.
    ``readable``: paths as :func:`readable_path` writes them, else :func:`python_path`.
    """

    objects: bool = True
    readable: bool = False

    def path(self, parent: str, key: Any, attribute: bool) -> str:
        return readable_path(parent, key) if self.readable else python_path(parent, key, attribute)


_DEFAULT_WALK = Walk()
#: how reports about a model's outputs look into them: containers and dataclasses (which
#: include transformers' ``ModelOutput``), paths as a user writes them
REPORT_WALK = Walk(objects=False, readable=True)


def children(obj: Any, how: Walk = _DEFAULT_WALK) -> list[tuple[Any, Any, bool]] | None:
    """``(key, child, is_attribute)`` for a structure, ``None`` for a leaf.

    Mappings show their items and sequences (dict views too) their elements, in order; a
    deque also its ``maxlen`` and a range its start, stop and step (``range(0)`` and
    ``range(2, 2)`` are equal to ``==`` but not the same value to a program).  A module shows its state dict (parameters and buffers, by dotted name) and its public
    plain attributes (submodules are in the state dict's names); a user object all of its
    ``__dict__`` in insertion order (attribute order is observable) and its slots.  An
    iterator or other identity-compared iterable with no state of its own shows its items
    (this consumes it: it could not be compared otherwise).
    """
    if isinstance(obj, torch.Tensor) or isinstance(obj, _ATOMS):
        return None
    if isinstance(obj, Mapping):
        return [(k, v, False) for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        return [(i, v, False) for i, v in enumerate(obj)]
    if not how.objects:
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return [(f.name, getattr(obj, f.name), True) for f in dataclasses.fields(obj)]
        return None
    if isinstance(obj, _VIEWS):
        return [(i, v, False) for i, v in enumerate(obj)]
    if isinstance(obj, collections.deque):
        return [(i, v, False) for i, v in enumerate(obj)] + [("maxlen", obj.maxlen, True)]
    if isinstance(obj, range):
        return [("start", obj.start, True), ("stop", obj.stop, True), ("step", obj.step, True)]
    if isinstance(obj, torch.nn.Module):
        state = [(k, v, True) for k, v in obj.state_dict(keep_vars=True).items()]
        return state + [(k, v, True) for k, v in vars(obj).items() if not k.startswith("_")]
    attrs = getattr(obj, "__dict__", None)
    slots = [s for klass in type(obj).__mro__ for s in _slots_of(klass) if s not in ("__dict__", "__weakref__")]
    if attrs is None and not slots:
        if type(obj).__eq__ is object.__eq__ and hasattr(obj, "__iter__"):
            return [(i, v, False) for i, v in enumerate(list(obj))]
        return None
    kids = [(k, v, True) for k, v in (attrs or {}).items()]
    return kids + [(s, getattr(obj, s, _UNSET), True) for s in slots]


def _slots_of(klass: type) -> tuple:
    slots = getattr(klass, "__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)


class Difference(str):
    """One readable difference (``path: what``), which also says what ``aspect`` differs
    (``type``, ``structure``, ``shape``, ``dtype``, ``device``, ``requires_grad``,
    ``is_leaf``, ``stride``, ``value``), for callers that sort differences into kinds."""

    aspect: str

    def __new__(cls, aspect: str, text: str):
        self = super().__new__(cls, text)
        self.aspect = aspect
        return self


def parts(obj: Any, how: Walk = REPORT_WALK) -> list[tuple[Any, Any]] | None:
    """:func:`children` as ``(key, child)`` pairs (``None`` for a leaf), for walks of
    their own (``kiln.debug.accuracy`` compares against a float64 reference as it goes)."""
    kids = children(obj, how)
    return None if kids is None else [(k, v) for k, v, _ in kids]


class _Marker:
    """A stand-in leaf: an unset slot, or an object met again (a cycle)."""

    def __init__(self, text: str):
        self.text = text

    def __eq__(self, other):
        return isinstance(other, _Marker) and other.text == self.text

    def __hash__(self):
        return hash(self.text)

    def __repr__(self):
        return self.text


_UNSET = _Marker("<unset>")


def walk(obj: Any, path: str, how: Walk = _DEFAULT_WALK) -> Iterator[tuple[str, Any]]:
    """``(path, leaf)`` for every leaf of ``obj``, depth first; an object met again on the
    way down is yielded once more as a ``<cycle>`` marker instead of being entered."""
    yield from _walk(obj, path, how, set())


def _walk(obj, path, how, above):
    kids = children(obj, how)
    if kids is None:
        yield path, obj
        return
    if id(obj) in above:
        yield path, _Marker(f"<cycle {type(obj).__name__}>")
        return
    above.add(id(obj))
    for key, child, attribute in kids:
        yield from _walk(child, how.path(path, key, attribute), how, above)
    above.discard(id(obj))


def tensor_leaves(obj: Any, path: str, how: Walk = _DEFAULT_WALK) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensor leaves of :func:`walk`."""
    for p, leaf in walk(obj, path, how):
        if isinstance(leaf, torch.Tensor):
            yield p, leaf


# -- values and metadata -------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Rules:
    """How closely two structures must agree.  The defaults are the strict common ground
    (same types, structure, dtype, shape, device, requires_grad; tensor values within
    ``torch.testing.assert_close``'s default tolerance; NaN equal to NaN); each caller
    states what it asks beyond that or instead.

    ``exact``: tensor values bit for bit (``torch.equal``, or NaN-aware when ``equal_nan``).
    ``rtol``/``atol``: tolerances for tensor values (both or neither; None: by dtype).
    ``float_rtol``/``float_atol``: tolerances for Python floats (0: exactly equal).
    ``equal_nan``: NaN equals NaN, in tensors and in Python floats.
    ``requires_grad``, ``is_leaf``, ``strides``: compare these tensor facts too
    (strides only where there is more than one element: a single element has no layout).
    ``module_subclass``: an ``nn.Module`` may be an instance of a subclass of the expected
    one (``kiln.compile(module)`` returns such an instance).
    ``callables_by_name``: functions that are not the same object are equal when they have
    the same module, name and code (each run builds its own closures and lambdas).
    ``names_only``: the two runs executed separate copies of the program (the fuzz oracle
    execs its source once per run), so classes (of objects, and as values) and functions
    agree when their qualified names do, and objects with neither state nor ``==`` of their
    own when their types do.
    """

    exact: bool = False
    rtol: float | None = None
    atol: float | None = None
    float_rtol: float = 0.0
    float_atol: float = 0.0
    equal_nan: bool = True
    requires_grad: bool = True
    is_leaf: bool = False
    strides: bool = False
    module_subclass: bool = False
    callables_by_name: bool = False
    names_only: bool = False
    walk: Walk = _DEFAULT_WALK


def differences(expected: Any, actual: Any, rules: Rules = Rules(), path: str = "result") -> list[Difference]:
    """Every way ``actual`` differs from ``expected`` under ``rules``, as ``path: what`` lines.

    The two structures are walked side by side; where their shape differs (type, length,
    keys) that is reported and the walk does not go further down there.
    """
    out: list[str] = []
    _compare(expected, actual, rules, path, out, set())
    return out


def assert_same(expected: Any, actual: Any, rules: Rules = Rules(), path: str = "result") -> None:
    """:func:`differences`, raised as one ``AssertionError`` listing them all."""
    found = differences(expected, actual, rules, path)
    assert not found, "\n".join(found)


def _same_type(e, a, rules: Rules) -> bool:
    if type(e) is type(a) or rules.names_only and type(e).__qualname__ == type(a).__qualname__:
        return True
    return rules.module_subclass and isinstance(e, torch.nn.Module) and isinstance(a, type(e))


def _compare(e, a, rules: Rules, path: str, out: list, above: set) -> None:
    if not _same_type(e, a, rules):
        out.append(Difference("type", f"{path}: type {type(a).__name__}, expected {type(e).__name__} "
                                      f"({a!r} vs {e!r})"))
        return
    if isinstance(e, torch.Tensor):
        out.extend(tensor_differences(e, a, rules, path))
        return
    if isinstance(e, (np.ndarray, np.generic)) and e.dtype.kind in "biufc":
        # numpy arrays and scalars: dtype exactly, values as a tensor's
        if e.dtype != a.dtype:
            out.append(Difference("dtype", f"{path}: numpy dtype {a.dtype}, expected {e.dtype}"))
            return
        out.extend(tensor_differences(torch.from_numpy(np.array(e)), torch.from_numpy(np.array(a)), rules, path))
        return
    ek, ak = children(e, rules.walk), children(a, rules.walk)
    if ek is None or ak is None:
        if not _same_leaf(e, a, rules):
            out.append(Difference("value", f"{path}: {a!r}, expected {e!r}"))
        return
    keys_e, keys_a = [k for k, _, _ in ek], [k for k, _, _ in ak]
    if len(keys_e) != len(keys_a) or not all(_same_key(x, y) for x, y in zip(keys_e, keys_a)):
        what = f"length {len(ak)}, expected {len(ek)}" if isinstance(e, (list, tuple, collections.deque)) \
            else f"keys {keys_a}, expected {keys_e}"
        out.append(Difference("structure", f"{path}: {what}"))
        return
    if (id(e), id(a)) in above:
        return
    above.add((id(e), id(a)))
    for (key, ev, attribute), (_, av, _) in zip(ek, ak):
        _compare(ev, av, rules, rules.walk.path(path, key, attribute), out, above)
    above.discard((id(e), id(a)))


def _same_key(x, y) -> bool:
    """Mapping keys agree: tensor keys (an optimizer's state) by value, others by ``==``."""
    if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
        return isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and same_values(x, y)
    return type(x) is type(y) and x == y


def _same_leaf(e, a, rules: Rules) -> bool:
    if isinstance(e, float) and not isinstance(e, bool):
        if math.isnan(e) or math.isnan(a):
            return rules.equal_nan and math.isnan(e) and math.isnan(a)
        return e == a or math.isclose(a, e, rel_tol=rules.float_rtol, abs_tol=rules.float_atol)
    if isinstance(e, (set, frozenset)):
        return e == a and sorted(map(repr, e)) == sorted(map(repr, a))
    if e is a:
        return True
    if rules.names_only and isinstance(e, (types.FunctionType, types.MethodType, type)):
        return e.__qualname__ == a.__qualname__
    if rules.names_only and type(e).__eq__ is object.__eq__:
        return True     # an object with no state to look at, made by each copy: its type agreed
    if rules.callables_by_name and isinstance(e, (types.FunctionType, types.MethodType)):
        return (getattr(e, "__module__", None), e.__qualname__, getattr(e, "__code__", None)) == \
            (getattr(a, "__module__", None), a.__qualname__, getattr(a, "__code__", None))
    try:
        return bool(e == a)
    except Exception:  # an == that does not answer with a truth value (tensors inside): not equal
        return False


def tensor_differences(e: torch.Tensor, a: torch.Tensor, rules: Rules = Rules(),
                       path: str = "result") -> list[Difference]:
    """How tensor ``a`` differs from ``e``: metadata first, then values (only when shape and
    dtype agree, since values of different shapes say nothing more)."""
    facts = ["shape", "dtype", "device"] + ["requires_grad"] * rules.requires_grad + ["is_leaf"] * rules.is_leaf
    out = [Difference(f, f"{path}: {f} {getattr(a, f)}, expected {getattr(e, f)}")
           for f in facts if getattr(a, f) != getattr(e, f)]
    if rules.strides and e.numel() > 1 and e.stride() != a.stride():
        out.append(Difference("stride", f"{path}: stride {a.stride()}, expected {e.stride()}"))
    if e.shape != a.shape or e.dtype != a.dtype or e.device != a.device:
        return out
    if rules.exact:
        if not same_values(e, a, rules.equal_nan):
            out.append(Difference("value", f"{path}: values differ\nexpected {e}\nactual   {a}"))
        return out
    try:
        torch.testing.assert_close(a.detach(), e.detach(), rtol=rules.rtol, atol=rules.atol,
                                   equal_nan=rules.equal_nan)
    except AssertionError as err:
        out.append(Difference("value", f"{path}: {err}"))
    return out


def same_values(e: torch.Tensor, a: torch.Tensor, equal_nan: bool = True) -> bool:
    """Bit-for-bit equal values (shape and dtype included); NaN equals NaN if ``equal_nan``."""
    e, a = e.detach(), a.detach()
    if e.shape != a.shape or e.dtype != a.dtype:
        return False
    if equal_nan and (e.is_floating_point() or e.is_complex()):
        return bool(((e == a) | (e.isnan() & a.isnan())).all())
    return torch.equal(e, a)


# -- aliasing ------------------------------------------------------------------------------

def storage_key(t: torch.Tensor, empty_tensors_alias: bool = False):
    """What two tensors that share memory have in common: the device and data pointer of
    their storage.  An empty storage aliases nothing; nor, unless ``empty_tensors_alias``,
    does a tensor with no elements (nothing can be written through it)."""
    try:
        storage = t.untyped_storage()
    except Exception:  # tensors without storage (some subclasses): treat as unaliased
        return None
    if storage.nbytes() == 0 or (t.numel() == 0 and not empty_tensors_alias):
        return None
    return (t.device, storage.data_ptr())


@dataclasses.dataclass
class Aliasing:
    """The aliasing facts of the tensor leaves of some roots, in walk order.

    ``paths[i]``: the leaf's path; ``storage[i]``: its :func:`storage_key`;
    ``views[i]``: whether it is a view; ``same_as[i]``: the path of the first leaf that is
    the very same object; ``passed_in[i]``: the index of the input tensor (recorded before
    the call) that it *is*, or None; ``roots[i]``: the index of the root it is under.
    """

    paths: list[str]
    storage: list
    views: list[bool]
    same_as: list[str]
    passed_in: list[int | None]
    roots: list[int]

    def shared(self, among: Callable[[str], bool] = lambda p: True) -> list[tuple[str, str]]:
        """Pairs of leaf paths (both passing ``among``, in walk order) whose storage is the same."""
        pairs = []
        for i, (p, k) in enumerate(zip(self.paths, self.storage)):
            for q, m in zip(self.paths[i + 1:], self.storage[i + 1:]):
                if k is not None and k == m and among(p) and among(q):
                    pairs.append((p, q))
        return pairs

    def sharing(self, path: str, with_: Callable[[str], bool]) -> tuple[str, ...]:
        """The paths passing ``with_`` whose storage ``path``'s leaf shares."""
        key = self.storage[self.paths.index(path)]
        return tuple(q for q, m in zip(self.paths, self.storage) if key is not None and m == key and with_(q))


def aliasing(roots: Sequence[Any], names: Sequence[str], before: Sequence[torch.Tensor] = (),
             how: Walk = _DEFAULT_WALK, empty_tensors_alias: bool = False) -> Aliasing:
    """:class:`Aliasing` of the tensor leaves of ``roots`` (paths start with ``names``);
    ``before``: the input tensor objects as they were before the call."""
    index = {id(t): i for i, t in enumerate(before)}
    leaves = [(p, t, i) for i, (root, name) in enumerate(zip(roots, names)) for p, t in tensor_leaves(root, name, how)]
    first: dict[int, str] = {}
    for p, t, _ in leaves:
        first.setdefault(id(t), p)
    return Aliasing([p for p, _, _ in leaves], [storage_key(t, empty_tensors_alias) for _, t, _ in leaves],
                    [t._is_view() for _, t, _ in leaves], [first[id(t)] for _, t, _ in leaves],
                    [index.get(id(t)) for _, t, _ in leaves], [i for _, _, i in leaves])


def aliasing_differences(eager: Aliasing, compiled: Aliasing, *, storage: bool = True, views: bool = True,
                         identity: bool = True) -> list[str]:
    """How the aliasing of a compiled call differs from eager's: storage shared between
    leaves, which leaves are views, and which leaves are the same object as another leaf
    or as an input passed in."""
    out: list[str] = []
    if eager.paths != compiled.paths:
        return [f"the tensor leaves differ: eager {eager.paths}, compiled {compiled.paths}"]
    if storage:
        e, c = set(eager.shared()), set(compiled.shared())
        out += [f"{p} and {q} share storage in eager but not when compiled" for p, q in sorted(e - c)]
        out += [f"{p} and {q} share storage when compiled but not in eager" for p, q in sorted(c - e)]
    for i, p in enumerate(eager.paths):
        if views and eager.views[i] != compiled.views[i]:
            out.append(f"{p} is {'' if eager.views[i] else 'not '}a view in eager but "
                       f"{'is' if compiled.views[i] else 'is not'} when compiled")
        if identity and (eager.same_as[i], eager.passed_in[i]) != (compiled.same_as[i], compiled.passed_in[i]):
            out.append(f"{p} is the object {_identity(eager, i)} in eager but {_identity(compiled, i)} when compiled")
    return out


def roots_aliasing_differences(names: Sequence[str], eager: Sequence[Any], compiled: Sequence[Any],
                               eager_before: Sequence[torch.Tensor] = (), compiled_before: Sequence[torch.Tensor] = (),
                               **aspects: bool) -> list[str]:
    """:func:`aliasing_differences` of the same roots (``names``: e.g. inputs, result) after
    an eager and a compiled call; ``*_before``: each call's input tensors before it ran."""
    return aliasing_differences(aliasing(eager, names, eager_before), aliasing(compiled, names, compiled_before),
                                **aspects)


def _identity(a: Aliasing, i: int) -> str:
    what = [] if a.same_as[i] == a.paths[i] else [a.same_as[i]]
    what += [] if a.passed_in[i] is None else [f"input tensor #{a.passed_in[i]}"]
    return " = ".join(what) or "of its own"


# -- mutation ------------------------------------------------------------------------------

class InputWatch:
    """Records the input tensors before a call, to say afterwards which the call changed.

    An input counts as changed if its values, sizes, strides or storage offset changed
    (NaN equals NaN); separately, whether its version counter moved, which is what
    autograd uses to detect in-place changes.
    """

    def __init__(self, inputs: Any, path: str = "input", how: Walk = _DEFAULT_WALK):
        self.before = []
        with torch.no_grad():
            for p, t in tensor_leaves(inputs, path, how):
                self.before.append((p, t, t._version, t.detach().clone(), t.shape, t.stride(), t.storage_offset()))

    @property
    def tensors(self) -> list[torch.Tensor]:
        """The input tensor objects, in walk order (for :func:`aliasing`'s ``before``)."""
        return [t for _, t, *_ in self.before]

    def changes(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``(changed, bumped)``: paths of the inputs changed, of those whose counter moved."""
        changed, bumped = [], []
        for path, t, version, values, shape, stride, offset in self.before:
            if t._version != version:
                bumped.append(path)
            if (t.shape, t.stride(), t.storage_offset()) != (shape, stride, offset) or not same_values(values, t):
                changed.append(path)
        return tuple(changed), tuple(bumped)
