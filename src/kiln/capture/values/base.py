"""The Value base class and the simplest values: constants and the NULL marker.

A Value is the symbolic stand-in for one Python object during tracing.  Its
``source`` (optional) says where the object lives at run time; values without a
source must be rebuilt by the glue (graph outputs, containers made in the frame)
or be constants.
"""
from __future__ import annotations

from ...exc import Unsupported

_CONSTANT_TYPES = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis), type(NotImplemented), range, slice)


class Value:
    source = None

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

    def getattr(self, tx, name):
        from .builder import wrap_real_result
        from .objects import AttributeMissing
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:
            raise AttributeMissing(f"{type(self.value).__name__} object has no attribute {name!r}") from e
        if callable(attr) and not isinstance(attr, type):
            return ConstantMethodValue(self, name, attr)
        return wrap_real_result(tx, attr, owner=self)

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
            from .exceptions import raise_python
            raise_python(type(e), *e.args)

    def length(self, tx):
        return len(self.value)

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

    def call(self, tx, args, kwargs):
        try:
            real_args = [to_python(a, tx) for a in args]
            real_kwargs = {k: to_python(v, tx) for k, v in kwargs.items()}
        except Unsupported:
            raise Unsupported(f"{self.describe()}() with arguments that are not constants")
        try:
            result = self.bound(*real_args, **real_kwargs)
        except Exception as e:
            from .exceptions import raise_python
            raise_python(type(e), *e.args)
        from .builder import wrap_real_result
        return wrap_real_result(tx, result)


def to_python(v: Value, tx=None):
    """A Value as a plain Python object when it is made only of constants."""
    from .containers import DictValue, ListValue, TupleValue
    if isinstance(v, ConstantValue):
        return v.value
    if isinstance(v, ListValue):
        return [to_python(i, tx) for i in v.items]
    if isinstance(v, TupleValue):
        return tuple(to_python(i, tx) for i in v.items)
    if isinstance(v, DictValue):
        return {k: to_python(i, tx) for k, i in v.items.items()}
    return v.as_constant()


class NullValue(Value):
    """The NULL that 3.11's calling convention pushes before a callable."""

    def describe(self):
        return "NULL"


NULL = NullValue()


def const(value) -> ConstantValue:
    return ConstantValue(value)


def is_literal(value) -> bool:
    return isinstance(value, _CONSTANT_TYPES)
