"""Portable recipes for the objects generated entry code refers to (the persistent cache).

An entry's guard and glue sources name live objects (``___c3``: ``torch.float32``, a
module class, ``torch.is_grad_enabled``, a module's globals dict ...).  A new process
cannot be handed those objects, only told how to find them again: a *recipe* is plain
data (tuples of str/int/float/bool/None) that ``resolve`` turns back into the object.

The rule: an object gets a recipe only when finding it again gives *the same thing* by
a name that does not depend on the process: a module by its name in ``sys.modules``, a
module's globals by that name, a class or function by ``module`` + ``__qualname__``
(checked by resolving it here and comparing identity), a method descriptor by its
class and name, a dtype / layout / memory format by its name in ``torch``, a literal or
a tuple of portable items by value.  Anything else (a run-time object with no stable
name, a code object made at run time, an object reachable only by its id) raises
``NotPortable`` naming it: the entry holding it is not written (never trust an id
across processes).  ``encode``/``decode`` do the same for the C guard plan's steps
(``runtime.guard_plan.PlanSpec``), whose items are ints, strings, lambda texts and
the same objects.
"""
from __future__ import annotations

import enum
import hashlib
import importlib
import marshal
import sys
import types

import torch

from .runtime import Lambda

_LITERALS = (type(None), bool, int, float, str, bytes, complex)
_TORCH_ENUMS = (torch.dtype, torch.layout, torch.memory_format)
_TORCH_NAMESPACES = ("torch", "torch.nn.functional", "torch._C", "torch._C._nn", "torch._C._VariableFunctions",
                     "torch.special", "torch.linalg", "torch.fft", "operator", "builtins", "math")


class NotPortable(Exception):
    """An object that a new process cannot find again by a stable name."""


#: kind -> (encode(obj) -> tuple of args or None, make(context, *resolved args) -> obj): objects
#: that layers above make at run time from portable parts (api's compiled module classes),
#: rebuilt by the same code in the new process; ``context`` is the loading frame's compiler
_MADE_KINDS: dict = {}


def register_made_kind(kind: str, encode, make) -> None:
    _MADE_KINDS[kind] = (encode, make)


def _by_name(module: str, qualname: str):
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _named(obj) -> tuple | None:
    """``("named", module, qualname)`` where that name leads back to ``obj`` itself."""
    qualname = getattr(obj, "__qualname__", None)
    module = getattr(obj, "__module__", None)
    if module is None and hasattr(obj, "__objclass__"):        # a method / slot descriptor
        module = getattr(obj.__objclass__, "__module__", None)
    if not isinstance(qualname, str) or not isinstance(module, str) or "<" in qualname:
        return None
    for candidate in (module, *_parents(module)):
        try:
            if _by_name(candidate, qualname) is obj:
                return ("named", candidate, qualname)
        except Exception:   # noqa: BLE001 - any failure to import or look up: not this name
            continue
    return None


