"""Containers: tuples (named tuples too), lists, dicts and their views, slices.

Containers made inside the frame are fully symbolic.  Containers that came in from
outside (arguments, globals, attributes) carry a source; when one is mutated it is
recorded in ``side_effects.mutated_containers`` and the glue writes its new contents
back after the graph runs.  Iterators (``range`` included) are in ``iterators.py``,
sets in ``sets.py``, deques in ``deques.py``, subclasses of these types in ``container_subclasses.py``, and
how keys hash and compare in ``keys.py``.
"""
from __future__ import annotations

import collections
import operator
import types

from ...exc import Unsupported
from .base import BoundContainerMethod, ConstantValue, ItemsValue, Value, builtin_instance_attr, const, raise_python, sort_by_keys
from .keys import TracedKey, key_of, set_items  # noqa: F401  (re-exported: containers' users key by them)
from .sets import SetValue  # noqa: F401  (re-exported: sets are containers to their users)


class SequenceValue(ItemsValue):
    mutable = False
    dirty = False   # set on any mutation: the symbolic contents no longer match .real

    def __init__(self, items, source=None):
        self.items = list(items)
        self.source = source

    def is_constant(self):
        return all(i.is_constant() for i in self.items)

    def as_constant(self):
        return self.python_type()(i.as_constant() for i in self.items)

    slice_keeps_type = False   # True for torch.Size, whose slices are Sizes

    def like(self, items) -> "SequenceValue":
        """A new sequence of this one's kind (what ``+``, ``*`` and slicing make): a
        tuple for any tuple (a namedtuple's slice is a plain tuple), a list for a list."""
        return (ListValue if isinstance(self, ListValue) else TupleValue)(items)

    def concat_type(self) -> type:
        """The type ``+`` requires of the other operand (any tuple next to a tuple)."""
        return list if isinstance(self, ListValue) else tuple

    def getitem(self, tx, key):
        k = key.as_constant()
        if isinstance(k, slice):
            # a slice of a tuple (named or not) is a plain tuple; of a list, a new list; of a
            # torch.Size, a Size (SizeValue.like)
            if self.slice_keeps_type:
                return self.like(self.items[k])
            return (ListValue if isinstance(self, ListValue) else TupleValue)(self.items[k])
        if isinstance(k, bool) or not isinstance(k, int):
            raise Unsupported(f"{self.python_type().__name__} indices must be integers, got {type(k).__name__}")
        try:
            return self.items[k]
        except IndexError:
            raise_python(IndexError, f"{self.python_type().__name__} index out of range")

    def describe(self):
        return f"{self.python_type().__name__}[{', '.join(i.describe() for i in self.items)}]"

    def call_method(self, tx, name, args, kwargs):
        if name == "index" and not kwargs:
            target = args[0]
            for i, item in enumerate(self.items):
                if _equal(tx, item, target):
                    return const(i)
            if self.python_type() is list:
                shown = repr(target.as_constant()) if target.is_constant() else target.describe()
                raise_python(ValueError, f"{shown} is not in list")
            raise_python(ValueError, "tuple.index(x): x not in tuple")
        if name == "count" and not kwargs:
            return const(sum(1 for i in self.items if _equal(tx, i, args[0])))
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__len__":
            return const(len(self.items))
        if name == "__contains__":
            return const(any(_equal(tx, i, args[0]) for i in self.items))
        return super().call_method(tx, name, args, kwargs)

    def getattr(self, tx, name):
        return type_attribute(tx, self, name)


class TupleValue(SequenceValue):
    def python_type(self):
        return tuple

    def python_value(self, tx=None):
        return tuple(i.python_value(tx) for i in self.items)

    def reconstruct(self, cg):
        if self.source is not None and not cg.prefers_rebuild(self):
            return cg.source_expr(self.source)
        inner = ", ".join(cg.expr(i) for i in self.items)
        return f"({inner},)" if len(self.items) == 1 else f"({inner})"


