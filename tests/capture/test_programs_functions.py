"""Loads and stores of every scope (fast, global, closure cells, attributes), and calls
Kiln inlines: user functions, defaults, keyword-only / positional-only arguments,
*args / **kwargs, lambdas, closures, functools.partial, methods, properties,
decorators and nested ``kiln.compile``'d functions."""
from __future__ import annotations

import functools

import torch

import kiln
from .capture_harness import Case, I, parametrize, run_case


def x1(r):
    return (r.randn(3, 4),)


def xy(r):
    return r.randn(3, 4), r.randn(3, 4)


# -- globals ----------------------------------------------------------------------------------
SCALE = 3.0
WEIGHT = torch.linspace(-1, 1, 4)
CONFIG = {"eps": 1e-5, "mode": "sum", "layers": [2, 3]}
STATE = {"calls": 0}
COUNTER = 0
LAST = None


def global_reads(x):
    return (x * SCALE + WEIGHT) / (x.abs() + CONFIG["eps"]), CONFIG["layers"][1]


def global_store_int(x):
    global COUNTER
    COUNTER += 1
    return x + COUNTER


def global_store_tensor(x):
    global LAST
    LAST = x * 2
    return LAST + 1


def global_dict_mutation(x):
    STATE["calls"] += 1
    STATE["last_sum"] = x.sum()
    return x - 1


def _reset_globals():
    global COUNTER, LAST
    COUNTER, LAST = 0, None
    STATE.clear()
    STATE["calls"] = 0


def _global_snapshot():
    return {"COUNTER": COUNTER, "LAST": LAST, "STATE": dict(STATE)}


GLOBALS = [
    Case("global_reads", global_reads, x1, 1, 5),
    Case("global_store_int", global_store_int, x1, 1, 1, setup=_reset_globals, state=_global_snapshot),
    Case("global_store_tensor", global_store_tensor, x1, 1, 2, setup=_reset_globals, state=_global_snapshot),
    Case("global_dict_mutation", global_dict_mutation, x1, 1, 2, setup=_reset_globals, state=_global_snapshot),
]


# -- locals and closure cells ------------------------------------------------------------------
def delete_local(x):
    y = x + 1
    z = y * 2
    del y
    return z


def inner_closure(x):
    scale = 2.0

    def inner(t):
        return t * scale
    scale = 4.0           # the cell is read at call time
    return inner(x)


def nonlocal_counter(x):
    count = 0

    def bump(t):
        nonlocal count
        count += 1
        return t + count
    y = bump(x)
    y = bump(y)
    return y, count


def make_compiled_closure():
    offset = torch.ones(4)
    factor = {"k": 2}

    def fn(x):
        return x * factor["k"] + offset
    return fn


CLOSURE_FN = make_compiled_closure()


def make_cell_writer():
    box = {"hits": 0}
    total = 0

    def fn(x):
        nonlocal total
        total = total + 1
        box["hits"] += 1
        return x * total

    def reset():
        nonlocal total
        total = 0
        box["hits"] = 0

    def snapshot():
        return total, dict(box)
    return fn, reset, snapshot


CELL_FN, CELL_RESET, CELL_SNAPSHOT = make_cell_writer()


CELLS = [
    Case("delete_local", delete_local, x1, 1, 2),
    Case("inner_closure", inner_closure, x1, 1, 1),
    Case("nonlocal_counter", nonlocal_counter, x1, 1, 2),
    Case("compiled_fn_is_closure", CLOSURE_FN, x1, 1, 2),
    Case("compiled_fn_writes_cell", CELL_FN, x1, 1, 1, setup=CELL_RESET, state=CELL_SNAPSHOT),
]


# -- user function calls --------------------------------------------------------------------------
def helper_affine(t, w, b=0.0):
    return t * w + b


def helper_kwonly(t, *, scale=1.0, shift):
    return t * scale + shift


def helper_posonly(t, s, /, k=2):
    return t * s + k


def helper_varargs(*ts, **opts):
    out = ts[0]
    for t in ts[1:]:
        out = out + t
    if opts.get("negate"):
        out = -out
    return out, sorted(opts)


def calls_defaults(x):
    return helper_affine(x, 2.0), helper_affine(x, 2.0, 1.0), helper_affine(x, w=3.0, b=x)


