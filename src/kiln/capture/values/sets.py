"""Sets and frozensets, with the iteration order eager's sets have.

A set iterates in its hash table's slot order, which follows from its items' hashes
*and* its history (the order of inserts, removals that leave dummy slots, resizes,
``pop``'s finger).  So every ``SetValue`` carries a ``shadow``: a real ``set`` /
``frozenset`` of its items' keys (``keys.key_of``) on which every operation the program
performs is replayed with Python's own methods, on the same kinds of operands (a set
merged as a set, a list added item by item).  Its slot order is eager's order exactly
when the keys hash at run time as they hash now:

* **Stable keys** (constants: numbers, strings, enum members, tuples and frozensets of
  them; user objects whose ``__hash__`` is traced): Kiln runs in the process the
  program runs in, so their hashes (string hashing included, randomised per process)
  are the ones eager's set sees.  Iteration, ``pop``, ``repr`` and every result built
  from the items follow the shadow.
* **Identity keys** (tensors and objects hashed by ``id``): the order follows the ids
  of run time's objects, which the trace does not have.  Membership, ``len`` and the set
  algebra are exact; anything that observes the order breaks, naming why.
* **Sets read from outside the frame** are guarded by type and by their iteration
  order; their own order is then known, but what they would do after a change (or
  what a set computed from one holds in which order) depends on their table's history,
  which no guard sees: those orders are unknown.

A set that escapes must have eager's very table (a caller's later inserts and pops
depend on it, dummy slots left by removals included).  A set of constants carries a
``recipe``, the operations that made it, which the glue replays
(``runtime.objects.replay_set``); a set made by inserts alone is a literal making the
same inserts; any other is rebuilt only when a set made now by inserting its keys has
the very same table (compared slot by slot), else it does not escape (a break).
"""
from __future__ import annotations

import ctypes
import math

from ...exc import Unsupported
from ...runtime import replay_set
from ..basics import BINARY_OPS, COMPARE_OPS
from .base import BoundContainerMethod, ConstantValue, Value, builtin_instance_attr, const, raise_python, type_name
from .keys import TracedKey, key_of, set_items

_METHODS_MUTATING = frozenset({"add", "discard", "remove", "pop", "clear", "update", "intersection_update",
                               "difference_update", "symmetric_difference_update"})
_METHODS_NEW = frozenset({"union", "intersection", "difference", "symmetric_difference", "copy"})
_METHODS_ANSWER = frozenset({"issubset", "issuperset", "isdisjoint"})
OPERATOR_METHODS = {"or_": "__or__", "and_": "__and__", "sub": "__sub__", "xor": "__xor__"}


def _stable(v: Value, key) -> bool:
    """Whether ``key`` (for Value ``v``) hashes at run time as it hashes now."""
    if isinstance(key, TracedKey):
        return True
    if isinstance(v, ConstantValue):
        return _stable_constant(key)
    items = getattr(v, "items", None)
    if isinstance(key, tuple) and isinstance(items, list):
        return all(_stable(i, k) for i, k in zip(items, key))
    if isinstance(v, SetValue) and v.frozen:
        return all(_stable(i, k) for k, i in v.items.items())
    return False


def _stable_constant(key) -> bool:
    if isinstance(key, float) and math.isnan(key):
        return False          # NaN hashes by identity (3.10+)
    if isinstance(key, (tuple, frozenset)):
        return all(_stable_constant(k) for k in key)
    return True               # immutable and guarded by value or identity


def _identity_reason(v: Value, key) -> str | None:
    if _stable(v, key):
        return None
    return f"iterating a set holding {v.describe()}: its order follows run-time ids (hash by identity)"


