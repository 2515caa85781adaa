"""Where a value lives at run time.

A Value says what something is while Kiln traces; its Source says how to read the
same thing again when the compiled frame is called.  Guards and glue code are both
generated from Sources as Python expressions over the frame's arguments, so a
source's ``expr()`` must be cheap and side-effect free.

Objects that expressions need (a module's globals dict, a class to compare against)
are interned into a shared :class:`Namespace` under generated names.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


class Namespace:
    """Names for objects that generated code refers to (``___c0``, ``___g1`` ...)."""

    def __init__(self):
        self.values: dict[str, object] = {}
        self._by_id: dict[int, str] = {}

    def bound(self, source) -> str | None:
        """A temporary already holding ``source``'s value, if the caller has one."""
        return None

    def ref(self, obj, prefix: str = "___c") -> str:
        key = id(obj)
        name = self._by_id.get(key)
        if name is None:
            name = f"{prefix}{len(self.values)}"
            self.values[name] = obj
            self._by_id[key] = name
        return name


class Source:
    """Base class: subclasses are frozen dataclasses so they hash and compare."""

    def expr(self, ns: Namespace) -> str:
        """This source as a Python expression; ``ns`` may substitute a bound temporary."""
        bound = ns.bound(self)
        return bound if bound is not None else self._expr(ns)

    def _expr(self, ns: Namespace) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:
        """A user-facing name, e.g. ``self.layer[0].weight``."""
        return self.expr(_DescribeNS())

    @property
    def base(self) -> "Source | None":
        return None

    def root(self) -> "Source":
        s = self
        while s.base is not None:
            s = s.base
        return s


class _DescribeNS(Namespace):
    def ref(self, obj, prefix: str = "___c") -> str:
        if isinstance(obj, dict) and "__name__" in obj:
            return f"<globals of {obj['__name__']}>"
        return getattr(obj, "__qualname__", None) or type(obj).__name__


@dataclass(frozen=True)
class LocalSource(Source):
    """An argument of the compiled frame (also a restored local of a continuation)."""
    name: str

    def describe(self):
        if self.name.startswith("___stack"):
            return f"<value carried over a graph break #{self.name[8:]}>"
        return self.name

    def _expr(self, ns):
        return self.name


@dataclass(frozen=True)
class GlobalSource(Source):
    """``globals_dict[name]``: a global of some module, read by ``LOAD_GLOBAL`` in one of
    its functions or as an attribute of the module object (both are one store: the
    module's ``__dict__``).  ``module`` is the module's name when it is not the compiled
    frame's own, so guards and messages say whose global it is."""
    globals_id: int
    name: str
    globals_ref: object = None  # the dict itself; excluded from eq via id
    module: str | None = None   # None: the compiled frame's own module; excluded from eq

    @staticmethod
    def of(globals_dict: dict, name: str, frame_globals: dict) -> "GlobalSource":
        module = None if globals_dict is frame_globals else str(globals_dict.get("__name__", "<unnamed module>"))
        return GlobalSource(id(globals_dict), name, globals_dict, module)

    def __hash__(self):
        return hash((self.globals_id, self.name))

    def __eq__(self, other):
        return isinstance(other, GlobalSource) and (self.globals_id, self.name) == (other.globals_id, other.name)

    def of_module(self) -> str:
        """`` of module M`` for another module's global, else nothing."""
        return "" if self.module is None else f" of module {self.module}"

    def describe(self):
        return self.name if self.module is None else f"global {self.name!r}{self.of_module()}"

    def _expr(self, ns):
        if isinstance(ns, _DescribeNS):
            # inside a longer path (``other.cfg.eps``): the dotted name reads best
            return self.name if self.module is None else f"{self.module}.{self.name}"
        return f"{ns.ref(self.globals_ref, '___g')}[{self.name!r}]"


