"""The Value protocol, the tracer interface values call back into, and the values
everything else builds on: constants, NULL and raised exceptions.

A Value is the symbolic stand-in for one Python object during tracing.  Its
``source`` (optional) says where the object lives at run time; values without a
source must be rebuilt by the glue (graph outputs, containers made in the frame)
or be constants.
"""
from __future__ import annotations

import ctypes
import functools
import itertools
import types
from typing import Callable, Protocol

from ...exc import Unsupported
from ..basics import GraphBuilder, GuardSet, Namespace, ShapePolicy, SideEffects, Source


class CaptureStateView(Protocol):
    """What values read of the capture in progress (``tx.state``), declared: the one
    ``capture.semantics.state.CaptureState`` every tracer of a capture shares implements it, and
    ``tests/internals/test_state_view.py`` checks that it does."""

    fn: Callable                     # the function being compiled (closure sources name it)
    builder: GraphBuilder          # the fx graph being recorded
    guards: GuardSet               # what the entry checks before it runs
    side_effects: SideEffects      # Python-level writes the glue replays after the graph
    ns: Namespace                  # objects generated code refers to by name
    shapes: ShapePolicy            # which sizes and ints are symbolic (``dynamic=``)
    functional_backend: bool         # the backend may functionalize (backends/contract.py)
    keepalive: list                  # real objects the capture's ids refer to
    replayed: dict                   # id(instance) -> ReplayedObjectValue
    autocast_stack: list             # autocast regions entered and not yet left, innermost last
    probed_iterators: set            # ids of carried iterators whose remaining items were read
    fake_values: dict                # id(fake tensor) -> the Value that holds it
    subclass_dispatch_off: int       # >0: torch-function overrides of subclass tensors are off

    def known_value(self, obj) -> "Value | None":
        """The Value this capture already made for the real object ``obj``."""

    def remember(self, obj, value: "Value") -> "Value":
        """Record ``value`` as the one Value for ``obj`` in this capture."""

    def cell_for(self, real_cell, source: Source):
        """The one CellValue of a real closure cell."""

    def real_value(self, source: Source):
        """``source`` evaluated against the real arguments (rare lazy reads)."""

    def special_functions(self) -> dict:
        """Functions with a fixed meaning while tracing (torch's, the higher-order
        operators'), merged above the values layer so values need not import hops."""

    def set_grad_mode(self, mode: bool) -> None:
        """Switch grad mode at trace time and in the graph."""


class Tracer(Protocol):
    """What a value may ask of the tracer that evaluates it (the ``tx`` argument).

    Values sit below the object builder, the operators and the interpreter; they reach
    them only through this interface, which ``interpreter.Tracer`` implements.  So a
    value kind never imports the code that creates values of other kinds.
    """

    state: CaptureStateView    # the capture in progress (capture.semantics.state.CaptureState)

    def wrap(self, obj, source) -> "Value":
        """The Value for a real object read from ``source`` (None: a trusted constant),
        with its guard installed (``builder.wrap``)."""

    def wrap_fake_result(self, node, result) -> "Value":
        """The Value for what a graph op returned on fake tensors."""

    def wrap_traced_object(self, real) -> "Value":
        """A structure holding fakes (from a replayed constructor) mapped back to Values."""

    def lower_to_real(self, value: "Value") -> object:
        """The real object, fake tensor or stand-in a Value is when stored into an object
        built on fakes (a dataclass made in the frame): ``wrap_traced_object`` maps it back."""

    def construct(self, cls_value, args: list, kwargs: dict) -> "Value":
        """``cls(*args, **kwargs)`` for a class read while tracing."""

    def apply_operator(self, fn, *args: "Value") -> "Value":
        """A function of the ``operator`` module (``operator.add``, ``operator.eq``,
        ``operator.is_``, ``operator.contains``, ``operator.iadd``, ``operator.neg``...)
        applied to Values with Python's semantics."""

    def inline_call(self, fn_value, code, fn_globals, bound: dict, closure: list) -> "Value":
        """Trace ``code`` as a call, in a child tracer that shares this capture."""

    def call_repeated_layer(self, module_value, args: list, kwargs: dict) -> "Value | None":
        """A call of a repeated layer as one call of a body traced once for all the layers
        like it (``hops/layers.py``); None: the caller inlines the call as usual."""

    def trace_subgraph(self, fn_value, args: list, op: str, prelift=()) -> object:
        """Trace ``fn_value(*args)`` into a separate fx graph in a nested scope (the body
        of a higher-order operator): free tensors become inputs, outer state is read-only.
        Returns a ``hops.subgraph.Subgraph``."""