def _parents(module: str) -> list:
    """``torch._C._nn`` -> ``torch._C``, ``torch``: builtins often name a private module."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def recipe(obj) -> tuple:
    """How a new process finds ``obj`` again; ``NotPortable`` where there is no such way."""
    if type(obj) in _LITERALS:
        if isinstance(obj, float) and obj != obj:
            return ("nan",)
        return ("lit", obj)
    if isinstance(obj, _TORCH_ENUMS):
        name = str(obj).rsplit(".", 1)[-1]
        if getattr(torch, name, None) is obj:
            return ("torch", name)
    if isinstance(obj, torch.device):
        return ("device", str(obj))        # devices compare by value, never by identity
    if type(obj) in (tuple, frozenset):
        return ("tuple" if type(obj) is tuple else "frozenset", tuple(recipe(x) for x in obj))
    if isinstance(obj, types.ModuleType):
        if sys.modules.get(obj.__name__) is obj:
            return ("module", obj.__name__)
        raise NotPortable(f"module {obj.__name__!r} is not the one in sys.modules")
    if type(obj) is dict:
        name = obj.get("__name__")
        if isinstance(name, str) and getattr(sys.modules.get(name), "__dict__", None) is obj:
            return ("globals", name)
        raise NotPortable(f"a dict that is not a module's globals ({len(obj)} keys)")
    if obj is Ellipsis or obj is NotImplemented:
        return ("named", "builtins", "Ellipsis" if obj is Ellipsis else "NotImplemented")
    for kind, (encode, _) in _MADE_KINDS.items():
        parts = encode(obj)
        if parts is not None:
            return ("made", kind, tuple(recipe(p) for p in parts))
    if isinstance(obj, types.CodeType):
        return _code_recipe(obj)
    if isinstance(obj, types.FunctionType):
        return _function_recipe(obj)
    if isinstance(obj, enum.Enum) and type(obj).__members__.get(obj.name) is obj:
        return ("member", recipe(type(obj)), obj.name)
    named = _named(obj)
    if named is not None:
        return named
    name = getattr(obj, "__name__", None)
    if isinstance(name, str):          # torch's builtins: named by the namespace they are exposed in
        for module in _TORCH_NAMESPACES:
            if getattr(sys.modules.get(module), name, None) is obj:
                return ("named", module, name)
    owner = getattr(obj, "__self__", None)            # a builtin bound to a module or class
    if isinstance(obj, types.BuiltinMethodType) and owner is not None and isinstance(owner, (type, types.ModuleType)):
        return ("attr", recipe(owner), obj.__name__)
    raise NotPortable(f"{type(obj).__qualname__} object {_short(obj)} has no stable name")


def _wrapped_chain(module: str, qualname: str):
    """``(hops, object)`` for what ``module.qualname`` holds and each ``__wrapped__`` under
    it (a decorated function's originals share its qualname), at most 8 deep."""
    try:
        found = _by_name(module, qualname)
    except Exception:   # noqa: BLE001 - not found under that name
        return
    for hops in range(8):
        if found is None:
            return
        yield hops, found
        found = getattr(found, "__wrapped__", None)


def _function_recipe(fn) -> tuple:
    """A function as ``("function", module, qualname, hops, digest)``: what that name holds,
    followed ``hops`` times along ``__wrapped__`` (the original of a decorated function,
    which has the same qualname), with the same code and defaults (``function_digest``)."""
    qualname, module = fn.__qualname__, fn.__module__
    if isinstance(module, str) and "<" not in qualname:
        for hops, found in _wrapped_chain(module, qualname):
            if found is fn:
                return ("function", module, qualname, hops, function_digest(fn))
    raise NotPortable(f"function {qualname} has no stable name")


_CODE_FIELDS = ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_flags", "co_code", "co_names",
                "co_varnames", "co_freevars", "co_cellvars", "co_filename", "co_name", "co_qualname",
                "co_firstlineno", "co_linetable", "co_exceptiontable")


def code_digest(code) -> str:
    """A hash of a code object's whole content, nested code constants included: its
    ``marshal`` form at version 2, which has no back-references (from version 3 on, an
    object is written as a reference only where its reference count says it is shared,
    so one code object hashes differently from call to call); field by field where
    that version cannot write a constant."""
    try:
        return hashlib.sha256(marshal.dumps(code, 2)).hexdigest()
    except ValueError:
        h = hashlib.sha256()
        _feed_code(h, code)
        return h.hexdigest()


def _feed_code(h, code) -> None:
    for name in _CODE_FIELDS:
        h.update(repr(getattr(code, name, None)).encode() + b"\0")
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            h.update(b"<code>")
            _feed_code(h, const)
        else:
            h.update(repr((type(const).__name__, const)).encode() + b"\0")


def function_digest(fn) -> str:
    """What a guard ``f is <that function>`` stands for across processes: the traced body
    (its code object's whole content) and its defaults, by value (a default that has no
    recipe leaves the function without one)."""
    kwdefaults = tuple((k, recipe(v)) for k, v in sorted((fn.__kwdefaults__ or {}).items()))
    text = code_digest(fn.__code__) + repr((recipe(fn.__defaults__), kwdefaults))
    return hashlib.sha256(text.encode()).hexdigest()