def calls_kwonly(x):
    return helper_kwonly(x, shift=1.0), helper_kwonly(x, scale=2.0, shift=x)


def calls_posonly(x):
    return helper_posonly(x, 3.0), helper_posonly(x, 1.0, k=x)


def calls_varargs(x, y):
    a, keys = helper_varargs(x, y, x, negate=True, tag="t")
    b, _ = helper_varargs(y)
    return a, b, keys


def varargs_entry(*tensors, scale=1.0, **named):
    out = sum(tensors) * scale
    for k in sorted(named):
        out = out + named[k]
    return out


def factorial(n):
    return 1 if n <= 1 else n * factorial(n - 1)


def calls_recursive(x):
    return x * factorial(5)


def apply_twice(fn, t):
    return fn(fn(t))


def calls_higher_order(x):
    return apply_twice(torch.relu, x - 0.5), apply_twice(lambda t: t * 3, x)


def calls_return_function(x):
    def make_scaler(k):
        def scaler(t):
            return t * k
        return scaler
    double, triple = make_scaler(2), make_scaler(3)
    return double(x) + triple(x)


def calls_multiple_returns(x):
    def stats(t):
        return t.mean(), t.std(), t.shape
    m, s, shape = stats(x)
    return (x - m) / s, shape


def calls_torch_kwargs(x):
    return torch.sum(x, dim=1, keepdim=True), torch.cat(tensors=[x, x], dim=-1), x.sum(dim=(0, 1))


def calls_function_attrs(x):
    def named_helper(t):
        return t
    if named_helper.__name__ == "named_helper" and helper_affine.__name__.startswith("helper"):
        return named_helper(x) + 1
    return x


def _default_list(t, sizes=[1, 2, 3]):  # noqa: B006 - a mutable default, read only
    return t * sum(sizes)


CALLS = [
    Case("calls_defaults", calls_defaults, x1, 1, 6),
    Case("calls_kwonly", calls_kwonly, x1, 1, 4),
    Case("calls_posonly", calls_posonly, x1, 1, 4),
    Case("calls_varargs", calls_varargs, xy, 1, 3),
    Case("varargs_entry", varargs_entry, lambda r: I(r.randn(2), r.randn(2), scale=2.0, b=r.randn(2), a=1.0),
         1, 5),
    Case("calls_recursive", calls_recursive, x1, 1, 1),
    Case("calls_higher_order", calls_higher_order, x1, 1, 5),
    Case("calls_return_function", calls_return_function, x1, 1, 3),
    Case("calls_multiple_returns", calls_multiple_returns, x1, 1, 4),
    Case("calls_torch_kwargs", calls_torch_kwargs, x1, 1, 3),
    Case("calls_function_attrs", calls_function_attrs, x1, 1, 1),
    Case("calls_mutable_default", lambda x: _default_list(x), x1, 1, 1),
]


# -- lambdas and functools.partial ------------------------------------------------------------------
ACT = lambda t: torch.tanh(t) * 2  # noqa: E731
PARTIAL_GLOBAL = functools.partial(helper_affine, w=0.5)
PARTIAL_TORCH = functools.partial(torch.clamp, min=-0.1)


def lambdas(x):
    sq = lambda t: t * t  # noqa: E731
    add = lambda a, b=1.0: a + b  # noqa: E731
    return sq(x), add(x), add(x, x), ACT(x), (lambda *a: len(a))(1, 2, 3)


def partials(x):
    p = functools.partial(helper_affine, x, b=1.0)
    q = functools.partial(helper_kwonly, shift=2.0)
    return p(2.0), q(x, scale=0.5), PARTIAL_GLOBAL(x), PARTIAL_GLOBAL(x, b=x), PARTIAL_TORCH(x)


def partial_of_lambda(x):
    f = functools.partial(lambda a, b, c=0: a * b + c, c=1)
    return f(x, 3), f(x, b=x)


def sort_with_lambda_key(xs):
    order = sorted(range(len(xs)), key=lambda i: -xs[i].shape[0])
    return [xs[i] * 1 for i in order]


LAMBDAS = [
    Case("lambdas", lambdas, x1, 1, 5),
    Case("partials", partials, x1, 1, 9),
    Case("partial_of_lambda", partial_of_lambda, x1, 1, 4),
    Case("sort_with_lambda_key", sort_with_lambda_key,
         lambda r: ([r.randn(1, 2), r.randn(3, 2), r.randn(2, 2)],), 1, 3),
]