@dataclass(frozen=True)
class AttrSource(Source):
    base_src: Source
    name: str

    @property
    def base(self):
        return self.base_src

    def _expr(self, ns):
        return f"{self.base_src.expr(ns)}.{self.name}"


@dataclass(frozen=True)
class ItemSource(Source):
    """``base[index]`` for a constant index (int, str, or another hashable literal)."""
    base_src: Source
    index: object

    @property
    def base(self):
        return self.base_src

    def _expr(self, ns):
        idx = self.index
        text = repr(idx) if isinstance(idx, (int, str, float, bool, type(None))) else ns.ref(idx)
        return f"{self.base_src.expr(ns)}[{text}]"


@dataclass(frozen=True)
class DictValuesSource(Source):
    """``list(base.values())[index]``: values of dicts keyed by non-literal objects."""
    base_src: Source
    index: int

    @property
    def base(self):
        return self.base_src

    def _expr(self, ns):
        return f"list({self.base_src.expr(ns)}.values())[{self.index}]"


@dataclass(frozen=True)
class DictKeysSource(DictValuesSource):
    """``list(base)[index]``: a non-literal key of a dict (a tensor keying optimizer state)."""

    def _expr(self, ns):
        return f"list({self.base_src.expr(ns)})[{self.index}]"


@dataclass(frozen=True)
class ClosureSource(Source):
    """The contents of cell ``index`` of a function's closure."""
    fn_src: Source
    index: int

    @property
    def base(self):
        return self.fn_src

    def _expr(self, ns):
        return f"{self.fn_src.expr(ns)}.__closure__[{self.index}].cell_contents"


@dataclass(frozen=True)
class ConstSource(Source):
    """An object Kiln holds a reference to (used for identity guards on constants)."""
    obj_id: int
    obj: object = None

    def __hash__(self):
        return hash(self.obj_id)

    def __eq__(self, other):
        return isinstance(other, ConstSource) and other.obj_id == self.obj_id

    def _expr(self, ns):
        return ns.ref(self.obj)


@dataclass(frozen=True)
class FnSource(Source):
    """The function object whose frame is being compiled (first glue argument)."""

    def _expr(self, ns):
        return "___fn"

    def describe(self):
        return "<compiled function>"


def param_source(src: Source, kind: str, name: str) -> Source:
    """Fast path into ``nn.Module`` state: ``mod._parameters['w']`` instead of ``mod.w``."""
    return ItemSource(AttrSource(src, kind), name)


@dataclass(frozen=True)
class CallSource(Source):
    """``fn(base, *args)`` for a pure read method of a builtin container (e.g. dict.get).

    Only built for methods on Kiln's list of side-effect-free reads, with constant
    arguments, so evaluating it in a guard is safe.
    """
    fn_id: int
    base_src: Source
    args: tuple
    fn: object = None
    as_tuple: bool = False

    def __hash__(self):
        return hash((self.fn_id, self.base_src, self.args, self.as_tuple))

    def __eq__(self, other):
        return isinstance(other, CallSource) and (self.fn_id, self.base_src, self.args, self.as_tuple) == (
            other.fn_id, other.base_src, other.args, other.as_tuple)

    @property
    def base(self):
        return self.base_src

    def _expr(self, ns):
        args = "".join(f", {a!r}" if isinstance(a, (int, str, float, bool, type(None))) else f", {ns.ref(a)}"
                       for a in self.args)
        text = f"{ns.ref(self.fn)}({self.base_src.expr(ns)}{args})"
        return f"tuple({text})" if self.as_tuple else text


@dataclass(frozen=True)
class AsTensorSource(Source):
    """A Python number handed to the graph as a 0-d tensor (see values/tensor.py)."""
    base_src: Source
    dtype: object

    @property
    def base(self):
        return self.base_src

    def _expr(self, ns):
        return f"{ns.ref(torch.tensor)}({self.base_src.expr(ns)}, dtype={ns.ref(self.dtype)})"