def _code_recipe(code) -> tuple:
    """A code object as the function of a stable name it belongs to: ``("code", module,
    qualname, hops, path, digest)``: that function followed ``hops`` times along
    ``__wrapped__`` (a decorated function's original), then down its code's constants
    along ``path`` (a function defined inside it: a decorator's ``<locals>.wrapper``),
    with the content's hash, checked on load (an edited body is another code)."""
    module = next((name for name, m in list(sys.modules.items())
                   if getattr(m, "__file__", None) == code.co_filename), None)
    qualname = getattr(code, "co_qualname", code.co_name)
    outer = qualname.split(".<locals>", 1)[0]
    digest = code_digest(code)
    if module is not None and "<" not in outer:
        for hops, fn in _wrapped_chain(module, outer):
            path = _path_in_consts(getattr(fn, "__code__", None), code)
            if path is not None:
                return ("code", module, outer, hops, path, digest)
    raise NotPortable(f"code object {qualname} ({code.co_filename}:{code.co_firstlineno}) is not the code "
                      f"of a function with a stable name")


def _path_in_consts(root, code, depth: int = 0):
    """The indices from ``root`` down its nested code constants to ``code``, or None."""
    if root is code:
        return ()
    if not isinstance(root, types.CodeType) or depth > 6:
        return None
    for i, const in enumerate(root.co_consts):
        if isinstance(const, types.CodeType):
            rest = _path_in_consts(const, code, depth + 1)
            if rest is not None:
                return (i, *rest)
    return None


def _short(obj) -> str:
    try:
        text = repr(obj)
    except Exception:   # noqa: BLE001 - a broken __repr__ only makes the message shorter
        text = "?"
    return text if len(text) <= 60 else text[:57] + "..."


class Resolver:
    """Resolves the recipes of one load, each distinct recipe once (an entry names the
    same types and functions many times; a function's digest is computed once);
    ``compiler``: the loading frame's, for the made kinds."""

    def __init__(self, compiler=None):
        self.compiler = compiler
        self._memo: dict = {}

    def get(self, r: tuple):
        # only recipes of names are shared: literals are cheap, and as keys they would
        # mix (``("lit", 1) == ("lit", True)``, ``0.0 == -0.0``); a list is fresh each time
        if r[0] not in _NAMED_KINDS:
            return _resolve(r, self)
        obj = self._memo.get(r, _MISSING)
        if obj is _MISSING:
            obj = self._memo[r] = _resolve(r, self)
        return obj


_NAMED_KINDS = frozenset(("named", "function", "code", "module", "globals", "torch", "member", "device"))
_MISSING = object()


def resolve(r: tuple, compiler=None):
    """The object recipe ``r`` names (``Resolver`` for many)."""
    return Resolver(compiler).get(r)


def _resolve(r: tuple, context):
    """The object recipe ``r`` names (raises where it cannot be found: the entry is stale)."""
    kind = r[0]
    if kind == "made":
        return _MADE_KINDS[r[1]][1](context.compiler, *(context.get(p) for p in r[2]))
    if kind == "lit":
        return r[1]
    if kind == "nan":
        return float("nan")
    if kind == "torch":
        return getattr(torch, r[1])
    if kind == "device":
        return torch.device(r[1])
    if kind == "tuple":
        return tuple(context.get(x) for x in r[1])
    if kind == "list":
        return [context.get(x) for x in r[1]]
    if kind == "frozenset":
        return frozenset(context.get(x) for x in r[1])
    if kind == "module":
        return importlib.import_module(r[1])
    if kind == "globals":
        return importlib.import_module(r[1]).__dict__
    if kind == "named":
        return _by_name(r[1], r[2])
    if kind == "function":
        fn = _by_name(r[1], r[2])
        for _ in range(r[3]):
            fn = fn.__wrapped__
        if function_digest(fn) != r[4]:
            raise ValueError(f"{r[1]}.{r[2]} has other code or defaults than when the entry was written")
        return fn
    if kind == "code":
        fn = _by_name(r[1], r[2])
        for _ in range(r[3]):
            fn = fn.__wrapped__
        code = fn.__code__
        for i in r[4]:
            code = code.co_consts[i]
        if code_digest(code) != r[5]:
            raise ValueError(f"the code of {r[1]}.{r[2]} changed since the entry was written")
        return code
    if kind == "member":
        return context.get(r[1]).__members__[r[2]]
    if kind == "attr":
        return getattr(context.get(r[1]), r[2])
    raise ValueError(f"unknown recipe kind {kind!r}")