class SetValue(Value):
    """A set or frozenset: ``items`` maps each key to its Value (in insertion order),
    ``shadow`` is the real set of the keys that eager's set is a replica of, and
    ``recipe`` (for sets of constants) the operations that made it, which the glue
    replays to rebuild it (``runtime.objects.replay_set``)."""

    applied = None      # a set passed in that the frame changed: what it did, in order (``_note_applied``)

    def __init__(self, items: dict, source=None, frozen=False):
        # made by inserting these items in this order (a literal, set(list), set_items)
        self.items = dict(items)
        self.source = source
        self.frozen = frozen
        shadow = set()
        for k in self.items:
            shadow.add(k)
        self.shadow = frozenset(shadow) if frozen else shadow
        self.plain = True           # the table is what inserting ``items`` in order makes
        self.unknown = None         # why the order is unknown (None: it is the shadow's)
        for k, v in self.items.items():
            self.unknown = self.unknown or _identity_reason(v, k)
        self.borrowed = False       # read from outside: ``items`` is in its order, the shadow a copy
        constant = all(isinstance(v, ConstantValue) for v in self.items.values())
        self._base = ("new", frozen, tuple(self.items)) if constant else None
        self._steps: list = []

    # -- made by Python's own operations ---------------------------------------------------
    @classmethod
    def from_real(cls, result, values: dict, unknown, base) -> "SetValue":
        """The set a real operation returned on shadows: its keys' Values from ``values``
        (id(key) -> Value), in its own slot order; ``base`` the operation as a recipe."""
        v = cls.__new__(cls)
        v.items = {k: values[id(k)] for k in result}
        v.source, v.frozen, v.shadow = None, isinstance(result, frozenset), result
        v.plain, v.unknown, v.borrowed = False, unknown, False
        v._base, v._steps = base, []
        return v

    @property
    def recipe(self):
        """``(base, steps)`` replaying this set's history, or None (not all constants)."""
        return None if self._base is None else (self._base, tuple(self._steps))

    def _record(self, name: str, args: list, values: dict | None = None) -> None:
        if self._base is None:
            return
        recorded = [recipe_arg(a, values) for a in args]
        if any(a is None for a in recorded):
            self._base = None
        else:
            self._steps.append((name, tuple(recorded)))

    # -- protocol ---------------------------------------------------------------------------
    def python_type(self):
        return frozenset if self.frozen else set

    def describe(self):
        return f"{self.python_type().__name__}({list(self.items)!r})"

    def contents(self):
        return list(self.items.values())

    def ordered(self, why: str = "iterating") -> list:
        """The items in eager's iteration order, or Unsupported when it is not known."""
        if self.unknown is not None:
            raise Unsupported(self.unknown if why == "iterating" else f"{why}: {self.unknown}")
        if self.borrowed:
            return list(self.items.values())     # read in the real set's order (guarded)
        return [self.items[k] for k in self.shadow]

    def unpack(self, tx):
        return self.ordered()

    def length(self, tx):
        return len(self.items)

    def truth(self, tx):
        return bool(self.items)

    def is_constant(self):
        return all(isinstance(v, ConstantValue) for v in self.items.values())

    def as_constant(self):
        if not self.is_constant():
            raise Unsupported(f"{self.describe()} is not a Python constant at trace time")
        if self.borrowed:
            return self.python_type()(self.items)
        self.ordered("a set used as a constant")
        if self.recipe is not None:
            inputs: list = []
            recipe = _bind_inputs(self.recipe, inputs)
            return replay_set(recipe, [v.value if isinstance(v, ConstantValue) else v.real_set for v in inputs])
        return self.python_type()(self._rebuild_keys("a set used as a constant"))

    def python_value(self, tx=None):
        return self.as_constant()

    def getattr(self, tx, name):
        found = builtin_instance_attr(tx, self, name)
        if found is None:
            return BoundContainerMethod(self, name)
        return found

    def equals(self, tx, other) -> bool:
        """``self == other`` as set's ``==`` (a set equals a frozenset of the same items)."""
        return isinstance(other, SetValue) and self.shadow == other.shadow

    # -- methods ----------------------------------------------------------------------------
    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            raise_python(TypeError, f"{self.python_type().__name__}.{name}() takes no keyword arguments")
        if name == "__len__":
            return const(len(self.items))
        if name == "__contains__":
            return const(key_of(args[0], tx) in self.shadow)
        if name == "__init__" and not self.frozen:
            tx.state.side_effects.mutated(self)
            fresh = SetValue(set_items(tx, [v for a in args for v in a.unpack(tx)]))
            if self.source is not None:    # set.__init__ on a set: clear, then add each item
                self._note_applied("clear", [])
                self._note_applied("update", [list(fresh.items.values())])
            for attr in ("items", "shadow", "plain", "unknown", "_base", "_steps"):
                setattr(self, attr, getattr(fresh, attr))
            self.borrowed = False
            return const(None)
        if name in _METHODS_MUTATING and not self.frozen:
            return self._mutate(tx, name, args)
        if name in _METHODS_NEW or name in _METHODS_ANSWER or name in OPERATOR_METHODS.values():
            return apply_real(tx, self, name, args)
        raise Unsupported(f"{self.python_type().__name__}.{name} is not supported")

    def insert(self, tx, v: Value) -> None:
        """``set.add(v)`` on the set being built (``SET_ADD``) or changed."""
        k = key_of(v, tx)
        self._record("add", [v])
        if k not in self.shadow:
            self.shadow.add(k)
            self.items[k] = v
            self.unknown = self.unknown or _identity_reason(v, k)

    def update_from(self, tx, other: Value) -> None:
        """``set.update(other)`` on the set being built (``SET_UPDATE``) or changed."""
        self._mutate(tx, "update", [other], record=False)

    def _mutate(self, tx, name, args, record=True):
        if record:
            tx.state.side_effects.mutated(self)
        if self.source is not None and name in ("pop", "intersection_update", "symmetric_difference_update"):
            raise Unsupported(f"set.{name}() on a set passed in: " + (
                "which item it removes depends on the set's hidden search position, not only on its items"
                if name == "pop" else "the table it builds cannot be repeated on the real set"))
        if self.source is not None and name in ("add", "discard", "remove", "clear"):
            self._note_applied(name, list(args))
        if name == "pop":
            if args:
                raise_python(TypeError, f"set.pop() takes no arguments ({len(args)} given)")
            if not self.items:
                raise_python(KeyError, "pop from an empty set")
            self.ordered("set.pop()")
            self._record("pop", [])
            k = self.shadow.pop()
            self.plain = False
            self._borrowed_changed()
            return self.items.pop(k)
        if name == "add":
            self.insert(tx, args[0])
            self._borrowed_changed()
            return const(None)
        if name == "clear":
            self.shadow.clear()
            self.items.clear()
            self._record("clear", [])
            self.plain, self.unknown, self.borrowed = True, None, False
            return const(None)
        if name in ("discard", "remove"):
            k = key_of(args[0], tx)
            if k not in self.shadow:
                if name == "remove":
                    raise_python(KeyError, k)
                return const(None)
            self._record(name, args)
            self.shadow.discard(k)
            del self.items[k]
            self.plain = False
            self._borrowed_changed()
            return const(None)
        # update and the *_update methods: the real method on the shadow, like operands
        values = dict(self._by_id())
        real_args = [real_operand(tx, a, values) for a in args]
        unknown = _unknown_of(self, args)
        plain_adds = name == "update" and all(not isinstance(a, (set, frozenset)) for a in real_args)
        try:
            getattr(self.shadow, name)(*real_args)
        except Exception as e:   # noqa: BLE001 - Python's own error for these operands
            raise_python(type(e), *e.args)
        if self.source is not None:     # update / difference_update: each argument as it iterated now
            self._note_applied(name, [a.ordered(f"set.{name}() of a set") if isinstance(a, SetValue)
                                      else [values[id(k)] for k in real] for a, real in zip(args, real_args)])
        self._record(name, args, values)
        kept = {k: self.items[k] for k in self.items if k in self.shadow}
        for k in self.shadow:
            if k not in kept:
                kept[k] = values[id(k)]
        self.items = kept
        self.plain = self.plain and plain_adds
        self.unknown = unknown
        self._borrowed_changed()
        return const(None)

    def _note_applied(self, name: str, args: list) -> None:
        """A set passed in is written back by doing to the real set what the frame did,
        in order (``replay_writes``): its table (iteration order, where later inserts go)
        follows its history, which ``clear()`` and a refill would not repeat.  A key is
        an immutable Value; an iterable argument is kept as the items it gave, in order."""
        if self.applied is None:
            self.applied = []
        self.applied.append((name, args))

    def replay_writes(self, cg, target: str, hold) -> list[str]:
        """The glue's writes for a set passed in: each change again, on the real set."""
        lines = []
        for name, args in self.applied or ():
            texts = [hold(cg.expr(a)) if isinstance(a, Value) else hold("(" + "".join(cg.expr(i) + ", " for i in a) + ")")
                     for a in args]
            lines.append(f"{target}.{name}({', '.join(texts)})")
        return lines

    def _borrowed_changed(self):
        if self.borrowed and self.unknown is None:
            self.unknown = ("iterating a set from outside the frame after the frame changed it: its order then "
                            "depends on its hash table's history")

    def _by_id(self):
        return ((id(k), v) for k, v in self.items.items())

    # -- leaving the frame -------------------------------------------------------------------
    def _rebuild_keys(self, why: str) -> list:
        """Keys whose insertion in this order makes this very table (a literal's order)."""
        if self.plain or self.borrowed:
            return list(self.items)   # (an input's contents are written back, not its table)
        self.ordered(why)
        for order in (list(self.items), list(self.shadow)):
            fresh = set()
            for k in order:
                fresh.add(k)
            if same_table(fresh, self.shadow):
                return order
        raise Unsupported(f"{why}: a set of values that are not all constants, after removals or set algebra, "
                          f"would not have eager's hash table if rebuilt from its items (later inserts and pops "
                          f"would differ)")

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.source_expr(self.source)
        if not self.plain and not self.borrowed and self.recipe is not None:
            inputs: list = []
            recipe = _bind_inputs(self.recipe, inputs)
            # the sets passed in are read as the frame found them: one it changed is no longer that
            if all(isinstance(v, ConstantValue) or v.unknown is None for v in inputs):
                read = "".join(cg.source_expr(v.source) + ", " for v in inputs)
                return cg.new_object(self, f"{cg.ref(replay_set)}({cg.ref(recipe)}, ({read}))")
        items = [self.items[k] for k in self._rebuild_keys("a set leaving the frame")]
        if not items:
            return cg.new_object(self, "frozenset()" if self.frozen else "set()")
        # from a tuple, inserted in its order (a literal of constants would be compiled to a
        # frozenset constant merged in, whose table the compiler made)
        kind = "frozenset" if self.frozen else "set"
        return cg.new_object(self, f"{kind}(({''.join(cg.expr(v) + ', ' for v in items)}))")

    def rebuild_contents(self, cg) -> str:
        # the items, in an order that rebuilds this table (written back into a set passed
        # in, or given to a set subclass's constructor)
        items = [self.items[k] for k in self._rebuild_keys("a set leaving the frame")]
        return "(" + "".join(cg.expr(v) + ", " for v in items) + ")" if items else "()"


