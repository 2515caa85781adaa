"""Callable values: user functions (inlined), closures made in the frame, bound
methods, ``functools.partial``, and cells.

Calling a user function means tracing its bytecode in a child interpreter that
shares the graph, guards and side effects of the frame being compiled.
"""
from __future__ import annotations

import functools
import inspect
import types

import torch

from ..basics import literal
from ...exc import Unsupported
from ..basics import AttrSource, ClosureSource, ItemSource
from .base import AttributeMissing, ConstantValue, Value, const, is_literal, raise_python
from .containers import DictValue, TupleValue


class CellValue(Value):
    """A closure cell.  ``source`` reads the cell's contents at run time (if real)."""

    def __init__(self, value: Value | None = None, source=None, real_cell=None):
        self.value = value
        self.source = source
        self.real_cell = real_cell

    def get(self, tx) -> Value:
        if self.value is None:
            if self.real_cell is not None:
                try:
                    contents = self.real_cell.cell_contents
                except ValueError:
                    raise Unsupported("reading a free variable before it is assigned")
                self.value = tx.wrap(contents, self.source)
            else:
                raise Unsupported("reading a free variable before it is assigned")
        return self.value

    def set(self, tx, value: Value):
        if self.real_cell is not None:
            tx.state.side_effects.store_cell(self, value)
        else:
            tx.state.side_effects.check_local_write(self, "a closure variable")
        self.value = value


def bind_arguments(code: types.CodeType, name: str, defaults: list, kwdefaults: dict, args: list, kwargs: dict) -> dict:
    """Python's argument binding, done on Values (no inspect.Signature involved)."""
    nargs = code.co_argcount
    nposonly = code.co_posonlyargcount
    nkwonly = code.co_kwonlyargcount
    names = code.co_varnames
    pos_names = names[:nargs]
    kwonly_names = names[nargs:nargs + nkwonly]
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    bound: dict = {}
    if len(args) > nargs and not has_varargs:
        raise Unsupported(f"{name}() takes {nargs} positional arguments but {len(args)} were given")
    for n, a in zip(pos_names, args):
        bound[n] = a
    extra_kw = {}
    for k, v in kwargs.items():
        if k in pos_names[nposonly:] or k in kwonly_names:
            if k in bound:
                raise Unsupported(f"{name}() got multiple values for argument {k!r}")
            bound[k] = v
        elif has_varkw:
            extra_kw[k] = v
        else:
            raise Unsupported(f"{name}() got an unexpected keyword argument {k!r}")
    first_default = nargs - len(defaults)
    for i, n in enumerate(pos_names):
        if n not in bound:
            if i >= first_default:
                bound[n] = defaults[i - first_default]
            else:
                raise Unsupported(f"{name}() missing required argument {n!r}")
    for n in kwonly_names:
        if n not in bound:
            if n in kwdefaults:
                bound[n] = kwdefaults[n]
            else:
                raise Unsupported(f"{name}() missing required keyword-only argument {n!r}")
    idx = nargs + nkwonly
    if has_varargs:
        bound[names[idx]] = TupleValue(args[nargs:])
        idx += 1
    if has_varkw:
        bound[names[idx]] = DictValue(extra_kw)
    return bound


class BaseFunctionValue(Value):
    """Something whose bytecode Kiln inlines."""

    def python_type(self):
        return types.FunctionType

    def call(self, tx, args, kwargs):
        code, fn_globals, defaults, kwdefaults, closure = self.parts(tx)
        bound = bind_arguments(code, code.co_name, defaults, kwdefaults, list(args), dict(kwargs))
        return tx.inline_call(self, code, fn_globals, bound, closure)

    def getattr(self, tx, name):
        code, fn_globals, defaults, kwdefaults, _ = self.parts(tx)
        if name == "__name__" or name == "__qualname__":
            return const(code.co_name)
        if name == "__code__":
            return const(code)
        if name == "__class__":
            return tx.wrap(types.FunctionType, None)
        if name == "__module__":
            return const(fn_globals.get("__name__"))
        if name == "__defaults__":
            return TupleValue(defaults) if defaults else const(None)
        if name == "__kwdefaults__":
            return DictValue(kwdefaults) if kwdefaults else const(None)
        if name == "__doc__":
            return const(code.co_consts[0] if code.co_consts and isinstance(code.co_consts[0], str) else None)
        if name == "__type_params__" and hasattr(types.FunctionType, name):
            return const(())   # (3.12+) a def without [T]; a generic one has it stored by its intrinsic
        if not hasattr(types.FunctionType, name):
            # a function made in the frame has an empty __dict__: the name is missing, as in eager
            raise AttributeMissing(f"'function' object has no attribute {name!r}")
        raise Unsupported(f"attribute {name!r} of a function")


