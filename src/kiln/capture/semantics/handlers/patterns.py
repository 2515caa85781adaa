"""``match`` statements: the four pattern tests (PEP 634), as CPython's ceval runs them.

The compiler lowers a ``match`` to ordinary jumps, ``COPY``/``SWAP``, ``GET_LEN``,
comparisons and unpacking (handled elsewhere) around four tests, which are here:

* ``MATCH_MAPPING`` / ``MATCH_SEQUENCE``: the subject's *type* carries the
  ``Py_TPFLAGS_MAPPING`` / ``Py_TPFLAGS_SEQUENCE`` flag (dict, list, tuple, deque,
  ``collections.abc`` subclasses and registrations; never str / bytes).  The flag is
  read from the type Python has, and a value read from outside is guarded by type.
* ``MATCH_KEYS``: the subject's own ``get(key, dummy)`` for each key, in order, a key
  seen twice raising ValueError; the tuple of values, or None when one is missing.
* ``MATCH_CLASS``: ``isinstance(subject, cls)`` (the builtin's rules), then the
  positional names from ``cls.__match_args__`` (or the subject itself for the
  builtin types that match themselves), then the keyword names, each read with
  ``getattr``; an AttributeError is "no match", other errors are the program's.
  CPython's TypeErrors for a bad pattern are raised word for word (the one message
  that differs between versions is the version table's).
"""
from __future__ import annotations

import operator

from ....exc import Unsupported
from ...basics import LAYOUT
from ...values import AttributeMissing, ConstantValue, TracedException, const, raise_python, type_name
from ...values import TupleValue, key_of

# type flags (Include/object.h): what the pattern tests read off the subject's type
_TPFLAGS_SEQUENCE = 1 << 5
_TPFLAGS_MAPPING = 1 << 6
_TPFLAGS_HEAPTYPE = 1 << 9
_TPFLAGS_MATCH_SELF = 1 << 22


def _has_flag(v, flag: int) -> bool:
    return bool(v.python_type().__flags__ & flag)


def match_mapping(tx, ins):
    tx.push(const(_has_flag(tx.stack[-1], _TPFLAGS_MAPPING)))


def match_sequence(tx, ins):
    tx.push(const(_has_flag(tx.stack[-1], _TPFLAGS_SEQUENCE)))


class _Dummy:
    """The default ``MATCH_KEYS`` hands the subject's ``get``: a result that *is* it
    means the key is missing."""

    def __repr__(self):
        return "<match_keys dummy>"


_DUMMY = _Dummy()


def match_keys(tx, ins):
    keys_v, subject = tx.stack[-1], tx.stack[-2]
    keys = keys_v.unpack(tx)
    if not keys:
        tx.push(TupleValue([]))
        return
    dummy = tx.wrap(_DUMMY, None)
    seen, values = set(), []
    for k in keys:
        hashed = key_of(k, tx)
        if hashed in seen:
            shown = repr(k.as_constant()) if isinstance(k, ConstantValue) else k.describe()
            raise_python(ValueError, f"mapping pattern checks duplicate key ({shown})")
        seen.add(hashed)
        got = subject.call_method(tx, "get", [k, dummy], {})
        if got is dummy or tx.apply_operator(operator.is_, got, dummy).as_constant():
            tx.push(const(None))
            return
        values.append(got)
    tx.push(TupleValue(values))


def _attribute(tx, subject, name: str):
    """``getattr(subject, name)``, None where it raises AttributeError (no match)."""
    try:
        return subject.getattr(tx, name)
    except AttributeMissing:
        return None
    except TracedException as e:
        if issubclass(e.cls, AttributeError):
            return None
        raise


def _match_args(tx, cls_v, cls: type):
    """``cls.__match_args__`` as CPython reads it (None: the class has none).  A
    builtin (static) type's attributes never change, so Python answers; a class
    defined in Python is asked through the trace (it may have been written to)."""
    if not cls.__flags__ & _TPFLAGS_HEAPTYPE:
        found = getattr(cls, "__match_args__", None)
        return None if found is None else const(found)
    return _attribute(tx, cls_v, "__match_args__")


def match_class(tx, ins):
    names_v = tx.pop()
    cls_v = tx.pop()
    subject = tx.pop()
    real = getattr(cls_v, "real_object", None)
    cls = cls_v.as_constant() if isinstance(cls_v, ConstantValue) else real() if real is not None else None
    if not isinstance(cls, type):
        if cls is None and not isinstance(cls_v, ConstantValue):
            raise Unsupported(f"a class pattern with {cls_v.describe()}, which Kiln cannot identify")
        raise_python(TypeError, LAYOUT.match_class_not_a_type)
    if not tx.wrap(isinstance, None).call(tx, [subject, cls_v], {}).as_constant():
        tx.push(const(None))
        return
    nargs = ins.arg
    attrs, seen = [], set()
    if nargs:
        match_args = _match_args(tx, cls_v, cls)
        match_self = False
        if match_args is None:
            match_self = bool(cls.__flags__ & _TPFLAGS_MATCH_SELF)
            names = ()
        else:
            if match_args.python_type() is not tuple:
                raise_python(TypeError, f"{type_name(cls)}.__match_args__ must be a tuple "
                                        f"(got {type_name(match_args.python_type())})")
            names = tuple(match_args.unpack(tx))
        allowed = 1 if match_self else len(names)
        if allowed < nargs:
            plural = "" if allowed == 1 else "s"
            raise_python(TypeError, f"{type_name(cls)}() accepts {allowed} positional sub-pattern{plural} "
                                    f"({nargs} given)")
        if match_self:
            attrs.append(subject)
        else:
            for name_v in names[:nargs]:
                if name_v.python_type() is not str:
                    raise_python(TypeError, f"__match_args__ elements must be strings "
                                            f"(got {type_name(name_v.python_type())})")
                if not _take(tx, subject, cls, name_v.as_constant(), seen, attrs):
                    return
    for name in names_v.as_constant():
        if not _take(tx, subject, cls, name, seen, attrs):
            return
    tx.push(TupleValue(attrs))


def _take(tx, subject, cls, name: str, seen: set, attrs: list) -> bool:
    """One attribute of a class pattern; False (None pushed) when the subject lacks it."""
    if name in seen:
        raise_python(TypeError, f"{type_name(cls)}() got multiple sub-patterns for attribute {name!r}")
    seen.add(name)
    got = _attribute(tx, subject, name)
    if got is None:
        tx.push(const(None))
        return False
    attrs.append(got)
    return True


TABLE = {
    "MATCH_MAPPING": match_mapping,
    "MATCH_SEQUENCE": match_sequence,
    "MATCH_KEYS": match_keys,
    "MATCH_CLASS": match_class,
}