def _bind_inputs(recipe, inputs: list):
    """``recipe`` with each ``("input", value)`` argument numbered into ``inputs``."""
    def arg(a):
        kind, obj = a
        if kind == "input":
            inputs.append(obj)
            return "input", len(inputs) - 1
        return ("set", _bind_inputs(obj, inputs)) if kind == "set" else a

    base, steps = recipe
    if base[0] == "make":
        base = (base[0], base[1], arg(base[2]))
    elif base[0] == "op":
        base = (base[0], base[1], arg(base[2]), arg(base[3]))
    elif base[0] == "method":
        base = (base[0], base[1], arg(base[2]), tuple(arg(a) for a in base[3]))
    return base, tuple((name, tuple(arg(a) for a in args)) for name, args in steps)


def _unknown_of(first, others) -> str | None:
    for v in (first, *others):
        if isinstance(v, SetValue):
            if v.unknown is not None:
                return v.unknown
            if v.borrowed:
                return ("iterating a set computed from a set passed in: its order depends on that set's hash "
                        "table's history")
        elif isinstance(v, ConstantValue) and isinstance(v.peek(), (set, frozenset)) and v.source is not None:
            return ("iterating a set computed from a frozenset passed in: its order depends on that set's hash "
                    "table's history")
    return None


def recipe_arg(v: Value, values: dict | None = None):
    """``v`` as an argument of a replayed set operation, or None when it is not made of
    constants (a set by its recipe, a constant itself, any other iterable as the
    stand-in ``real_operand`` gave Python when its items were constants)."""
    if values is not None and ("recipe", id(v)) in values:
        return values["recipe", id(v)]
    if isinstance(v, SetValue):
        if v.borrowed:
            return "input", v         # the set passed in, read by the glue (if the frame leaves it)
        return None if v.recipe is None else ("set", v.recipe)
    if isinstance(v, ConstantValue):
        if v.source is not None and isinstance(v.peek(), (set, frozenset)):
            return "input", v         # a frozenset passed in: its own table, read by the glue
        return "const", v.value
    items = getattr(v, "items", None)
    try:
        t = v.python_type()
    except Unsupported:
        return None
    if t in (list, tuple) and isinstance(items, list) and all(isinstance(i, ConstantValue) for i in items):
        keys = [i.value for i in items]
        return "const", tuple(keys) if t is tuple else keys
    return None


