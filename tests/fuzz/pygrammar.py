"""Python-semantics statements of the fuzzer: builtins over many value kinds, user classes with
dunder methods, class vs instance attributes, deques, ``nn.Module`` parameters, and globals of
another module (issue #24).

Why a separate grammar: :mod:`tests.fuzz.gen` writes tensor programs; the silent wrong answers
of issue #24 came from Python constructs applied to value kinds nobody tried (``callable`` of a
list, ``reversed`` of a set, ``deque + deque``, a callee's ``global`` write in another module).
Each statement here computes a Python value from one *value kind* (a list, a dataclass, an enum,
a ``torch.Size`` ...) with one construct, and either returns it (so the oracle compares value and
type) or branches on it (so a wrong answer changes the tensors).  A construct that may raise is
wrapped in ``try/except`` recording the exception's type name, so one raising case does not end
the program and the exception *type* is compared too.

The module-level pieces (``PY_HELPERS``) are rendered by :class:`tests.fuzz.gen.Program` like the
tensor grammar's helpers.  ``hm`` is a real module (``HM_SOURCE``) that the oracle writes into a
temporary directory under a fresh name for each run, so its globals are really another module's
globals; the oracle compares them after every call.
"""
from __future__ import annotations

# The helper module: globals written by its own functions (``global`` in nested calls),
# read by the program as module attributes, and written by the program directly.
HM_SOURCE = '''\
"""Fuzzer helper module: globals that the program's callees read and write."""
import torch

CALLS = 0
FACTOR = 1.5
ITEMS = []


class _Conf:
    level = 0


conf = _Conf()


def bump():
    global CALLS
    CALLS += 1
    return CALLS


def scale_by(t):
    global CALLS
    CALLS = CALLS + 1
    return t * FACTOR


def _inner():
    global FACTOR
    FACTOR = FACTOR + 0.25
    return FACTOR


def outer():
    return _inner() * 2


def set_factor(v):
    global FACTOR
    FACTOR = v


def read_factor():
    return FACTOR


def push(t):
    ITEMS.append(t)
    return len(ITEMS)
'''

# Placeholder for the helper module's name in the program source (the oracle substitutes a
# fresh importable name per run).
HM_NAME = "__fuzz_hm__"

PY_HELPERS = {
    "collections": "import collections\n",
    "hm": f"import {HM_NAME} as hm\n",
    "retune": "def retune(v):\n    hm.FACTOR = hm.FACTOR * v\n    return hm.FACTOR\n",
    "tick": "def tick():\n    global COUNT\n    COUNT += 1\n    return COUNT\n",
    "DC": ("import dataclasses\n\n@dataclasses.dataclass\nclass DC:\n    n: int\n    t: object = None\n"),
    "Color": "import enum\n\nclass Color(enum.Enum):\n    RED = 1\n    BLUE = 2\n",
    "Box": ("class Box:\n    def __init__(self, t):\n        self.t = t\n\n    def __call__(self, u):\n"
            "        return self.t + u\n\n    def __len__(self):\n        return 2\n\n"
            "    def __getitem__(self, i):\n        if i >= 2:\n            raise IndexError(i)\n"
            "        return self.t * (i + 1)\n"),
    "Flag": ("class Flag:\n    def __init__(self, on):\n        self.on = on\n\n    def __bool__(self):\n"
             "        return bool(self.on)\n"),
    "Key": ("class Key:\n    def __init__(self, k):\n        self.k = k\n\n    def __eq__(self, other):\n"
            "        return isinstance(other, Key) and self.k == other.k\n\n    def __hash__(self):\n"
            "        return hash(self.k)\n"),
    "Dyn": ("class Dyn:\n    def __init__(self):\n        self.real = 1\n\n    def __getattr__(self, name):\n"
            "        if name.startswith('x'):\n            return len(name)\n        raise AttributeError(name)\n"),
    "Prop": ("class Prop:\n    def __init__(self, v):\n        self._v = v\n\n    @property\n    def double(self):\n"
             "        return self._v * 2\n\n    @property\n    def val(self):\n        return self._v\n\n"
             "    @val.setter\n    def val(self, v):\n        self._v = v\n"),
    "Slot": ("class Slot:\n    __slots__ = ('a', 'b')\n\n    def __init__(self, a):\n        self.a = a\n"),
    "Cnt": ("class Cnt:\n    scale = 2.0\n    hits = 0\n\n    def __init__(self):\n        self.bias = 1.0\n\n"
            "    def apply(self, t):\n        type(self).hits += 1\n        return t * self.scale + self.bias\n\n"
            "cnt = Cnt()\n"),
    "smod": ("class Scale(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             "        self.w = torch.nn.Parameter(torch.tensor(0.5))\n"
             "        self.b = torch.nn.Parameter(torch.tensor(0.25))\n\n"
             "    def forward(self, t):\n        return t * self.w + self.b\n\nsmod = Scale()\n"),
}
# Classes whose *class* attributes the program may change: the oracle compares them.
STATEFUL_CLASSES = ("Cnt",)