class NamedTupleValue(TupleValue):
    """A namedtuple or torch.return_types structseq."""

    def __init__(self, items, cls, source=None):
        super().__init__(items, source)
        self.cls = cls

    def python_type(self):
        return self.cls

    def as_constant(self):
        return self.cls(*[i.as_constant() for i in self.items]) if hasattr(self.cls, "_fields") \
            else self.cls([i.as_constant() for i in self.items])

    def getattr(self, tx, name):
        fields = getattr(self.cls, "_fields", None)
        if fields is None:
            fields = [f for f in dir(self.cls) if not f.startswith("_") and f not in ("count", "index", "n_fields",
                                                                                        "n_sequence_fields", "n_unnamed_fields")]
            order = getattr(self, "field_order", None)
            if order is not None:
                fields = order
        if name in fields:
            return self.items[list(fields).index(name)]
        if name == "_fields" and hasattr(self.cls, "_fields"):
            return const(self.cls._fields)
        raw = self._class_attr(name)
        if isinstance(raw, property):
            return tx.wrap(raw.fget, None).call(tx, [self], {})
        return super().getattr(tx, name)

    def _class_attr(self, name):
        """What the namedtuple's class (a user subclass with methods, or the generated
        class) defines for ``name``, found the way Python's lookup finds it."""
        for klass in self.cls.__mro__:
            if name in vars(klass):
                return vars(klass)[name]
        return None

    def call_method(self, tx, name, args, kwargs):
        fields = getattr(self.cls, "_fields", None)
        if fields is not None and name == "_replace" and not args:
            unknown = set(kwargs) - set(fields)
            if unknown:
                raise_python(ValueError, f"Got unexpected field names: {sorted(unknown)!r}")
            return NamedTupleValue([kwargs.get(f, item) for f, item in zip(fields, self.items)], self.cls)
        if fields is not None and name == "_asdict" and not args and not kwargs:
            return DictValue(dict(zip(fields, self.items)))
        raw = self._class_attr(name)
        if isinstance(raw, types.FunctionType) and raw.__module__ != "collections":
            # a method of a user subclass: traced like any method, with the tuple as self
            return tx.wrap(raw, None).call(tx, [self, *args], kwargs)
        return super().call_method(tx, name, args, kwargs)

    def getitem(self, tx, key):
        result = super().getitem(tx, key)
        if isinstance(result, TupleValue) and not isinstance(result, NamedTupleValue):
            return TupleValue(result.items)
        return result

    def reconstruct(self, cg):
        if self.source is not None and not cg.prefers_rebuild(self):
            return cg.source_expr(self.source)
        inner = ", ".join(cg.expr(i) for i in self.items)
        if hasattr(self.cls, "_fields"):
            return f"{cg.ref(self.cls)}({inner})"
        return f"{cg.ref(self.cls)}(({inner},))"


class ListValue(SequenceValue):
    mutable = True

    def python_type(self):
        return list

    def as_constant(self):
        raise Unsupported("a list is mutable and is never treated as a constant")

    def python_value(self, tx=None):
        return [i.python_value(tx) for i in self.items]

    def setitem(self, tx, key, value):
        tx.state.side_effects.mutated(self)
        k = key.as_constant()
        if isinstance(k, slice):
            self.items[k] = value.unpack(tx)
        else:
            self.items[k] = value

    def delitem(self, tx, key):
        tx.state.side_effects.mutated(self)
        del self.items[key.as_constant()]

    def call_method(self, tx, name, args, kwargs):
        se = tx.state.side_effects
        if name == "append":
            se.mutated(self)
            self.items.append(args[0])
            return const(None)
        if name == "extend":
            se.mutated(self)
            self.items.extend(args[0].unpack(tx))
            return const(None)
        if name == "insert":
            se.mutated(self)
            self.items.insert(args[0].as_constant(), args[1])
            return const(None)
        if name == "pop":
            se.mutated(self)
            return self.items.pop(*[a.as_constant() for a in args])
        if name == "clear":
            se.mutated(self)
            self.items.clear()
            return const(None)
        if name == "reverse":
            se.mutated(self)
            self.items.reverse()
            return const(None)
        if name == "remove":
            se.mutated(self)
            for i, item in enumerate(self.items):
                if _equal(tx, item, args[0]):
                    del self.items[i]
                    return const(None)
            raise_python(ValueError, "list.remove(x): x not in list")
        if name == "copy":
            return ListValue(self.items)
        if name == "sort":
            se.mutated(self)
            key = kwargs.get("key")
            if key is not None and not (isinstance(key, ConstantValue) and key.value is None):
                keys = [key.call(tx, [i], {}).as_constant() for i in self.items]
            else:
                keys = [i.as_constant() for i in self.items]
            sort_by_keys(self.items, keys, bool(kwargs.get("reverse", const(False)).as_constant()))
            return const(None)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.source_expr(self.source)  # contents are written back by the side-effect pass
        return cg.new_object(self, "[" + ", ".join(cg.expr(i) for i in self.items) + "]")

    def rebuild_contents(self, cg) -> str:
        return "[" + ", ".join(cg.expr(i) for i in self.items) + "]"