# ``torch._disable_dynamo(fn)``'s wrapper: torch's own "run this as Python" mark (DDP's
# ``_inside_ddp_forward`` must really set the active module; ``Optimizer.zero_grad``)
_TORCH_DISABLE_WRAPPER = torch._disable_dynamo(lambda: None).__code__


class UserFunctionValue(BaseFunctionValue):
    """A real Python function object that existed before tracing."""

    def call(self, tx, args, kwargs):
        fn = self.fn
        if fn.__code__ is _TORCH_DISABLE_WRAPPER:
            raise Unsupported(f"{fn.__qualname__} is marked torch._disable_dynamo; it runs as Python")
        if getattr(fn, "_kiln_disable", False) or getattr(fn, "_torchdynamo_disable", False):
            # a method marked kiln.disable / torch.compiler.disable (functions reached as
            # globals are refused when wrapped: callables.DisabledFunctionValue)
            orig = getattr(fn, "_torchdynamo_orig_callable", None)
            mod = getattr(orig, "__module__", "") or ""
            if isinstance(orig, types.FunctionType) and (mod == "torch" or mod.startswith("torch.")) \
                    and not getattr(fn, "_kiln_disable", False):
                # torch.compile's own patch on a torch method (its TorchPatcher wraps every
                # optimizer's _init_group once torch.compile has run): a limit of that
                # tracer, not a user's request; Kiln traces the original
                src = AttrSource(self.source, "_torchdynamo_orig_callable") if self.source else None
                return tx.wrap(orig, src).call(tx, args, kwargs)
            raise Unsupported(f"{fn.__qualname__} is excluded from compilation (kiln.disable / "
                              f"torch.compiler.disable)")
        return super().call(tx, args, kwargs)

    def __init__(self, fn: types.FunctionType, source=None):
        self.fn = fn
        self.source = source

    def real_object(self):
        return self.fn

    def describe(self):
        return f"function {self.fn.__qualname__}"

    def parts(self, tx):
        fn = self.fn
        defaults = []
        for i, d in enumerate(fn.__defaults__ or ()):
            src = ItemSource(AttrSource(self.source, "__defaults__"), i) if self.source else None
            defaults.append(tx.wrap(d, src))
        kwdefaults = {}
        for k, d in (fn.__kwdefaults__ or {}).items():
            src = ItemSource(AttrSource(self.source, "__kwdefaults__"), k) if self.source else None
            kwdefaults[k] = tx.wrap(d, src)
        closure = []
        for i, cell in enumerate(fn.__closure__ or ()):
            cv = tx.state.cell_for(cell, ClosureSource(self.source, i) if self.source else None)
            closure.append(cv)
        return fn.__code__, fn.__globals__, defaults, kwdefaults, closure

    def getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__", "__doc__", "__type_params__") and hasattr(self.fn, name):
            return const(getattr(self.fn, name))
        if name in self.fn.__dict__:
            return tx.wrap(self.fn.__dict__[name], AttrSource(self.source, name) if self.source else None)
        if name == "__wrapped__" and hasattr(self.fn, "__wrapped__"):
            return tx.wrap(self.fn.__wrapped__, None)
        if name in ("__dict__", "__annotations__"):     # read by functools.wraps
            return tx.wrap(getattr(self.fn, name), AttrSource(self.source, name) if self.source else None)
        if name not in self.fn.__dict__ and not hasattr(types.FunctionType, name):
            # missing, as in eager: guarded, since a later ``fn.attr = ...`` would add it
            if self.source is not None:
                tx.state.guards.add("const", self.source, f"not hasattr({{v}}, {literal(name)})",
                                    f"{self.source.describe()} has no attribute {name!r}", plan=(("hasattr", name, False),))
            raise AttributeMissing(f"'function' object has no attribute {name!r}")
        return super().getattr(tx, name)

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.source_expr(self.source)
        return cg.ref(self.fn)