# Value kinds: (name, expression template over a tensor variable {a}, helpers it needs).
VALUE_KINDS = [
    ("list", "[{a}, 1, 2]", ()), ("intlist", "[3, 1, 2]", ()), ("tuple", "({a}, 2)", ()),
    ("dict", "{{'k': {a}, 'n': 2}}", ()), ("set", "{{3, 1, 2}}", ()), ("frozenset", "frozenset({{2, 4}})", ()),
    ("deque", "collections.deque([{a}, 3])", ("collections",)), ("intdeque", "collections.deque([2, 5, 1])", ("collections",)),
    ("keys", "{{'p': 1, 'q': {a}}}.keys()", ()), ("values", "{{'p': 1, 'q': 2}}.values()", ()),
    ("items", "{{'p': 1}}.items()", ()), ("range", "range(1, 4)", ()), ("emptyrange", "range(0)", ()),
    ("namedtuple", "Pair({a}, 1)", ("Pair",)), ("dataclass", "DC(2, {a})", ("DC",)), ("enum", "Color.RED", ("Color",)),
    ("tensor", "{a}", ()), ("size", "{a}.shape", ()), ("dtype", "{a}.dtype", ()), ("device", "{a}.device", ()),
    ("instance", "obj", ()), ("box", "Box({a})", ("Box",)), ("flag", "Flag(s > 0)", ("Flag",)),
    ("key", "Key(2)", ("Key",)), ("dyn", "Dyn()", ("Dyn",)), ("prop", "Prop(2.0)", ("Prop",)),
    ("slot", "Slot({a})", ("Slot",)), ("cnt", "cnt", ("Cnt",)), ("int", "5", ()), ("float", "2.5", ()),
    ("str", "'ab'", ()), ("none", "None", ()), ("bool", "True", ()), ("arg_s", "s", ()), ("arg_lst", "lst", ()),
    ("lambda", "(lambda t: t)", ()), ("class", "Plain", ()), ("builtin", "len", ()), ("module", "torch.nn", ()),
    ("nnmod", "smod", ("smod",)), ("zipit", "zip([1, 2], 'ab')", ()), ("emptylist", "[]", ()),
]
ATTR_NAMES = ["shape", "__call__", "__len__", "append", "keys", "w", "missing", "k", "dtype", "__iter__",
              "real", "t", "n", "a", "b", "xlen", "double", "scale", "bias", "name", "value", "__getitem__"]
DATA_NAMES = ["shape", "w", "missing", "k", "dtype", "real", "n", "xlen", "double", "scale", "bias", "name", "value"]
ISINSTANCE_TYPES = ["list", "tuple", "dict", "set", "frozenset", "torch.Tensor", "int", "object", "Plain",
                    "(list, tuple)", "type", "str", "bool", "float", "torch.Size", "torch.dtype"]
# Builtins over one value {v}; ``raises`` marks those wrapped in try/except.
BUILTINS = [
    ("callable({v})", False), ("bool({v})", True), ("len({v})", True), ("list(reversed({v}))", True),
    ("sorted({v})", True), ("next(iter({v}))", True), ("type({v}).__name__", False), ("type({v}) is tuple", False),
    ("type({v}) == list", False), ("list({v})", True), ("tuple({v})", True), ("{v} == {v}", True),
]
CONSTANTS = ["3", "2.5", "'ab'", "None", "True", "(1, 'a')", "[1, 2.5]", "{'a': 1}", "torch.float32",
             "torch.Size([2, 3])", "range(3)", "-0.0", "1e20", "float('inf')", "frozenset({1})", "(1,)", "0.1 + 0.2"]
EXC_NAMES = "(TypeError, ValueError, RuntimeError, AttributeError, StopIteration, IndexError, KeyError)"