class AttributeMissing(Unsupported):
    """Lookup failed the way Python would raise AttributeError (hasattr relies on it)."""


def type_lookup(cls: type, name: str):
    """(owner class, raw attribute) that Python's lookup of ``name`` on an instance of
    ``cls`` finds on the type, through ``cls.__mro__``, without running descriptors;
    (None, None) when the type has no such attribute.

    This is the question to ask about instances, not ``hasattr(cls, name)``: that one
    asks the class object, which also finds what its metaclass defines (every class has
    ``__call__``, ``mro`` and ``__name__`` through ``type``)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass, klass.__dict__[name]
    return None, None


def instances_callable(cls: type) -> bool:
    """``callable(x)`` for any ``x`` of type ``cls``: CPython asks the type's call slot,
    which a class has exactly when its MRO defines ``__call__``."""
    return type_lookup(cls, "__call__")[1] is not None



def bound_attribute_type(cls: type, name: str, sample) -> type:
    """The type of ``obj.name`` for an ``obj`` of type ``cls`` whose attribute is found on
    the type (a method): what binding the raw attribute makes, asked of Python by
    binding it to ``sample``, a real instance of ``cls`` or of a base that defines
    ``name`` (a Python function binds to ``method``, a C method descriptor to
    ``builtin_function_or_method``, a slot wrapper to ``method-wrapper``, whatever the
    instance).  Plain class data is its own type."""
    raw = type_lookup(cls, name)[1]
    if isinstance(raw, (types.FunctionType, classmethod)):
        return types.MethodType
    if isinstance(raw, staticmethod):
        return type(raw.__func__)
    if not hasattr(type(raw), "__get__"):
        return type(raw)
    return type(raw.__get__(sample, type(sample)))


def _read_tp_name(cls: type):
    """``cls``'s ``tp_name`` read from the type object (the field after the variable-size
    object header), or None where that layout does not hold."""
    raw = ctypes.c_char_p.from_address(id(cls) + 3 * ctypes.sizeof(ctypes.c_ssize_t)).value
    return raw.decode() if raw else None


# Read only where the layout is checked on types whose tp_name is known (a build with
# another object header, e.g. free-threaded, fails the check and uses __name__).
_TP_NAME_READABLE = all(_read_tp_name(t) == name for t, name in (
    (int, "int"), (functools.partial, "functools.partial"), (types.SimpleNamespace, "types.SimpleNamespace")))


def type_name(cls: type) -> str:
    """The name CPython's own error messages give a type: its ``tp_name``.  Nothing in
    Python spells it: a class statement's is its ``__name__``, a builtin's the bare
    name, other C types' carry a module (``'torch.dtype' object is not iterable``,
    ``'functools.partial'``) or not (``'Tensor'``), as their authors wrote it; no rule
    on ``__module__`` / flags recovers it for every type (C heap types differ), so it
    is read from the type object, after checking that layout (``_TP_NAME_READABLE``)."""
    if not isinstance(cls, type):
        cls = type(cls)
    if _TP_NAME_READABLE:
        return _read_tp_name(cls) or cls.__name__
    return cls.__name__


def no_attribute(cls: type, name: str) -> "AttributeMissing":
    """The AttributeError Python raises for a missing attribute of an instance of ``cls``,
    word for word (the traced program may read its message)."""
    return AttributeMissing(f"'{type_name(cls)}' object has no attribute '{name}'")


def checked_len(n) -> int:
    """What ``len()`` / ``bool()`` make of a traced ``__len__``'s (constant) result, with
    CPython's errors for one that is no int or is negative."""
    if not isinstance(n, int):
        raise_python(TypeError, f"'{type_name(type(n))}' object cannot be interpreted as an integer")
    if n < 0:
        raise_python(ValueError, "__len__() should return >= 0")
    return int(n)


def checked_bool(r) -> bool:
    """What ``bool()`` makes of a traced ``__bool__``'s (constant) result: a bool, else
    CPython's TypeError."""
    if type(r) is not bool:
        raise_python(TypeError, f"__bool__ should return bool, returned {type_name(type(r))}")
    return r