class NestedFunctionValue(BaseFunctionValue):
    """A function made by MAKE_FUNCTION while tracing (lambdas, inner defs, comprehensions)."""

    def __init__(self, code, fn_globals, qualname, defaults, kwdefaults, closure):
        self.code = code
        self.fn_globals = fn_globals
        self.qualname = qualname
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.closure = closure

    def describe(self):
        return f"function {self.qualname}"

    def parts(self, tx):
        return self.code, self.fn_globals, list(self.defaults), dict(self.kwdefaults), list(self.closure)

    # what the frame wrote on the function (``fn.tag = 3``, ``functools.wraps``): its
    # ``__dict__`` as a dict Value (made when first needed), and the special names set
    annotations = None        # MAKE_FUNCTION's annotations (a tuple of name, value pairs), if any
    attr_dict = None
    special = None

    def _dict(self):
        if self.attr_dict is None:
            self.attr_dict = DictValue({})
        return self.attr_dict

    def getattr(self, tx, name):
        if self.special and name in self.special:
            return self.special[name]
        if name in ("__name__", "__qualname__"):
            return const(self.qualname.rsplit(".", 1)[-1] if name == "__name__" else self.qualname)
        if name == "__dict__":
            return self._dict()
        if self.attr_dict is not None and name in self.attr_dict.items:
            return self.attr_dict.items[name]
        if name == "__annotations__":
            # made on first read and kept, as CPython does
            pairs = self.annotations.unpack(tx) if self.annotations is not None else []
            made = DictValue({k.as_constant(): v for k, v in zip(pairs[::2], pairs[1::2])})
            self._store("__annotations__", made)
            return made
        return super().getattr(tx, name)

    def _store(self, name, value):
        if self.special is None:
            self.special = {}
        self.special[name] = value

    def setattr(self, tx, name, value):
        if name in ("__name__", "__qualname__"):
            if not (isinstance(value, ConstantValue) and isinstance(value.value, str)):
                raise_python(TypeError, f"{name} must be set to a string object")
            if name == "__qualname__":
                self.qualname = value.value
            else:
                self._store(name, value)
        elif name in ("__module__", "__doc__", "__annotations__", "__type_params__"):
            self._store(name, value)
        elif name == "__dict__" or name.startswith("__") and hasattr(types.FunctionType, name):
            raise Unsupported(f"setting {name!r} on a function made in the frame")
        else:
            self._dict().items[name] = value   # a plain attribute lives in the function's __dict__

    def contents(self):
        return [*([self.attr_dict] if self.attr_dict is not None else []), *(self.special or {}).values()]

    def reconstruct(self, cg):
        return cg.nested_function(self)


class BoundMethodValue(Value):
    def __init__(self, func: Value, self_value: Value, source=None):
        self.func = func
        self.self_value = self_value
        self.source = source

    def python_type(self):
        return types.MethodType

    def describe(self):
        return f"bound method {self.func.describe()} of {self.self_value.describe()}"

    def call(self, tx, args, kwargs):
        return self.func.call(tx, [self.self_value, *args], kwargs)

    def getattr(self, tx, name):
        if name == "__self__":
            return self.self_value
        if name == "__func__":
            return self.func
        if name == "__class__":
            return tx.wrap(types.MethodType, None)   # not the function's: a method's own type
        return self.func.getattr(tx, name)

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.source_expr(self.source)
        return f"{cg.ref(types.MethodType)}({cg.expr(self.func)}, {cg.expr(self.self_value)})"

    def contents(self):
        return [self.func, self.self_value]


class PartialValue(Value):
    def __init__(self, func: Value, args: list, kwargs: dict, source=None, real=None):
        self.func, self.args, self.kwargs = func, list(args), dict(kwargs)
        self.source = source
        self.real = real

    def python_type(self):
        return functools.partial

    def call(self, tx, args, kwargs):
        return self.func.call(tx, [*self.args, *args], {**self.kwargs, **kwargs})

    def getattr(self, tx, name):
        if name == "func":
            return self.func
        if name == "args":
            return TupleValue(self.args)
        if name == "keywords":
            return DictValue(self.kwargs)
        raise Unsupported(f"functools.partial has no supported attribute {name!r}")

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.source_expr(self.source)
        parts = [cg.expr(self.func)] + [cg.expr(a) for a in self.args] + [f"{k}={cg.expr(v)}" for k, v in self.kwargs.items()]
        return f"{cg.ref(functools.partial)}({', '.join(parts)})"

    def contents(self):
        return [self.func, *self.args, *self.kwargs.values()]


