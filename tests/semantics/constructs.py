"""The constructs the semantics oracle checks, generated from Kiln's own handler tables.

* every callable Kiln models by hand (the ``BUILTINS`` table of ``values/builtins.py``,
  which takes in the itertools, operator-object, deque and weakref tables), each with
  one or more calls written in ``CALLS`` below;
* every operator of ``capture/basics/operator_table.py`` (``BINARY_OPS``, ``INPLACE_OPS``,
  ``COMPARE_OPS``), as the bytecode a user writes;
* every public method of the container types Kiln models as values of its own
  (``CONTAINER_TYPES``), each called with the arguments in ``METHOD_ARGS``;
* the other bytecode Kiln evaluates structurally (``BYTECODE``: subscripts, ``in``,
  iteration, unpacking, truth, unary operators, attribute reads, calls);
* the constructs most likely to make Python refuse (``CAUGHT``), inside ``try`` /
  ``except`` in the compiled frame, so what the program's ``except`` sees (type and
  message) is compared, not only what escapes the call.

A table entry with no call written here fails ``test_every_table_entry_is_covered``:
modelling a new builtin or method means saying how the oracle calls it.
"""
from __future__ import annotations

import builtins as _b
import collections
import functools
import itertools
import math
import operator
import sys
import weakref
from dataclasses import dataclass

import torch

from kiln.capture.basics.operator_table import BINARY_OPS, COMPARE_OPS, INPLACE_OPS, UNARY_OPS
from kiln.capture.values.builtins import BUILTINS

U = ("fn(v)",)
# (the bytecode forms of these operators, ``v + v``, ``2 + v``, run the other operand orders)
BIN = ("fn(v, 2)",)
MATH2 = ("fn(v, 2)",)

# how the oracle calls each entry of BUILTINS (``fn`` is the entry, ``v`` the value)
CALLS: dict = {
    _b.len: U, _b.bool: U, _b.type: U, _b.callable: U, _b.iter: U, _b.list: U, _b.tuple: U, _b.dict: U,
    _b.set: U, _b.frozenset: U, _b.sum: U, _b.all: U, _b.any: U, _b.abs: U, _b.int: U, _b.float: U,
    _b.str: U, _b.sorted: ("fn(v)", "fn(v, reverse=True)"), _b.repr: U, _b.format: U, _b.ord: U, _b.chr: U,
    _b.hash: ("fn(v) == fn(v)", "fn(v)"), _b.complex: U, _b.round: ("fn(v)", "fn(v, 1)"), _b.range: ("fn(v)", "fn(0, v)"),
    _b.isinstance: ("fn(v, list)", "fn(v, (int, str))", "fn(v, torch.Tensor)", "fn(v, object)", "fn(v, type)",
                    "fn(v, collections.abc.Iterable)", "fn(v, collections.abc.Hashable)"),
    _b.issubclass: ("fn(v, object)", "fn(v, int)", "fn(bool, v)"),
    _b.hasattr: ("fn(v, 'shape')", "fn(v, '__call__')", "fn(v, 'append')", "fn(v, '__len__')", "fn(v, 'a')",
                 "fn(v, 'x')", "fn(v, '__iter__')", "fn(v, '__dict__')", "fn(v, 'real')", "fn(v, 'keys')"),
    _b.getattr: ("fn(v, 'shape', None)", "fn(v, 'a', -1)", "fn(v, '__class__')", "fn(v, 'real', -1)",
                 "fn(v, 'x')", "fn(v, '__name__', None)"),
    _b.setattr: ("(fn(v, 'a', 5), v)[1]",), _b.delattr: ("(fn(v, 'a'), v)[1]",),
    _b.enumerate: ("fn(v)", "fn(v, 1)"), _b.zip: ("fn(v, [7, 8])", "fn(v, v)"), _b.reversed: U,
    _b.next: ("fn(v)", "fn(v, 0)"), _b.min: ("fn(v)", "fn(v, 2)"), _b.max: ("fn(v)", "fn(v, 2)"),
    _b.map: ("fn(bool, v)",), _b.filter: ("fn(None, v)",), _b.print: ("fn(v, file=SINK)",),
    _b.slice: ("fn(v)", "fn(1, v)"), _b.id: ("fn(v) == fn(v)", "fn(v)"), _b.pow: ("fn(v, 2)", "fn(2, v)", "fn(v, 2, 5)"),
    _b.divmod: ("fn(v, 2)", "fn(7, v)"), object.__new__: U,
    operator.getitem: ("fn(v, 0)", "fn(v, 'a')"), operator.setitem: ("(fn(v, 0, 9), v)[1]",),
    operator.is_: ("fn(v, v)", "fn(v, None)"), operator.contains: ("fn(v, 1)", "fn(v, 'a')"),
    operator.truth: U, operator.not_: U, operator.index: U, functools.reduce: ("fn(operator.add, v)",),
    itertools.count: ("fn(v)",), itertools.repeat: ("fn(v, 2)",), itertools.chain: ("fn(v, v)", "fn(v, [1])"),
    itertools.chain.from_iterable: U, itertools.combinations: ("fn(v, 2)",),
    itertools.combinations_with_replacement: ("fn(v, 2)",), itertools.permutations: ("fn(v, 2)",),
    itertools.product: ("fn(v, [0, 1])",), itertools.compress: ("fn(v, [1, 0, 1])",),
    itertools.islice: ("fn(v, 2)",), itertools.zip_longest: ("fn(v, [1])",), itertools.accumulate: U,
    itertools.pairwise: U, itertools.starmap: ("fn(operator.add, v)",),
    itertools.filterfalse: ("fn(None, v)", "fn(bool, v)"),
    itertools.groupby: ("[(k, list(g)) for k, g in fn(v)]", "[(k, list(g)) for k, g in fn(v, key=bool)]",
                        "[list(g) for k, g in list(fn(v))]"),
    itertools.cycle: ("list(itertools.islice(fn(v), 7))",), itertools.tee: ("[list(i) for i in fn(v, 3)]",),
    tuple.__new__: ("fn(tuple, v)",),
    operator.itemgetter: ("fn(0)(v)", "fn('a')(v)"), operator.attrgetter: ("fn('a')(v)", "fn('shape')(v)"),
    operator.methodcaller: ("fn('count', 1)(v)", "fn('keys')(v)"), operator.length_hint: ("fn(v)", "fn(v, 5)"),
    sys.intern: U, collections.deque: ("fn(v)", "fn(v, 2)"), weakref.ref: ("fn(v)() is v",),
    dict.fromkeys: ("fn(v)", "fn(v, 0)"), collections.OrderedDict.fromkeys: ("fn(v)",),
    collections.defaultdict.fromkeys: ("fn(v)",),
}
for _op in (*BINARY_OPS.values(), *COMPARE_OPS.values()):
    CALLS[_op] = BIN