# -- the guard plan's steps ---------------------------------------------------------------
def encode_steps(steps: list) -> list:
    """A ``PlanSpec``'s steps as recipes (a ``Lambda`` keeps its text)."""
    return [tuple(_encode_item(x) for x in step) for step in steps]


def _encode_item(x):
    if isinstance(x, Lambda):
        return ("lambda", x.text)
    if type(x) is list:       # the plan's own data (a key list compared by value)
        return ("list", tuple(recipe(i) for i in x))
    return recipe(x)


def decode_steps(steps: list, resolver: Resolver) -> list:
    return [tuple(Lambda(x[1]) if x[0] == "lambda" else resolver.get(x) for x in step) for step in steps]


# -- graphs ---------------------------------------------------------------------------------
def encode_graph(graph) -> list:
    """An fx graph as plain data: per node ``(op, name, target recipe, args, kwargs)`` with
    other nodes by name (no metadata: fake tensors, stack traces stay in this process)."""
    nodes = []
    for node in graph.nodes:
        if node.op not in ("placeholder", "call_function", "call_method", "output"):
            raise NotPortable(f"graph node {node.name} is a {node.op}")
        target = node.target if isinstance(node.target, str) else _target_recipe(node.target)
        nodes.append((node.op, node.name, target, _encode_arg(node.args), _encode_arg(node.kwargs)))
    return nodes


def _target_recipe(target) -> tuple:
    if isinstance(target, torch._ops.OpOverload):
        return ("op", target.namespace, target._opname, target._overloadname)
    if isinstance(target, torch._ops.OpOverloadPacket):
        ns, name = target._qualified_op_name.split("::")
        return ("op", ns, name, None)
    return recipe(target)


def _encode_arg(a):
    if isinstance(a, torch.fx.Node):
        return ("node", a.name)
    if type(a) in (list, tuple):
        return ("list" if type(a) is list else "tuple", tuple(_encode_arg(x) for x in a))
    if type(a) is dict:
        return ("dict", tuple((k, _encode_arg(v)) for k, v in a.items()))
    if type(a) is slice:
        return ("slice", _encode_arg(a.start), _encode_arg(a.stop), _encode_arg(a.step))
    if isinstance(a, torch.fx.immutable_collections.immutable_list):
        return ("list", tuple(_encode_arg(x) for x in a))
    if isinstance(a, torch.fx.immutable_collections.immutable_dict):
        return ("dict", tuple((k, _encode_arg(v)) for k, v in a.items()))
    return ("obj", recipe(a))


def decode_graph(nodes: list, class_name: str, resolver: Resolver | None = None):
    """The GraphModule of ``encode_graph``'s data."""
    resolver = resolver or Resolver()
    graph = torch.fx.Graph()
    env: dict = {}

    def arg(a):
        kind = a[0]
        if kind == "node":
            return env[a[1]]
        if kind in ("list", "tuple"):
            items = [arg(x) for x in a[1]]
            return items if kind == "list" else tuple(items)
        if kind == "dict":
            return {k: arg(v) for k, v in a[1]}
        if kind == "slice":
            return slice(arg(a[1]), arg(a[2]), arg(a[3]))
        return resolver.get(a[1])

    for op, name, target, args, kwargs in nodes:
        if not isinstance(target, str):
            target = _resolve_target(target, resolver)
        if op == "output":
            graph.output(arg(args)[0])
            continue
        node = graph.create_node(op, target, arg(args), arg(kwargs), name=name)
        env[name] = node
    return torch.fx.GraphModule(torch.nn.Module(), graph, class_name=class_name)


def _resolve_target(r: tuple, resolver: Resolver):
    if r[0] == "op":
        packet = getattr(getattr(torch.ops, r[1]), r[2])
        return packet if r[3] is None else getattr(packet, r[3])
    return resolver.get(r)