class CachedFunctionValue(Value):
    """A ``functools.lru_cache`` / ``functools.cache`` wrapper called in the frame.

    What eager observes of such a call is its result (on a hit, the very object cached
    earlier), the wrapped function's side effects (on a miss only) and the cache's
    statistics.  So:

    * constant arguments: the real wrapper is called at trace time, exactly once, as eager
      would call it, and its result is used as a constant (a tensor result is the cached
      tensor itself, a graph input by identity);
    * tensor (and constant) arguments: the wrapped function is traced, once per distinct
      argument tuple in the frame, so repeated calls give the same Value as a hit would;
      a body with Python side effects is refused (eager would run them on misses only);
    * anything else runs as Python.

    The difference left is the statistics: compiled calls do not count as hits or misses.
    """

    def __init__(self, fn, source=None, realize=None):
        self.fn = fn
        self.source = source
        self.calls: dict = {}       # argument key -> result Value, for this capture
        # turns an argument Value into the real object it stands for (a module, a logger,
        # a class): ``callables.realize``, passed in by the builder to keep the layers
        self.realize = realize

    def real_object(self):
        return self.fn

    def python_type(self):
        return type(self.fn)

    def describe(self):
        return f"cached function {getattr(self.fn, '__qualname__', self.fn)}"

    def getattr(self, tx, name):
        if name in ("__wrapped__", "__name__", "__qualname__", "__module__", "__doc__"):
            return tx.wrap(getattr(self.fn, name), AttrSource(self.source, name) if self.source else None)
        raise Unsupported(f"attribute {name!r} of {self.describe()} (the cache's state runs as Python)")

    def call(self, tx, args, kwargs):
        values = [*args, *kwargs.values()]
        if all(isinstance(v, ConstantValue) and is_literal(v.value) for v in values):
            try:
                result = self.fn(*[a.value for a in args], **{k: v.value for k, v in kwargs.items()})
            except Exception as e:   # not cached: eager raises it on every call
                raise Unsupported(f"{self.describe()} raised {type(e).__name__} at trace time") from e
            if not _immutable_result(result):
                raise Unsupported(f"{self.describe()} returned a mutable {type(result).__name__}")
            return tx.wrap(result, None)
        if not all(isinstance(v, ConstantValue) and is_literal(v.value) or _is_tensor_value(v) for v in values):
            return self._call_with_real_objects(tx, args, kwargs)
        key = tuple((k, v.value if isinstance(v, ConstantValue) else id(v))
                    for k, v in [*enumerate(args), *sorted(kwargs.items())])
        if key not in self.calls:
            se = tx.state.side_effects
            before = _effects(se)
            result = tx.wrap(self.fn.__wrapped__, None).call(tx, args, kwargs)
            if _effects(se) != before:
                raise Unsupported(f"{self.describe()} has Python side effects, which eager runs on cache misses "
                                  f"only (it runs as Python)")
            self.calls[key] = result
        return self.calls[key]

    def _call_with_real_objects(self, tx, args, kwargs):
        """Arguments that stand for real objects (``logger.warning_once(msg)``: the logger):
        the real wrapper is called at trace time, as eager would call it first, so the
        body runs when eager's would and the cache holds what eager's would; the result
        is a constant (or the cached object itself).  Anything else runs as Python."""
        if self.realize is None:
            raise Unsupported(f"{self.describe()} called with arguments that are not constants or tensors")
        try:
            real_args = [self._real(a, tx) for a in args]
            real_kwargs = {k: self._real(v, tx) for k, v in kwargs.items()}
        except Unsupported:
            raise Unsupported(f"{self.describe()} called with arguments that are not real objects "
                              f"(it runs as Python)") from None
        if any(isinstance(a, torch.Tensor) for a in [*real_args, *real_kwargs.values()]):
            raise Unsupported(f"{self.describe()} called with a tensor among other objects (it runs as Python)")
        try:
            hash((tuple(real_args), tuple(real_kwargs.items())))
        except TypeError:
            raise Unsupported(f"{self.describe()} called with unhashable arguments (eager raises)") from None
        try:
            result = self.fn(*real_args, **real_kwargs)
        except Exception as e:   # not cached: eager raises it on every call
            raise Unsupported(f"{self.describe()} raised {type(e).__name__} at trace time") from e
        return tx.wrap(result, None)

    def _real(self, v: Value, tx):
        """A constant (a tuple of them made in the frame too), or the real object ``v`` is."""
        try:
            return v.as_constant()
        except Unsupported:
            return self.realize(v, tx)

    def reconstruct(self, cg):
        return cg.source_expr(self.source) if self.source is not None else cg.ref(self.fn)


def _effects(se) -> tuple:
    """What the side-effect log holds (which writes, to what values), to compare."""
    return tuple(tuple((k, id(w[-1])) for k, w in table.items())
                 for table in (se.attr_writes, se.global_writes, se.cell_writes)) + (tuple(se.mutated_containers),)


def _is_tensor_value(v: Value) -> bool:
    t = v.python_type() if not isinstance(v, ConstantValue) else None
    return isinstance(t, type) and issubclass(t, torch.Tensor)


def _immutable_result(obj) -> bool:
    if isinstance(obj, torch.Tensor) or is_literal(obj):
        return True
    return type(obj) in (tuple, frozenset) and all(_immutable_result(i) for i in obj)