for _op in INPLACE_OPS.values():
    CALLS[_op] = ("(fn(v, 2), v)",)
for _op in UNARY_OPS:
    CALLS[_op] = U
for _name in ("sqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "floor", "ceil", "isnan",
              "isinf", "isfinite", "fabs", "prod", "trunc", "atan", "erf", "log1p", "expm1", "factorial",
              "radians", "degrees"):
    CALLS[getattr(math, _name)] = U
for _name in ("pow", "gcd", "atan2", "lcm", "copysign", "comb", "hypot", "isclose"):
    CALLS[getattr(math, _name)] = MATH2

# entries the oracle does not call, each with the reason
NOT_CALLED = {
    _b.super: "zero-argument super() needs the __class__ cell of a method; tests/capture covers it",
}

# the container types Kiln models by values of its own, whose methods it implements
CONTAINER_TYPES = (list, tuple, dict, set, frozenset, collections.deque, str, bytes, range, slice,
                   type({}.keys()), type({}.values()), type({}.items()), torch.Size)

# arguments for each public method of CONTAINER_TYPES ("" : none)
METHOD_ARGS = {
    "append": "3", "extend": "[4, 5]", "insert": "0, 8", "pop": "", "remove": "2", "clear": "", "copy": "",
    "count": "2", "index": "2", "reverse": "", "sort": "", "get": "'a'", "items": "", "keys": "", "values": "",
    "popitem": "", "setdefault": "'z', 1", "update": "{'q': 1}", "fromkeys": "[1]", "add": "4",
    "discard": "5", "difference": "{1}", "difference_update": "{1}", "intersection": "{5, 1}",
    "intersection_update": "{5}", "isdisjoint": "{1}", "issubset": "{1, 5}", "issuperset": "{5}",
    "symmetric_difference": "{5}", "symmetric_difference_update": "{5}", "union": "{9}",
    "appendleft": "0", "extendleft": "[6]", "popleft": "", "rotate": "1", "maxlen": None,
    "start": None, "stop": None, "step": None, "indices": "5", "numel": "", "mapping": None,
    "capitalize": "", "casefold": "", "center": "6", "decode": "", "encode": "", "endswith": "'b'",
    "expandtabs": "", "find": "'b'", "format": "", "format_map": "{}", "hex": "", "isalnum": "",
    "isalpha": "", "isascii": "", "isdecimal": "", "isdigit": "", "isidentifier": "", "islower": "",
    "isnumeric": "", "isprintable": "", "isspace": "", "istitle": "", "isupper": "", "join": "['1', '2']",
    "ljust": "5", "lower": "", "lstrip": "", "maketrans": "'a', 'b'", "partition": "'b'",
    "removeprefix": "'a'", "removesuffix": "'0'", "replace": "'a', 'c'", "rfind": "'b'", "rindex": "'b'",
    "rjust": "5", "rpartition": "'b'", "rsplit": "", "rstrip": "", "split": "", "splitlines": "",
    "startswith": "'a'", "strip": "", "swapcase": "", "title": "", "translate": "{}", "upper": "",
    "zfill": "5",
}
# ``bytes`` spells some arguments differently
BYTES_ARGS = {"endswith": "b'y'", "find": "b'y'", "join": "[b'1', b'2']", "maketrans": "b'a', b'b'",
              "partition": "b'y'", "removeprefix": "b'x'", "removesuffix": "b'y'", "replace": "b'x', b'c'",
              "rfind": "b'y'", "rindex": "b'y'", "rpartition": "b'y'", "startswith": "b'x'", "translate": "None",
              "center": "6", "count": "b'x'", "index": "b'y'", "fromhex": "'00'"}
