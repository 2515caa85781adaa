"""torch.func transforms (grad, grad_and_value, vmap, jacrev) and flex_attention's
score_mod: the user's function is traced into a subgraph (closed-over tensors lifted),
and the outer graph calls a small runner that applies the real transform to the
subgraph.  Eager runs it as written; AOTAutograd and inductor trace through torch.func
(it is built to be traced), so the transform never reaches them as Python.
"""
from __future__ import annotations

import torch
import torch.func
from torch.nn.attention.flex_attention import flex_attention

from ...exc import Unsupported
from ..values.base import ConstantValue, Value
from ..values.tensor import TensorValue
from .control_flow import HopFunctionValue
from .scope import HopRuleError
from .subgraph import emit

_TRANSFORMS = {"grad": torch.func.grad, "grad_and_value": torch.func.grad_and_value,
               "vmap": torch.func.vmap, "jacrev": torch.func.jacrev}


def run_transform(kind: str, options: tuple, single: bool, body, n_explicit: int, *operands):
    """What the outer graph calls: ``torch.func.<kind>(body closed over the lifted inputs)``."""
    explicit, lifted = operands[:n_explicit], operands[n_explicit:]

    def fn(*args):
        out = body(*args, *lifted)
        return out[0] if single else tuple(out)
    return _TRANSFORMS[kind](fn, **dict(options))(*explicit)


def run_flex_attention(options: tuple, body, q, k, v, *lifted):
    """flex_attention with the traced score_mod closed over its lifted tensors."""
    def score_mod(score, b, h, q_idx, kv_idx):
        return body(score, b, h, q_idx, kv_idx, *lifted)[0]
    return flex_attention(q, k, v, score_mod=score_mod if body is not None else None, **dict(options))


def _constant(v: Value, what: str):
    try:
        return v.as_constant() if isinstance(v, ConstantValue) else v.python_value()
    except Unsupported:
        raise Unsupported(f"{what} must be a constant")


class FuncTransformValue(HopFunctionValue):
    """``torch.func.grad`` & co. before they get their function."""

    def __init__(self, fn, kind: str):
        super().__init__(fn)
        self.kind = kind
        self.op = kind

    def call(self, tx, args, kwargs):
        if not args:
            raise Unsupported(f"torch.func.{self.kind}() needs a function")
        options = {k: _constant(v, f"{self.kind}'s {k}") for k, v in kwargs.items()}
        names = {"vmap": ["in_dims", "out_dims"]}.get(self.kind, ["argnums", "has_aux"])
        for name, v in zip(names, args[1:]):
            options[name] = _constant(v, f"{self.kind}'s {name}")
        if options.get("has_aux"):
            raise Unsupported(f"torch.func.{self.kind} with has_aux=True")
        return TransformedValue(self.kind, args[0], options)


class TransformedValue(Value):
    """``torch.func.<kind>(f, **options)``: calling it traces ``f`` and records the transform."""

    def __init__(self, kind, fn_value, options):
        self.kind, self.fn_value, self.options = kind, fn_value, options

    def describe(self):
        return f"torch.func.{self.kind}({self.fn_value.describe()})"

    def call(self, tx, args, kwargs):
        if kwargs or not all(isinstance(a, TensorValue) for a in args):
            raise Unsupported(f"{self.describe()} called with keyword or non-tensor arguments")
        fakes = [a.fake for a in args]
        if self.kind == "vmap":
            dims = self.options.get("in_dims", 0)
            dims = dims if isinstance(dims, (tuple, list)) else [dims] * len(args)
            with tx.state.builder.fake_mode:
                fakes = [f if d is None else f.select(d, 0) for f, d in zip(fakes, dims)]
        body = tx.trace_subgraph(self.fn_value, fakes, self.kind)
        single = len(body.out_values) == 1 and body.rebuild([body.out_values[0]]) is body.out_values[0]
        builder = tx.state.builder
        options = tuple(sorted(self.options.items()))
        nodes = [builder.lift(a.node, a.fake) for a in args]
        attr = builder.add_attr(body.gm, f"{self.kind}_body")
        node, result = emit(tx, run_transform,
                            (self.kind, options, single, attr, len(args), *nodes, *body.lifted),
                            (self.kind, options, single, body.gm, len(args), *fakes_of(args), *body.lifted_fakes))
        return tx.wrap_fake_result(node, result)


def fakes_of(values):
    return [v.fake for v in values]


class FlexAttentionValue(HopFunctionValue):
    op = "flex_attention"

    def call(self, tx, args, kwargs):
        a = self.bind(args, kwargs, ["query", "key", "value", "score_mod", "block_mask", "scale", "enable_gqa",
                                     "return_lse", "kernel_options"],
                      {n: ConstantValue(None) for n in ("score_mod", "block_mask", "scale", "kernel_options")} |
                      {"enable_gqa": ConstantValue(False), "return_lse": ConstantValue(False)})
        q, k, v = a["query"], a["key"], a["value"]
        if not all(isinstance(t, TensorValue) for t in (q, k, v)):
            raise Unsupported("flex_attention with query/key/value that are not tensors")
        if not (isinstance(a["block_mask"], ConstantValue) and a["block_mask"].value is None):
            raise Unsupported("flex_attention with a block_mask (mask_mod) runs as Python")
        options = tuple((n, _constant(a[n], f"flex_attention's {n}"))
                        for n in ("scale", "enable_gqa", "return_lse", "kernel_options"))
        builder = tx.state.builder
        body_gm, body_attr, lifted, lifted_fakes = None, None, [], []
        if not (isinstance(a["score_mod"], ConstantValue) and a["score_mod"].value is None):
            with builder.fake_mode:
                score = torch.empty((), dtype=q.fake.dtype)
                idx = [torch.empty((), dtype=torch.int32) for _ in range(4)]
            body = tx.trace_subgraph(a["score_mod"], [score, *idx], "flex_attention")
            if len(body.out_fakes) != 1 or body.out_fakes[0].shape != ():
                raise HopRuleError("flex_attention's score_mod must return one 0-d tensor")
            body_gm, lifted, lifted_fakes = body.gm, body.lifted, body.lifted_fakes
            body_attr = builder.add_attr(body_gm, "score_mod")
        nodes = [builder.lift(t.node, t.fake) for t in (q, k, v)]
        node, result = emit(tx, run_flex_attention, (options, body_attr, *nodes, *lifted),
                            (options, body_gm, *fakes_of((q, k, v)), *lifted_fakes))
        return tx.wrap_fake_result(node, result)