class DictValue(Value):
    """A dict (or OrderedDict / defaultdict) whose keys are known at trace time.

    An input dict's key set is guarded only when something depends on it: the first
    read of ``items`` (iteration, ``len``, views, equality, any mutation, rebuilding it)
    installs the guard that ``_keys_guard`` holds.  A lookup by a constant key
    (``d[k]``, ``d.get(k)``, ``k in d``) needs only that key's presence, so it guards
    that alone (``GuardSet.key_presence``): reading one variable of ``os.environ`` or one
    entry of a config dict does not recompile when other keys come and go."""
    dirty = False
    _keys_guard = None    # installs the key-set guard of an input dict not yet depended on
    _keys_source = None   # where that dict was read (``source`` may be dropped later)

    def __init__(self, items: dict, source=None, cls=dict, key_values: dict | None = None, default_factory=None):
        self.items = dict(items)          # python key -> Value
        self.key_values = dict(key_values or {})  # python key -> Value for non-constant keys
        self.source = source
        self.cls = cls
        self.default_factory = default_factory

    @property
    def items(self) -> dict:
        """python key -> Value; reading it makes the result depend on the whole key set."""
        if self._keys_guard is not None:
            install, self._keys_guard = self._keys_guard, None
            install()
        return self._items

    @items.setter
    def items(self, value: dict) -> None:
        self._items = value

    def _lookup_by_constant_key(self, tx, key: Value, k):
        """``(found, value)`` for a lookup that needs only ``k``'s presence guarded, or
        None where the lookup depends on more (the key set is already guarded, or the
        key is not a constant)."""
        if self._keys_guard is None or not isinstance(key, ConstantValue) or type(k) not in (str, int, bytes):
            return None
        found = k in self._items
        tx.state.guards.key_presence(self._keys_source, k, found)
        return found, (self._items[k] if found else None)

    def python_type(self):
        return self.cls

    def python_value(self, tx=None):
        # keys made in the frame (user objects, tensors) as the objects they stand for
        return {(self.key_values[k].python_value(tx) if k in self.key_values else k): i.python_value(tx)
                for k, i in self.items.items()}

    def describe(self):
        return f"{self.cls.__name__}({list(self.items)!r})"

    def contents(self):
        # what the dict holds, for reachability: no dependence on the key set
        return list(self._items.values()) + list(self.key_values.values())

    def _key_value(self, k):
        return self.key_values.get(k) or const(k)

    def unpack(self, tx):
        return [self._key_value(k) for k in self.items]

    def length(self, tx):
        return len(self.items)

    def truth(self, tx):
        return bool(self.items)

    def getitem(self, tx, key):
        k = key_of(key, tx)
        looked_up = self._lookup_by_constant_key(tx, key, k)
        if looked_up is not None and (looked_up[0] or self.default_factory is None):
            if looked_up[0]:
                return looked_up[1]
            raise_python(KeyError, k)
        if k in self.items:
            return self.items[k]
        if self.default_factory is not None:
            value = self.default_factory.call(tx, [], {})
            self.setitem(tx, key, value)
            return value
        raise_python(KeyError, k)

    def setitem(self, tx, key, value):
        tx.state.side_effects.mutated(self)
        k = key_of(key, tx)
        if k not in self.items and not isinstance(key, ConstantValue):
            self.key_values[k] = key      # an equal key already there stays, as in Python
        self.items[k] = value

    def delitem(self, tx, key):
        tx.state.side_effects.mutated(self)
        k = key_of(key, tx)
        if k not in self.items:
            raise_python(KeyError, k)
        del self.items[k]

    def getattr(self, tx, name):
        if name == "default_factory" and issubclass(self.cls, collections.defaultdict):
            return self.default_factory if self.default_factory is not None else const(None)
        return type_attribute(tx, self, name)

    def call_method(self, tx, name, args, kwargs):
        se = tx.state.side_effects
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name in ("get", "__contains__"):
            k = key_of(args[0], tx)
            looked_up = self._lookup_by_constant_key(tx, args[0], k)
            if looked_up is not None:
                found, value = looked_up
                if name == "__contains__":
                    return const(found)
                return value if found else (args[1] if len(args) > 1 else const(None))
            if name == "__contains__":
                return const(k in self.items)
            return self.items[k] if k in self.items else (args[1] if len(args) > 1 else const(None))
        if name in ("keys", "values", "items") and not args and not kwargs:
            return DictViewValue(self, name)
        if name == "__setitem__":
            self.setitem(tx, args[0], args[1])
            return const(None)
        if name == "update":
            se.mutated(self)
            for src in args:
                if isinstance(src, DictValue):
                    self.items.update(src.items)
                    self.key_values.update(src.key_values)
                else:
                    for pair in src.unpack(tx):
                        kv = pair.unpack(tx)
                        self.setitem(tx, kv[0], kv[1])
            for k, v in kwargs.items():
                self.items[k] = v
            return const(None)
        if name == "pop":
            if not 1 <= len(args) <= 2:
                raise_python(TypeError, f"pop expected at least 1 argument, got {len(args)}")
            se.mutated(self)
            k = key_of(args[0], tx)
            if k in self.items:
                return self.items.pop(k)
            if len(args) > 1:
                return args[1]
            raise_python(KeyError, k)
        if name == "setdefault":
            k = key_of(args[0], tx)
            if k not in self.items:
                self.setitem(tx, args[0], args[1] if len(args) > 1 else const(None))
            return self.items[k]
        if name == "clear":
            se.mutated(self)
            self.items.clear()
            return const(None)
        if name == "copy":
            return DictValue(self.items, cls=self.cls, key_values=self.key_values)
        if name == "__len__":
            return const(len(self.items))
        raise Unsupported(f"dict.{name} is not supported")

    def equals(self, tx, other) -> bool:
        """``self == other`` as dict's ``==``: the same keys (looked up as the dict looks
        them up) holding equal values (``is`` first); OrderedDicts also in the same order."""
        if not isinstance(other, DictValue) or len(self.items) != len(other.items):
            return False
        if issubclass(self.cls, collections.OrderedDict) and issubclass(other.cls, collections.OrderedDict) \
                and list(self.items) != list(other.items):
            return False
        return all(k in other.items and _equal(tx, v, other.items[k]) for k, v in self.items.items())

    def _literal(self, cg) -> str:
        parts = []
        for k, v in self.items.items():
            kexpr = cg.expr(self.key_values[k]) if k in self.key_values else cg.constant_expr(k)
            parts.append(f"{kexpr}: {cg.expr(v)}")
        return "{" + ", ".join(parts) + "}"

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.source_expr(self.source)
        lit = self._literal(cg)
        if self.cls is dict:
            return cg.new_object(self, lit)
        if self.default_factory is not None or issubclass(self.cls, collections.defaultdict):
            factory = cg.expr(self.default_factory) if self.default_factory is not None else "None"
            return cg.new_object(self, f"{cg.ref(self.cls)}({factory}, {lit})")
        return cg.new_object(self, f"{cg.ref(self.cls)}({lit})")

    def rebuild_contents(self, cg) -> str:
        return self._literal(cg)