METHOD_ARGS["fromhex"] = "'00'"

# bytecode Kiln evaluates structurally, beyond the operator tables
BYTECODE = (
    "v[0]", "v[-1]", "v[1:]", "v['a']", "v[::2]", "1 in v", "'a' in v", "v is None", "v is v",
    "[x for x in v]", "tuple(x for x in v)", "1 if v else 0", "not v", "v.a", "v.shape", "v.x", "v.real",
    "v()", "v(1)", "f'{v}'", "'%s' % (v,)",
    "STMT a, *b = v\n  return a, b", "STMT a, b = v\n  return a, b",
    "STMT for i in v:\n    break\n  else:\n    return None\n  return i",
    "STMT v.a = 4\n  return v", "STMT v[0] = 4\n  return v", "STMT del v[0]\n  return v",
    "STMT v.append(1)\n  return len(v)",
    # unpacking into displays: a break on LIST_EXTEND / SET_UPDATE / DICT_UPDATE(i) must
    # hand the step function the container i slots down (it crashed the interpreter)
    "[*v]", "(*v, 1)", "{**v}", "{*v}",
)


# Constructs run inside ``try`` / ``except`` in the compiled frame: an exception Python
# raises for the program (``list(obj)`` of a user instance, ``sorted`` of mixed types,
# ``len(3)``) must be raised *in the traced program*, where its ``except`` catches it
# and reads its type and message.  Outside a ``try`` a real exception escaping from
# Kiln's model of a value looks like eager's; here it is a difference.
CAUGHT = (
    "list(v)", "tuple(v)", "set(v)", "frozenset(v)", "dict(v)", "len(v)", "iter(v)", "sorted(v)", "sum(v)",
    "min(v)", "max(v)", "''.join(v)", "list(enumerate(v))", "list(zip(v, [1, 2]))", "list(reversed(v))",
    "[x for x in v]", "1 in v", "STMT a, b = v\n   return a, b", "abs(v)", "range(v)", "int(v)", "float(v)",
    "hash(v) == hash(v)", "format(v)", "bool(v)", "sorted([v, 1])", "v < 1", "v + 1", "v[0]", "v.x",
    "dict.fromkeys(v)", "functools.reduce(operator.add, v)", "any(v)", "sorted([v, 'a'], reverse=True)",
)




@dataclass(frozen=True)
class Construct:
    name: str        # shown in reports: the expression
    body: str        # the body of ``def case(v)``
    fn: object       # what ``fn`` names in the body
    only_types: tuple = ()   # methods: run over values of these types (and a few others)
    # "value": value and type; "type": the type only (``id``, ``hash``: eager and Kiln
    # are handed two different objects)
    compare: str = "value"

    def __repr__(self):
        return self.name


def _qualname(fn) -> str:
    mod = getattr(fn, "__module__", None) or type(fn).__module__
    return f"{mod}.{getattr(fn, '__qualname__', None) or type(fn).__name__}"


def _expression(name, expr, fn=None, **kw) -> Construct:
    if expr.startswith("STMT "):
        return Construct(name, expr[5:], fn, **kw)
    return Construct(name, f"return {expr}", fn, **kw)