class PyStatements:
    """Mixin of :class:`tests.fuzz.gen.Gen`: the Python-semantics statement kinds (``s_*``)."""

    PY_CHOICES = {"builtin": 7, "dunder": 4, "classattr": 3, "deque": 2, "hmod": 4, "nestedglobal": 1, "module": 2}

    def _result(self, v, features, needs, text, is_bool=False):
        """Emit ``text`` (which binds Python value ``v``) and return it or (a bool) branch on it."""
        self.emit(text, features, needs)
        if is_bool and self.r.random() < 0.5:
            a = self.pick("full", "row", "scalar")
            t = self.new()
            self.emit(f"{t} = {a} * (2 if {v} else 3)", features, out=t, kind=self.kind_of(a))
        else:
            self.returns_extra.append(v)

    def _value(self):
        name, tpl, needs = self.r.choice(VALUE_KINDS)
        return name, tpl.format(a=self.pick("full", "row", "scalar")), list(needs)

    def _guarded(self, v, expr):
        return f"try:\n    {v} = {expr}\nexcept {EXC_NAMES} as e:\n    {v} = type(e).__name__"

    def s_builtin(self):
        r = self.r
        kind, val, needs = self._value()
        v = self.new().replace("t", "r")
        op = r.choice(["builtin", "builtin", "hasattr", "getattr", "isinstance", "repr"])
        is_bool = op in ("hasattr", "isinstance")
        if op == "builtin":
            tpl, raises = r.choice(BUILTINS)
            expr = tpl.format(v=val)
            text = self._guarded(v, expr) if raises else f"{v} = {expr}"
            is_bool = not raises and "__name__" not in tpl
        elif op == "hasattr":
            text = f"{v} = hasattr({val}, {r.choice(ATTR_NAMES)!r})"
        elif op == "getattr":
            name = r.choice(ATTR_NAMES)
            expr = f"getattr({val}, {name!r}, 'dflt')"
            text = f"{v} = {expr}" if name in DATA_NAMES else f"{v} = type({expr}).__name__"
            text = self._guarded(v, text.split(" = ", 1)[1])
        elif op == "isinstance":
            typ = r.choice(ISINSTANCE_TYPES)
            text = f"{v} = isinstance({val}, {typ})"
        else:
            kind, val, needs = "const", r.choice(CONSTANTS), []
            text = f"{v} = {r.choice(['str', 'repr'])}({val})"
        self._result(v, ["builtin", f"kind-{kind}"], needs, text, is_bool)

    def s_dunder(self):
        a, b = self.pick("full", "row", "scalar"), self.pick("full", "row", "scalar")
        kind = self.kind_of(a) if self.kind_of(a) == self.kind_of(b) else "full" if "full" in (
            self.kind_of(a), self.kind_of(b)) else "row" if "row" in (self.kind_of(a), self.kind_of(b)) else "scalar"
        v = self.new()
        text, needs, k = self.r.choice([
            (f"{v} = Box({a})({b})", ["Box"], kind),
            (f"{v} = {a} * len(Box({a}))", ["Box"], self.kind_of(a)),
            (f"{v} = Box({a})[1] + {a}", ["Box"], self.kind_of(a)),
            (f"if Flag(s > 0):\n    {v} = {a} + 1\nelse:\n    {v} = {a} - 1", ["Flag"], self.kind_of(a)),
            (f"{v} = {a} * (2 if Flag(len(lst) - 1) else 5)", ["Flag"], self.kind_of(a)),
            (f"kd = {{Key(1): {a}, Key(2): {b}}}\n{v} = kd[Key(1)] * len(kd)", ["Key"], self.kind_of(a)),
            (f"{v} = {a} * (3 if Key(2) == Key(2) else 1) + (1 if Key(1) != Key(2) else 0)", ["Key"], self.kind_of(a)),
            (f"{v} = {a} * (2 if Key(1) in {{Key(1), Key(3)}} else 4)", ["Key"], self.kind_of(a)),
            (f"dy = Dyn()\n{v} = {a} * dy.xlen + getattr(dy, 'q', 5)", ["Dyn"], self.kind_of(a)),
            (f"{v} = {a} * (1 if hasattr(Dyn(), 'xy') else 2) * (1 if hasattr(Dyn(), 'q') else 3)", ["Dyn"], self.kind_of(a)),
            (f"pr = Prop({a})\npr.val = pr.double + {b}\n{v} = pr.val * 2", ["Prop"], kind),
            (f"sl = Slot({a})\nif not hasattr(sl, 'b'):\n    sl.b = {b}\n{v} = sl.a + sl.b", ["Slot"], kind),
            (f"sl = Slot({a})\ntry:\n    sl.c = 1\n    {v} = {a} + 1\nexcept AttributeError:\n    {v} = {a} - 1", ["Slot"],
             self.kind_of(a)),
        ])
        self.emit(text, ["dunder"], needs, out=v, kind=k)

    def s_classattr(self):
        a = self.pick("full", "row", "scalar")
        v = self.new()
        text, out = self.r.choice([
            (f"{v} = cnt.apply({a})", True), ("cnt.scale = 3.0", False), ("Cnt.scale = Cnt.scale + 0.5", False),
            ("if 'scale' in vars(cnt):\n    del cnt.scale", False), (f"{v} = {a} * Cnt.scale", True),
            (f"{v} = {a} * cnt.scale", True), (f"{v} = {a} * Cnt().scale + Cnt.hits", True),
            (f"{v} = {a} * type(cnt).hits", True), (f"obj.w = obj.w * 2\n{v} = {a} * obj.w", True),
            (f"type(obj).w = 4.0\n{v} = {a} * obj.w", True), ("Cnt.hits = 0", False),
            (f"{v} = {a} * (1 if hasattr(Cnt, 'bias') else 2) * (1 if hasattr(cnt, 'bias') else 3)", True),
        ])
        self.emit(text, ["classattr"], ["Cnt"], out=v if out else None, kind=self.kind_of(a))

    def s_deque(self):
        a, b = self.pick("full", "row", "scalar"), self.pick("full", "row", "scalar")
        v, r = self.new(), self.new().replace("t", "r")
        ka, kb = self.kind_of(a), self.kind_of(b)
        kab = ka if ka == kb else "full" if "full" in (ka, kb) else "row" if "row" in (ka, kb) else "scalar"
        text, kind = self.r.choice([
            (f"dq = collections.deque([{a}, {b}])\ndq2 = dq + dq\n{v} = dq2[2] * len(dq2)\n{r} = dq2", ka),
            (f"dq = collections.deque([{a}])\ndq2 = dq * 2\n{v} = dq2[-1] + len(dq2)\n{r} = type(dq2).__name__", ka),
            (f"dq = collections.deque([1, 2])\ndq += [3]\ndq.appendleft(0)\n{v} = {a} * len(dq)\n{r} = dq", ka),
            (f"dq = collections.deque([{a}, {b}], maxlen=2)\ndq.append({a} * 2)\n{v} = dq[0] + dq[1]\n{r} = dq.maxlen", kab),
            (f"dq = collections.deque([1, 2, 3])\ndq.rotate(1)\n{v} = {a} * dq[0]\n{r} = list(dq)", ka),
            (f"dq = collections.deque([{a}, {b}])\n{v} = dq.popleft() + dq.pop()\n{r} = len(dq)", kab),
            (f"dq = collections.deque([1, 2])\ndq.extend([3, 4])\n{v} = {a} * dq.index(3)\n{r} = 2 * dq", ka),
        ])
        self.emit(text, ["deque"], ["collections"], out=v, kind=kind)
        self.returns_extra.append(r)

    def s_hmod(self):
        a = self.pick("full", "row", "scalar")
        v = self.new()
        text, needs, out = self.r.choice([
            (f"{v} = hm.scale_by({a})\n{v} = {v} * hm.CALLS", ["hm"], True),
            (f"hm.bump()\n{v} = {a} * hm.CALLS", ["hm"], True),
            (f"{v} = {a} * hm.bump() * hm.CALLS", ["hm"], True),
            (f"{v} = {a} * hm.outer() + hm.FACTOR", ["hm"], True),
            ("hm.FACTOR = hm.FACTOR * 2", ["hm"], False),
            (f"{v} = {a} * retune(0.5)", ["hm", "retune"], True),
            (f"retune(2)\n{v} = {a} * hm.read_factor()", ["hm", "retune"], True),
            ("hm.set_factor(s)", ["hm"], False),
            (f"{v} = {a} * hm.read_factor()", ["hm"], True),
            (f"{v} = {a} * hm.push({a}.detach())", ["hm"], True),
            (f"hm.ITEMS.append(s)\n{v} = {a} * len(hm.ITEMS)", ["hm"], True),
            (f"hm.conf.level += 1\n{v} = {a} * hm.conf.level", ["hm"], True),
            (f"{v} = {a} * hm._Conf.level", ["hm"], True),
        ])
        self.emit(text, ["hmod"], needs, out=v if out else None, kind=self.kind_of(a))

    def s_nestedglobal(self):
        a = self.pick("full", "row", "scalar")
        v = self.new()
        text = self.r.choice([f"{v} = {a} * tick()", f"tick()\n{v} = {a} * COUNT", f"{v} = {a} + tick() + COUNT"])
        self.emit(text, ["global", "nestedglobal"], ["COUNT", "tick"], out=v, kind=self.kind_of(a))

    def s_module(self):
        a = self.pick("full", "row", "scalar")
        v = self.new()
        text, k = self.r.choice([
            (f"{v} = smod({a})", self.kind_of(a)), (f"{v} = smod(smod({a}))", self.kind_of(a)),
            (f"{v} = smod({a}) + smod({a})", self.kind_of(a)),
            (f"smod({a}).sum().backward()", None), (f"(smod({a}) * {a}).sum().backward(retain_graph=True)", None),
            (f"{v} = smod.w.grad if smod.w.grad is not None else smod.w * 0", "scalar"), ("smod.zero_grad()", None),
            (f"{v} = torch.nn.functional.dropout(smod({a}), 0.3)", self.kind_of(a)),
        ])
        self.emit(text, ["module"], ["smod"], out=v if k else None, kind=k)