def check_iterable(v: "Value") -> None:
    """Raise in the traced program the TypeError ``iter(v)`` raises when ``v``'s type
    cannot be iterated: neither ``__iter__`` nor ``__getitem__`` on its MRO, or
    ``__iter__ = None``.  CPython asks only the type (no user code runs, nothing
    changes), so Kiln asks the same type.  For the callers whose question is exactly
    ``iter()``'s, with its message (``list``, ``tuple``, ``set``, ``dict``, ``sorted``,
    ``sum``, ``min``, ``max``, ``for``, ``enumerate``, ``zip``...); ``a, b = v`` and
    ``[*v]`` word their TypeError differently and break instead (``unpack``).
    A value whose type Kiln does not know is left to its ``unpack``."""
    try:
        cls = v.python_type()
    except Unsupported:
        return
    owner, raw = type_lookup(cls, "__iter__")
    if owner is not None and raw is not None:
        return
    if owner is None and type_lookup(cls, "__getitem__")[0] is not None:
        return   # the old sequence protocol: v[0], v[1]... until IndexError
    raise_python(TypeError, f"'{type_name(cls)}' object is not iterable")


# what a builtin type's dict holds for its methods (bound when read from an instance)
_C_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType, types.ClassMethodDescriptorType,
              types.BuiltinFunctionType, types.FunctionType, staticmethod, classmethod)


def builtin_instance_attr(tx, value: "Value", name: str):
    """Python's lookup of ``name`` on a value that stands for an instance of a builtin
    type without an instance dict (a list, a tuple, a dict view...): every attribute
    lives on the type, so the type answers.  Returns None for a method (the caller
    binds it), the Value for plain class data (``list.__hash__`` is None), and raises
    AttributeMissing, as Python raises AttributeError, when the type has no such name.
    A descriptor that computes its value per instance is refused: Kiln does not know it.
    Valid while the type is: every value read from outside is guarded by type."""
    cls = value.python_type()
    raw = type_lookup(cls, name)[1]
    if raw is None:
        raise no_attribute(cls, name)
    if name == "__class__":
        return tx.wrap(cls, None)
    if isinstance(raw, _C_METHODS):
        return None
    if not hasattr(type(raw), "__get__"):
        return tx.wrap(raw, None)
    raise Unsupported(f"attribute {name!r} of a {cls.__name__} object (a {type(raw).__name__} descriptor)")


_CONSTANT_TYPES = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis), type(NotImplemented), range, slice)


_SERIALS = itertools.count(1)


def new_serial() -> int:
    """A number larger than that of every Value made so far (scopes compare against it)."""
    return next(_SERIALS)


class Value:
    source = None

    def __new__(klass, *args, **kwargs):
        # a creation serial: a higher-order operator body may change only values it made
        self = object.__new__(klass)
        self._serial = next(_SERIALS)
        return self

    # -- identity and type --------------------------------------------------------
    def python_type(self) -> type:
        raise Unsupported(f"Kiln cannot tell the Python type of {self!r}")

    def is_constant(self) -> bool:
        return False

    def as_constant(self):
        raise Unsupported(f"{self.describe()} is not a Python constant at trace time")

    def describe(self) -> str:
        if self.source is not None:
            return f"{type(self).__name__}({self.source.describe()})"
        return type(self).__name__

    def __repr__(self):
        return self.describe()

    def short_repr(self) -> str:
        """How this value reads inside another value's description (an exception's args)."""
        return self.describe()

    # -- protocol used by the handlers --------------------------------------------
    def getattr(self, tx, name: str) -> "Value":
        raise Unsupported(f"attribute {name!r} of {self.describe()} is not supported")

    def setattr(self, tx, name: str, value: "Value") -> None:
        raise Unsupported(f"setting attribute {name!r} on {self.describe()} is not supported")

    def delattr(self, tx, name: str) -> None:
        raise Unsupported(f"deleting attribute {name!r} of {self.describe()} is not supported")

    def call(self, tx, args: list, kwargs: dict) -> "Value":
        raise Unsupported(f"calling {self.describe()} is not supported")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> "Value":
        return self.getattr(tx, name).call(tx, args, kwargs)

    def unpack(self, tx) -> list:
        """The items of an iterable, for unrolled loops and unpacking."""
        raise Unsupported(f"iterating over {self.describe()} is not supported")

    def truth(self, tx) -> bool:
        raise Unsupported(f"the truth value of {self.describe()} is not known at trace time")

    def getitem(self, tx, key: "Value") -> "Value":
        raise Unsupported(f"indexing {self.describe()} is not supported")

    def setitem(self, tx, key: "Value", value: "Value") -> None:
        raise Unsupported(f"item assignment on {self.describe()} is not supported")

    def delitem(self, tx, key: "Value") -> None:
        raise Unsupported(f"item deletion on {self.describe()} is not supported")

    def length(self, tx) -> int:
        return len(self.unpack(tx))

    def reconstruct(self, cg) -> str:
        """A Python expression that rebuilds this value in the glue code."""
        if self.source is not None:
            return cg.source_expr(self.source)
        real = getattr(self, "real_object", None)
        if real is not None:
            return cg.ref(real())
        raise Unsupported(f"Kiln cannot rebuild {self.describe()} after the graph")

    def contents(self) -> list:
        """Values held by this one (for walking outputs and side effects)."""
        return []

    def python_value(self, tx=None):
        """The plain Python object this Value stands for when it is made only of
        constants (containers rebuild theirs); Unsupported otherwise."""
        return self.as_constant()


