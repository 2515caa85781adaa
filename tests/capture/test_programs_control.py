"""Control flow decided at trace time: unrolled for-loops, while-loops, branches and
boolean operators on known values, conditional expressions, comprehensions."""
from __future__ import annotations

import torch

from .capture_harness import Case, I, parametrize, run_case


def x1(r):
    return (r.randn(3, 4),)


def xs4(r):
    return ([r.randn(2, 3) for _ in range(4)],)


# -- for-loops (unrolled) ---------------------------------------------------------------------
def loop_range(x):
    for i in range(3):
        x = x * 2 + i
    return x


def loop_range_step(x):
    acc = x
    for i in range(5, 0, -2):
        acc = acc - i
    for i in reversed(range(2)):
        acc = acc * (i + 1)
    return acc


def loop_enumerate(xs):
    out = []
    for i, t in enumerate(xs, start=1):
        out.append(t * i)
    return out


def loop_zip(xs, ys):
    return [a + b for a, b in zip(xs, ys)]


def loop_enumerate_zip(xs, ys):
    total = 0
    for i, (a, b) in enumerate(zip(xs, ys)):
        total = total + a * b + i
    return total


def loop_reversed_list(xs):
    out = xs[0]
    for t in reversed(xs):
        out = out - t
    return out


def loop_tuple_of_fns(x):
    for fn in (torch.sin, torch.cos, torch.tanh):
        x = fn(x)
    return x


def loop_dict_items(d):
    keys, total = [], None
    for k, v in d.items():
        keys.append(k.upper())
        total = v if total is None else total + v
    for k in d:
        total = total * len(k)
    for v in d.values():
        total = total + v
    return keys, total


def loop_over_tensor(x):
    acc = torch.zeros(x.shape[1])
    for row in x:
        acc = acc + row
    return acc


def loop_nested(x):
    out = x
    for i in range(2):
        for j in range(i, 3):
            out = out + i * j
    return out


def loop_break_continue(xs):
    acc = xs[0]
    for i, t in enumerate(xs):
        if i == 0:
            continue
        if i == 3:
            break
        acc = acc + t
    return acc


def loop_for_else(x, names):
    for n in names:
        if n == "stop":
            x = x + 100
            break
    else:
        x = x - 100
    return x


def loop_shape(x):
    total = 1
    for d in x.shape:
        total *= d
    for ch in "ab":
        x = x + len(ch)
    return x / total


def loop_iter_next(xs):
    it = iter(xs)
    first = next(it)
    second = next(it)
    rest = list(it)
    return first - second, rest, next(it, None)


FOR = [
    Case("loop_range", loop_range, x1, 1, 6),
    Case("loop_range_step", loop_range_step, x1, 1, 5),
    Case("loop_enumerate", loop_enumerate, xs4, 1, 4),
    Case("loop_zip", loop_zip, lambda r: (xs4(r)[0], xs4(r)[0][:3]), 1, 3),
    Case("loop_enumerate_zip", loop_enumerate_zip, lambda r: (xs4(r)[0], xs4(r)[0]), 1, 12),
    Case("loop_reversed_list", loop_reversed_list, xs4, 1, 4),
    Case("loop_tuple_of_fns", loop_tuple_of_fns, x1, 1, 3),
    Case("loop_dict_items", loop_dict_items, lambda r: ({"ab": r.randn(2), "c": r.randn(2)},), 1, 5),
    Case("loop_over_tensor", loop_over_tensor, x1, 1, 8),
    Case("loop_nested", loop_nested, x1, 1, 5),
    Case("loop_break_continue", loop_break_continue, xs4, 1, 2),
    Case("loop_for_else_break", loop_for_else, lambda r: I(r.randn(2), ["a", "stop", "b"]), 1, 1),
    Case("loop_for_else_no_break", loop_for_else, lambda r: I(r.randn(2), ["a", "b"]), 1, 1),
    Case("loop_shape", loop_shape, x1, 1, 3),
    Case("loop_iter_next", loop_iter_next, xs4, 1, 1),
]


# -- while-loops ------------------------------------------------------------------------------------
def while_counter(x):
    i = 0
    while i < 4:
        x = x + i
        i += 1
    return x


def while_break(x, n):
    while True:
        x = x * 0.5
        n -= 1
        if n <= 0:
            break
    return x


def while_pop(xs):
    todo = list(xs)
    acc = None
    while todo:
        t = todo.pop()
        acc = t if acc is None else acc + t
    return acc


def while_shape(x):
    while x.shape[-1] > 1:
        x = x[..., ::2] + x[..., 1::2]
    return x


WHILE = [
    Case("while_counter", while_counter, x1, 1, 4),
    Case("while_break", while_break, lambda r: I(r.randn(3), 3), 1, 3),
    Case("while_pop", while_pop, xs4, 1, 3),
    Case("while_shape", while_shape, lambda r: r.randn(2, 8), 1, 9),
]


# -- branches on values known at trace time -------------------------------------------------
def branch_on_arg(x, mode):
    if mode == "double":
        return x * 2
    elif mode == "square":
        return x * x
    else:
        return x