def builtin_constructs(ci: bool = False) -> list:
    out = []
    for fn in BUILTINS:
        if ci and fn in _SAME_HANDLER:
            continue
        calls = CALLS.get(fn, ())
        for call in calls if not ci or fn in _ALL_CALLS_IN_CI else calls[:1]:
            out.append(_expression(f"{_qualname(fn)}: {call}", call, fn,
                                   compare="type" if fn in (_b.id, _b.hash) and call == "fn(v)" else "value"))
    return out


def operator_constructs(ci: bool = False) -> list:
    out = []
    for sym in BINARY_OPS:
        out += [_expression(f"v {sym} v", f"v {sym} v"), _expression(f"v {sym} 2", f"v {sym} 2")]
        out += [] if ci else [_expression(f"2 {sym} v", f"2 {sym} v")]
    for sym in COMPARE_OPS:
        out += [_expression(f"v {sym} v", f"v {sym} v")] + ([] if ci else [_expression(f"v {sym} 2", f"v {sym} 2")])
    for sym in INPLACE_OPS:
        out += [Construct(f"v {sym} v", f"v {sym} v\n  return v", None)]
        out += [] if ci else [Construct(f"v {sym} 2", f"v {sym} 2\n  return v", None)]
    return out


def container_methods() -> dict:
    """name -> the container types that have a public method (or attribute) of that name."""
    names: dict = {}
    for t in CONTAINER_TYPES:
        for name in dir(t):
            if not name.startswith("_"):
                names.setdefault(name, []).append(t)
    return names


def method_constructs() -> list:
    out = []
    for name, types in sorted(container_methods().items()):
        if name not in METHOD_ARGS:
            continue
        args = METHOD_ARGS[name]
        expr = f"v.{name}" if args is None else f"v.{name}({args})"
        out.append(_expression(expr, expr, only_types=tuple(t for t in types if t is not bytes)))
        if bytes in types and args is not None:
            bexpr = f"v.{name}({BYTES_ARGS.get(name, args)})"
            if bexpr != expr:
                out.append(_expression(bexpr + " (bytes)", bexpr, only_types=(bytes,)))
    return out


def bytecode_constructs() -> list:
    return [_expression(expr.replace("\n", " ")[5:] if expr.startswith("STMT ") else expr, expr)
            for expr in BYTECODE]


def caught_constructs() -> list:
    out = []
    for expr in CAUGHT:
        stmt = expr[5:] if expr.startswith("STMT ") else f"return {expr}"
        name = expr.replace("\n", " ")[5:] if expr.startswith("STMT ") else expr
        body = (f"try:\n   {stmt}\n  except Exception as e:\n"
                f"   return ('caught', type(e).__name__, str(e))")
        out.append(Construct(f"try: {name}", body, None))
    return out


def all_constructs() -> list:
    return builtin_constructs() + operator_constructs() + method_constructs() + bytecode_constructs() \
        + caught_constructs()


# The CI run (about 90 s on one core) leaves out what reaches a handler another entry
# already checks: the ``operator`` module's arithmetic, comparison and unary functions
# (the same ``apply_operator`` as the bytecode operators, all checked) and ``math``'s
# functions (one generic handler; ``math.sqrt`` and ``math.gcd`` stay); it runs the
# first call of each other entry (every call of the builtins that ask about objects),
# one operand order per operator, and every method and bytecode construct.
# ``KILN_ORACLE_FULL=1`` runs everything.
_ALL_CALLS_IN_CI = frozenset({_b.hasattr, _b.getattr, _b.isinstance, _b.callable, _b.type, _b.len, _b.reversed})
_SAME_HANDLER = frozenset(
    {f for f in BUILTINS if getattr(f, "__module__", None) == "math" and f not in (math.sqrt, math.gcd)}
    | {f for f in CALLS if CALLS[f] in (BIN, U) and getattr(f, "__module__", None) in ("_operator", "operator")
       and f not in (operator.add, operator.neg, operator.truth, operator.not_, operator.index, operator.lt)}
    | {f for f in CALLS if CALLS[f] == ("(fn(v, 2), v)",) and f is not operator.iadd})


def ci_constructs() -> list:
    return builtin_constructs(ci=True) + operator_constructs(ci=True) + method_constructs() + bytecode_constructs() \
        + caught_constructs()


def uncovered() -> list:
    """Table entries with no oracle call: builtins and methods Kiln models that nobody
    said how to check."""
    missing = [_qualname(fn) for fn in BUILTINS if fn not in CALLS and fn not in NOT_CALLED]
    missing += [f"method {n}" for n in container_methods() if n not in METHOD_ARGS]
    return missing