# -- methods, properties, decorators on user classes ---------------------------------------------
class Scaler:
    default = 2.0

    def __init__(self, k):
        self.k = k

    def apply(self, t):
        return t * self.k

    @classmethod
    def make(cls, k):
        return cls(k)

    @staticmethod
    def shift(t):
        return t + 1

    @property
    def doubled(self):
        return self.k * 2

    @doubled.setter
    def doubled(self, v):
        self.k = v / 2


class OffsetScaler(Scaler):
    def __init__(self, k, off):
        super().__init__(k)
        self.off = off

    def apply(self, t):
        return super().apply(t) + self.off


class Accumulator:
    def __init__(self):
        self.total = None
        self.steps = 0

    def __call__(self, t):
        self.total = t if self.total is None else self.total + t
        self.steps += 1
        return self.total


def methods_on_input(s, x):
    return s.apply(x), Scaler.shift(x), s.doubled, Scaler.apply(s, x), getattr(s, "apply")(x)


def methods_on_new_object(x):
    s = Scaler.make(3.0)
    s.doubled = 10.0
    o = OffsetScaler(2.0, x)
    return s.apply(x), s.k, o.apply(x), isinstance(o, Scaler), o.default


def mutate_input_object(s, x):
    s.k = s.k + 1
    s.last = x * s.k
    return s.apply(x)


def callable_object(acc, x, y):
    acc(x)
    acc(y)
    return acc(x * 2), acc.steps


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        return out * 1.0
    return wrapper


@logged
def decorated_helper(t, k=1):
    return t + k


def calls_decorated(x):
    return decorated_helper(x), decorated_helper(x, k=x), decorated_helper.__name__


METHODS = [
    Case("methods_on_input", methods_on_input, lambda r: I(Scaler(1.5), r.randn(3)), 1, 4),
    Case("methods_on_new_object", methods_on_new_object, x1, 1, 3),
    Case("mutate_input_object", mutate_input_object, lambda r: I(Scaler(1.5), r.randn(3)), 1, 2),
    Case("callable_object", callable_object, lambda r: I(Accumulator(), r.randn(3), r.randn(3)), 1, 3),
    Case("calls_decorated", calls_decorated, x1, 1, 4),
]


# -- nested kiln.compile'd functions -------------------------------------------------------------
@kiln.compile
def compiled_inner(t):
    return t.sin() * 2


def calls_compiled_inner(x):
    return compiled_inner(x) + compiled_inner(x + 1)


class CompiledMethod:
    def __init__(self):
        self.k = 2.0

    @kiln.compile
    def run(self, t):
        return t * self.k


def calls_compiled_method(obj, x):
    return obj.run(x) + 1


def del_attributes(p, x):
    q = Scaler(x)
    q.extra = 1
    del q.extra
    del p.k
    return q.apply(x), hasattr(q, "extra"), hasattr(p, "k")


def two_level_closure(x):
    a = 2

    def outer(t):
        b = 3

        def inner(u):
            return u * a + b
        return inner(t) + a
    return outer(x)


def entry_kwonly_posonly(x, /, y, *, scale=2.0, shift):
    return (x + y) * scale + shift


NESTED = [
    Case("calls_compiled_inner", calls_compiled_inner, x1, 1, 6),
    Case("calls_compiled_method", calls_compiled_method, lambda r: I(CompiledMethod(), r.randn(3)), 1, 2),
]

MORE = [
    Case("del_attributes", del_attributes, lambda r: I(Scaler(2.0), r.randn(3)), 1, 1),
    Case("two_level_closure", two_level_closure, x1, 1, 3),
    Case("entry_kwonly_posonly", entry_kwonly_posonly, lambda r: I(r.randn(2), r.randn(2), shift=r.randn(2)), 1, 3),
    Case("entry_kwonly_default_given", entry_kwonly_posonly,
         lambda r: I(r.randn(2), y=r.randn(2), scale=0.5, shift=1.0), 1, 3),
]

CASES = GLOBALS + CELLS + CALLS + LAMBDAS + METHODS + NESTED + MORE


@parametrize(CASES)
def test_program(case):
    run_case(case)