def real_operand(tx, v: Value, values: dict):
    """The real object a set method receives for ``v``: a set Value's shadow, a constant
    set itself, else a real container of the same type holding the keys (a list is added
    item by item, a dict by its keys, as Python does); ``values`` learns each key's Value."""
    if isinstance(v, SetValue):
        for k, item in v.items.items():
            values.setdefault(id(k), item)
        return v.shadow
    if isinstance(v, ConstantValue):
        real = v.value
        if isinstance(real, (set, frozenset, str, bytes, tuple, range)):
            for k in real:
                values.setdefault(id(k), const(k))
            return real
        return real   # not iterable: Python's TypeError
    try:
        t = v.python_type()
    except Unsupported:
        t = None
    items = v.unpack(tx)
    keys = []
    for item in items:
        k = key_of(item, tx)
        values.setdefault(id(k), item)
        keys.append(k)
    stand_in = dict.fromkeys(keys) if t is dict else tuple(keys) if t is tuple else keys
    # (iterated once: the replay gets the same stand-in)
    values["recipe", id(v)] = ("const", stand_in) if all(isinstance(i, ConstantValue) for i in items) else None
    return stand_in


def apply_real(tx, s: SetValue, method: str, args: list) -> Value:
    """``s.method(*args)`` for the methods that make a new set or answer a question, run
    by Python on the shadows."""
    values = dict(s._by_id())
    real_args = [real_operand(tx, a, values) for a in args]
    try:
        result = getattr(s.shadow, method)(*real_args)
    except Exception as e:   # noqa: BLE001 - Python's own error for these operands
        raise_python(type(e), *e.args)
    if result is NotImplemented:
        return const(NotImplemented)
    if isinstance(result, (set, frozenset)):
        recorded = [recipe_arg(a, values) for a in args]
        me = recipe_arg(s)
        base = None if me is None or None in recorded else ("method", method, me, tuple(recorded))
        return SetValue.from_real(result, values, _unknown_of(s, args), base)
    return const(result)