class ItemsValue(Value):
    """A Value whose contents are a list of item Values (``self.items``): sequences made
    or read in the frame, and module containers built in it, unpack, count and test
    truth the same way."""

    def unpack(self, tx):
        return list(self.items)

    def length(self, tx):
        return len(self.items)

    def truth(self, tx):
        return bool(self.items)

    def contents(self):
        return list(self.items)


class BoundContainerMethod(Value):
    """``obj.name`` for a method of a builtin container's type (list, dict, set, ...),
    before it is called: the call goes to ``obj.call_method``, which has the rules."""

    def __init__(self, obj: Value, name: str):
        self.obj, self.name = obj, name

    def describe(self):
        return f"{self.obj.python_type().__name__}.{self.name}"

    def call(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, args, kwargs)

    def contents(self):
        return [self.obj]

    def reconstruct(self, cg):
        # on the stack at a graph break (``s.pop`` loaded, not yet called): the method of
        # the object itself, which the glue rebuilds or reads from where it came from
        return f"{cg.expr(self.obj)}.{self.name}"


class ConstantValue(Value):
    """An immutable Python value known at trace time (guarded if it has a source).

    Guards are lazy: a constant read from outside the frame carries the guard to
    install, and installs it the first time anything looks at ``value``.  A constant
    that is only passed along (into a call that runs as Python at a graph break, into
    a continuation, back out as a return value) is rebuilt from its source and never
    specialises the entry; so BigBird's per-layer ``self.seed`` or a loop index that
    flows into a continuation does not cause a recompile per value.
    """

    def __init__(self, value, source=None, pending_guard=None, rebuild=None):
        self._value = value
        self.source = source
        self._pending_guard = pending_guard
        self._rebuild = rebuild     # for derived lazy values: how the glue recomputes it

    def is_lazy(self) -> bool:
        """Not specialised yet: no guard installed, rebuilt from where it came from."""
        return self._pending_guard is not None and (self.source is not None or self._rebuild is not None)

    def peek(self):
        """The value, for deciding whether laziness applies (installs nothing)."""
        return self._value

    @property
    def value(self):
        if self._pending_guard is not None:
            install, self._pending_guard = self._pending_guard, None
            install()
        return self._value

    @value.setter
    def value(self, new):
        self._value = new
        self._pending_guard = None

    def python_type(self):
        return type(self.value)

    def is_constant(self):
        return True

    def as_constant(self):
        return self.value

    def describe(self):
        return f"Constant({self._value!r})"

    def short_repr(self):
        return repr(self._value)

    def getattr(self, tx, name):
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:
            raise AttributeMissing(str(e)) from None   # Python's own message
        if callable(attr) and not isinstance(attr, type):
            return ConstantMethodValue(self, name, attr)
        return tx.wrap(attr, None)

    def unpack(self, tx):
        v = self.value
        if isinstance(v, (str, bytes, tuple, range, frozenset)):
            return [const(x) for x in v]
        return super().unpack(tx)

    def truth(self, tx):
        return bool(self.value)

    def getitem(self, tx, key):
        k = key.as_constant()
        try:
            return const(self.value[k])
        except Exception as e:
            raise_python(type(e), *e.args)

    def length(self, tx):
        try:
            return len(self.value)
        except TypeError as e:   # len(3): a builtin type's answer, the program's exception
            raise_python(TypeError, *e.args)

    def reconstruct(self, cg):
        if self._pending_guard is not None:
            if self.source is not None:
                return cg.source_expr(self.source)   # passed along untouched: stays unspecialised
            if self._rebuild is not None:
                return self._rebuild(cg)
        return cg.constant_expr(self.value)