def branch_on_none(x, bias=None, scale=None):
    if bias is not None:
        x = x + bias
    if scale is None:
        scale = 3.0
    return x * scale


def branch_on_shape(x):
    if x.dim() == 2 and x.shape[0] > 2:
        return x.sum(0)
    return x.sum()


def branch_on_dtype(x):
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.float()
    elif not x.is_floating_point():
        x = x.to(torch.float32)
    return x + 1


def bool_ops_values(x, a, b):
    s = a or 1.0          # `or` returns an operand
    t = b and 2.0
    u = (a and b) or 5
    return x * s + t + u, not a, a is None or b is None


def conditional_expr(x, flag, k):
    y = x * 2 if flag else x - 2
    z = y if k > 1 else -y
    return z, ("big" if k > 10 else "small")


def truthiness(x, xs, d, s):
    n = 0
    if xs:
        n += 1
    if not d:
        n += 10
    if s:
        n += 100
    if None or 0 or "" or ():
        n += 1000
    return x + n


def assert_statements(x):
    assert x.dim() == 2, "expected a matrix"
    assert isinstance(x, torch.Tensor)
    return x.t()


def match_literals(x, mode):
    match mode:
        case "a" | "b":
            return x + 1
        case "c":
            return x + 2
        case _:
            return x


BRANCH = [
    Case("branch_on_arg_double", branch_on_arg, lambda r: I(r.randn(3), "double"), 1, 1),
    Case("branch_on_arg_square", branch_on_arg, lambda r: I(r.randn(3), "square"), 1, 1),
    Case("branch_on_arg_other", branch_on_arg, lambda r: I(r.randn(3), "none"), 0, 0),
    Case("branch_on_none_given", branch_on_none, lambda r: I(r.randn(3), r.randn(3), 2.0), 1, 2),
    Case("branch_on_none_default", branch_on_none, lambda r: I(r.randn(3)), 1, 1),
    Case("branch_on_shape_big", branch_on_shape, lambda r: r.randn(3, 2), 1, 1),
    Case("branch_on_shape_small", branch_on_shape, lambda r: r.randn(2, 2), 1, 1),
    Case("branch_on_dtype_half", branch_on_dtype, lambda r: r.randn(3).half(), 1, 2),
    Case("branch_on_dtype_int", branch_on_dtype, lambda r: r.randint(0, 5, 3), 1, 2),
    Case("bool_ops_values", bool_ops_values, lambda r: I(r.randn(2), 0.0, 3.0), 1, 3),
    Case("bool_ops_values_falsy", bool_ops_values, lambda r: I(r.randn(2), 2.0, 0), 1, 3),
    Case("conditional_expr", conditional_expr, lambda r: I(r.randn(2), True, 0), 1, 2),
    Case("conditional_expr_false", conditional_expr, lambda r: I(r.randn(2), False, 12), 1, 1),
    Case("truthiness", truthiness, lambda r: I(r.randn(2), [1], {}, "s"), 1, 1),
    Case("assert_statements", assert_statements, x1, 1, 1),
    Case("match_literals", match_literals, lambda r: I(r.randn(2), "b"), 1, 1),
]


# -- comprehensions -----------------------------------------------------------------------------
def list_comp(xs):
    return [t * i for i, t in enumerate(xs) if i % 2 == 0]


def dict_comp(xs):
    return {f"t{i}": t.sum() for i, t in enumerate(xs)}


def set_comp(x, names):
    lengths = {len(n) for n in names}
    return x * len(lengths), sorted(lengths)


def gen_expr(xs):
    return sum(t.mean() for t in xs), tuple(t.shape[0] for t in xs), any(t.dim() > 2 for t in xs), \
        all(t.dim() == 2 for t in xs)


def nested_comp(x):
    return [[x[i, j] for j in range(2)] for i in range(2)]


def comp_over_zip_dict(d, e):
    return {k: d[k] - e[k] for k in d if k in e}


def comp_captures_local(x):
    scale = 3
    offsets = [1, 2]
    return [x * scale + o for o in offsets]


def user_generator(xs):
    def doubled(items):
        for t in items:
            yield t * 2
        yield items[0]

    def count_up(n):
        i = 0
        while i < n:
            yield i
            i += 1
    return list(doubled(xs)), sum(count_up(4)), [i * 2 for i in count_up(2)]


COMPREHENSIONS = [
    Case("list_comp", list_comp, xs4, 1, 2),
    Case("dict_comp", dict_comp, xs4, 1, 4),
    Case("set_comp", set_comp, lambda r: (r.randn(2), ["a", "bb", "cc"]), 1, 1),
    Case("gen_expr", gen_expr, xs4, 1, 8),
    Case("nested_comp", nested_comp, x1, 1, 4),
    Case("comp_over_zip_dict", comp_over_zip_dict,
         lambda r: ({"a": r.randn(2), "b": r.randn(2)}, {"b": r.randn(2)}), 1, 1),
    Case("comp_captures_local", comp_captures_local, x1, 1, 4),
    Case("user_generator", user_generator, xs4, 1, 4),
]

CASES = FOR + WHILE + BRANCH + COMPREHENSIONS


@parametrize(CASES)
def test_program(case):
    run_case(case)