# an operator function's symbol, from the one operator table (any operator may reach here)
_SYMBOLS = {fn.__name__: sym for sym, fn in (*BINARY_OPS.items(), *COMPARE_OPS.items())}


def binary(tx, fn, a: Value, b: Value, suffix: str = ""):
    """``a | b`` / ``&`` / ``-`` / ``^`` and the comparisons where a side is a set Value
    and the other a set too: run by Python on the shadows (its own dispatch, result
    type and errors).  Against a builtin of another type, Python's TypeError; None
    otherwise (a user class's reflected method may answer: the caller goes on)."""
    if not (isinstance(a, SetValue) or isinstance(b, SetValue)):
        return None
    if _set_like(a) and _set_like(b):
        values: dict = {}
        ra, rb = real_operand(tx, a, values), real_operand(tx, b, values)
        try:
            result = fn(ra, rb)
        except Exception as e:   # noqa: BLE001 - Python's own error
            raise_python(type(e), *e.args)
        if isinstance(result, (set, frozenset)):
            ma, mb = recipe_arg(a, values), recipe_arg(b, values)
            base = None if ma is None or mb is None else ("op", fn, ma, mb)
            return SetValue.from_real(result, values, _unknown_of(a, [b]), base)
        return const(result)
    other = b if isinstance(a, SetValue) else a
    if fn.__name__ in ("eq", "ne"):
        return None
    try:
        builtin = other.python_type().__module__ == "builtins"
    except Unsupported:
        builtin = False
    if builtin:
        if fn.__name__ in ("lt", "le", "gt", "ge"):
            raise_python(TypeError, f"'{_SYMBOLS[fn.__name__]}' not supported between instances of "
                                    f"'{type_name(a.python_type())}' and '{type_name(b.python_type())}'")
        raise_python(TypeError, f"unsupported operand type(s) for {_SYMBOLS[fn.__name__]}{suffix}: "
                                f"'{type_name(a.python_type())}' and '{type_name(b.python_type())}'")
    return None