class ConstantMethodValue(Value):
    """A method of a constant (``"{}".format``, ``dtype.is_floating_point``): folded
    when every argument is a constant, since these receivers are immutable."""

    def __init__(self, owner: ConstantValue, name: str, bound):
        self.owner, self.name, self.bound = owner, name, bound

    def describe(self):
        return f"{type(self.owner.value).__name__}.{self.name}"

    def contents(self):
        return [self.owner]

    def reconstruct(self, cg):
        return f"{cg.expr(self.owner)}.{self.name}"     # the method of the constant, as at a break

    def call(self, tx, args, kwargs):
        try:
            real_args = [to_python(a, tx) for a in args]
            real_kwargs = {k: to_python(v, tx) for k, v in kwargs.items()}
        except Unsupported:
            if not (self.name == "join" and isinstance(self.owner.value, (str, bytes)) and len(args) == 1
                    and not kwargs):
                raise Unsupported(f"{self.describe()}() with arguments that are not constants")
            # ``sep.join(iterable)`` takes any iterable (a generator, a map, a dict view):
            # its items are taken as ``join`` takes them, and must be constants themselves
            try:
                real_args = [[to_python(i, tx) for i in args[0].unpack(tx)]]
            except Unsupported:
                raise Unsupported(f"{self.describe()}() of items that are not constants") from None
            real_kwargs = {}
        try:
            result = self.bound(*real_args, **real_kwargs)
        except Exception as e:
            raise_python(type(e), *e.args)
        return tx.wrap(result, None)


def to_python(v: Value, tx=None):
    """A Value as a plain Python object when it is made only of constants."""
    return v.python_value(tx)


class NullValue(Value):
    """The NULL that 3.11's calling convention pushes before a callable."""

    def describe(self):
        return "NULL"


NULL = NullValue()


def const(value) -> ConstantValue:
    return ConstantValue(value)


def is_literal(value) -> bool:
    return isinstance(value, _CONSTANT_TYPES)


class TracedException(Exception):
    """An exception raised inside traced code: Python-level control transfer to the
    handler that the code object's exception table names (``Tracer.step``).

    It carries the exception's class and argument Values.  The ExceptionValue that an
    ``except`` block sees (``exceptions.py``) is made when the tracer first hands the
    exception to a handler, or is the one the traced code raised.
    """

    def __init__(self, cls: type, arg_values: list, value: Value | None = None):
        self.cls = cls
        self.arg_values = list(arg_values)
        self.value = value
        super().__init__(self.describe())

    def describe(self) -> str:
        if self.value is not None:
            return self.value.describe()
        shown = ", ".join(a.short_repr() for a in self.arg_values)
        return f"{self.cls.__name__}({shown})"


def raise_python(cls: type, *messages) -> None:
    """Raise ``cls(*messages)`` as if the traced code had raised it."""
    raise TracedException(cls, [const(m) for m in messages])


class _SortSlot:
    """One item of a sort over constant keys, ordered by its key alone."""
    __slots__ = ("key", "item")

    def __init__(self, key, item):
        self.key, self.item = key, item

    def __lt__(self, other):
        return self.key < other.key


def sort_by_keys(items: list, keys: list, reverse: bool) -> None:
    """``items.sort()`` by the constant ``keys`` (one per item), run by ``list.sort``
    itself: the same comparisons in the same order, so an ordering Python refuses
    (``1 < "a"``) raises its TypeError in the traced program and leaves ``items`` in the
    order CPython's sort leaves a list it gives up on.  The keys are constants of
    builtin types: comparing them runs no user code."""
    slots = [_SortSlot(k, i) for k, i in zip(keys, items)]
    try:
        slots.sort(reverse=reverse)
    except Exception as e:   # noqa: BLE001 - the program's exception, raised as the program's
        items[:] = [s.item for s in slots]
        raise_python(type(e), *e.args)
    items[:] = [s.item for s in slots]