class DictViewValue(Value):
    """``d.keys()`` / ``d.values()`` / ``d.items()``: a live view, so it shows the dict's
    contents when it is used, not when it was made (as Python's views do)."""

    _TYPES = {"keys": type({}.keys()), "values": type({}.values()), "items": type({}.items())}

    def __init__(self, d: DictValue, kind: str):
        self.d, self.kind = d, kind

    def python_type(self):
        return self._TYPES[self.kind]

    def describe(self):
        return f"{self.d.describe()}.{self.kind}()"

    def unpack(self, tx):
        d = self.d
        if self.kind == "keys":
            return d.unpack(tx)
        if self.kind == "values":
            return list(d.items.values())
        return [TupleValue([d._key_value(k), v]) for k, v in d.items.items()]

    def length(self, tx):
        return len(self.d.items)

    def truth(self, tx):
        return bool(self.d.items)

    def contents(self):
        return [self.d]

    def python_value(self, tx=None):
        # a view of the dict as it is now (for repr / str / formatting, which read it now)
        return getattr(self.d.python_value(tx), self.kind)()

    def as_constant(self):
        return self.python_value()

    def as_set(self, tx) -> SetValue:
        """The set a keys / items view behaves as in ``&``, ``|``, ``-``, ``^``."""
        if self.kind == "values":
            raise_python(TypeError, "unsupported operand type(s) for set operation: 'dict_values'")
        return SetValue(set_items(tx, self.unpack(tx)))

    def getattr(self, tx, name):
        return type_attribute(tx, self, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "__contains__":
            item = args[0]
            if self.kind == "keys":
                return const(key_of(item, tx) in self.d.items)
            if self.kind == "items":
                pair = item.unpack(tx) if item.python_type() is tuple else []
                k, v = pair if len(pair) == 2 else (None, None)
                found = k is not None and key_of(k, tx) in self.d.items
                return const(found and _equal(tx, self.d.items[key_of(k, tx)], v))
            return const(any(_equal(tx, v, item) for v in self.d.items.values()))
        if name == "__len__":
            return const(len(self.d.items))
        if name == "isdisjoint" and self.kind != "values":
            return const(not set(self.as_set(tx).items) & {key_of(v, tx) for v in args[0].unpack(tx)})
        raise Unsupported(f"dict_{self.kind}.{name} is not supported")

    def reconstruct(self, cg):
        # one view object however often the frame refers to it (``v is v``, identity hashes)
        return cg.new_object(self, f"{cg.expr(self.d)}.{self.kind}()")


class SliceValue(Value):
    def __init__(self, start: Value, stop: Value, step: Value):
        self.start, self.stop, self.step = start, stop, step

    def python_type(self):
        return slice

    def is_constant(self):
        return all(p.is_constant() for p in (self.start, self.stop, self.step))

    def as_constant(self):
        return slice(self.start.as_constant(), self.stop.as_constant(), self.step.as_constant())

    def contents(self):
        return [self.start, self.stop, self.step]

    def getattr(self, tx, name):
        if name in ("start", "stop", "step"):
            return getattr(self, name)
        return type_attribute(tx, self, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "indices" and self.is_constant():
            try:
                return const(self.as_constant().indices(*[a.as_constant() for a in args]))
            except Exception as e:   # noqa: BLE001 - raised as Python raises it
                raise_python(type(e), *e.args)
        raise Unsupported(f"slice.{name} is not supported")


def type_attribute(tx, v: Value, name: str) -> Value:
    """``v.name`` for a container: what the container's type has (a method bound to
    ``v``, or plain class data); AttributeError where the type has nothing."""
    found = builtin_instance_attr(tx, v, name)
    return BoundContainerMethod(v, name) if found is None else found


def _equal(tx, a: Value, b: Value) -> bool:
    """``a is b or bool(a == b)``, the test list.index / count / remove / ``in`` apply."""
    if a is b or tx.apply_operator(operator.is_, a, b).as_constant():
        return True
    # distinct tensors compare by value (eager may even raise): comparing refuses that
    return tx.apply_operator(operator.eq, a, b).truth(tx)