def _set_like(v: Value) -> bool:
    return isinstance(v, SetValue) or (isinstance(v, ConstantValue) and isinstance(v.peek(), (set, frozenset)))


_IN_PLACE = {"or_": "update", "and_": "intersection_update", "sub": "difference_update",
             "xor": "symmetric_difference_update"}


def inplace(tx, fn, a: SetValue, b: Value):
    """``a |= b`` (and ``&=``, ``-=``, ``^=``) on a mutable set with a set on the right:
    the matching ``*_update`` method in place, as ``set.__ior__`` runs it; None for any
    other right side (``set.__ior__`` declines: Python then tries ``a | b``)."""
    if a.frozen or not _set_like(b) or fn.__name__ not in _IN_PLACE:
        return None
    a.call_method(tx, _IN_PLACE[fn.__name__], [b], {})
    return a


def make(tx, arg: Value | None, frozen: bool) -> Value:
    """``set(arg)`` / ``frozenset(arg)``: a set is merged as Python merges it, any other
    iterable added item by item; ``frozenset(f)`` of a frozenset is ``f`` itself."""
    if arg is None:
        return SetValue({}, frozen=frozen)
    if frozen and ((isinstance(arg, SetValue) and type(arg) is SetValue and arg.frozen)
                   or (isinstance(arg, ConstantValue) and type(arg.peek()) is frozenset)):
        return arg
    if not _set_like(arg):
        return SetValue(set_items(tx, arg.unpack(tx)), frozen=frozen)
    values: dict = {}
    real = real_operand(tx, arg, values)
    made = recipe_arg(arg, values)
    return SetValue.from_real((frozenset if frozen else set)(real), values, _unknown_of(arg, []),
                              None if made is None else ("make", frozen, made))


# -- comparing hash tables ---------------------------------------------------------------------
_WORD = ctypes.sizeof(ctypes.c_ssize_t)


def _table(s) -> tuple:
    """(fill, used, mask, finger, key address per slot) of a real set: what decides where
    its next inserts go and what ``pop`` returns (``PySetObject``, Include/cpython/setobject.h)."""
    base = id(s)
    fill, used, mask = (ctypes.c_ssize_t.from_address(base + i * _WORD).value for i in (2, 3, 4))
    table = ctypes.c_void_p.from_address(base + 5 * _WORD).value
    finger = ctypes.c_ssize_t.from_address(base + 7 * _WORD).value
    slots = tuple(ctypes.c_void_p.from_address(table + 2 * _WORD * i).value for i in range(mask + 1))
    return fill, used, mask, finger, slots


def _layout_holds() -> bool:
    try:
        one, big = {1}, set(range(40))
        big.discard(3)
        f1, u1, m1, _, s1 = _table(one)
        f2, u2, m2, _, _ = _table(big)
        return (f1, u1, m1) == (1, 1, 7) and s1[1] == id(1) and u2 == 39 and f2 == 40 and m2 >= 63
    except Exception:   # noqa: BLE001 - a build with another layout: never compared
        return False


_LAYOUT_HOLDS = _layout_holds()


def same_table(a, b) -> bool:
    """Whether two real sets have the same hash table, slot for slot."""
    return _LAYOUT_HOLDS and _table(a) == _table(b)
