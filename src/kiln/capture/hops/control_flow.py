"""torch.cond, map, while_loop and scan: bodies traced into subgraphs, one call of
torch's higher-order operator (cond, map_impl, while_loop, scan) in the outer graph.

Each value checks its operator's rules on the traced bodies (branch outputs alike,
carried state keeps its metadata) and raises ``HopRuleError`` naming the mismatch.
"""
from __future__ import annotations

import torch
from torch._higher_order_ops.cond import cond_op
from torch._higher_order_ops.map import map_impl
from torch._higher_order_ops.scan import scan_op
from torch._higher_order_ops.while_loop import while_loop_op

from ...exc import Unsupported
from ..values import ConstantValue, graph_call, ListValue, TensorValue, TupleValue, Value
from .scope import HopRuleError
from .subgraph import emit, lower, merge_lifted, outer_outputs


class HopFunctionValue(Value):
    """A torch function that takes Python callables and is traced as a higher-order operator."""

    op = "hop"

    def __init__(self, fn):
        self.fn = fn

    def real_object(self):
        return self.fn

    def python_type(self):
        return type(self.fn)

    def describe(self):
        return f"higher-order operator {self.op}"

    def bind(self, args, kwargs, names, defaults=None):
        """Python's binding of ``args``/``kwargs`` to ``names`` (defaults: name -> Value)."""
        out = dict(zip(names, args))
        if len(args) > len(names):
            raise Unsupported(f"{self.op}() takes {len(names)} arguments but {len(args)} were given")
        for k, v in kwargs.items():
            if k not in names or k in out:
                raise Unsupported(f"{self.op}() got an unexpected or repeated argument {k!r}")
            out[k] = v
        for k, v in (defaults or {}).items():
            out.setdefault(k, v)
        missing = [n for n in names if n not in out]
        if missing:
            raise Unsupported(f"{self.op}() missing arguments {missing}")
        return out


def _items(v: Value, what: str) -> list:
    if isinstance(v, (TupleValue, ListValue)):
        return list(v.items)
    if isinstance(v, TensorValue):
        return [v]
    raise Unsupported(f"{what} must be a tensor or a tuple/list of tensors, not {v.describe()}")


def _meta(fake) -> str:
    return f"{tuple(fake.shape)} {str(fake.dtype).replace('torch.', '')} on {fake.device}"


def _attach(tx, sub, hint):
    return tx.state.builder.add_attr(sub.gm, hint)


class CondValue(HopFunctionValue):
    op = "cond"

    def call(self, tx, args, kwargs):
        a = self.bind(args, kwargs, ["pred", "true_fn", "false_fn", "operands"],
                      {"operands": TupleValue([])})
        pred, true_fn, false_fn = a["pred"], a["true_fn"], a["false_fn"]
        operands = _items(a["operands"], "cond's operands") if not (
            isinstance(a["operands"], ConstantValue)) else []
        if isinstance(pred, ConstantValue):
            # a Python predicate picks its branch at trace time (and is guarded)
            branch = true_fn if pred.value else false_fn
            return branch.call(tx, operands, {})
        if not isinstance(pred, TensorValue) or pred.fake.numel() != 1:
            raise HopRuleError(f"cond's predicate must be a Python bool or a one-element tensor, not {pred.describe()}")
        t = tx.trace_subgraph(true_fn, operands, "cond")
        f = tx.trace_subgraph(false_fn, operands, "cond", prelift=list(zip(t.lifted, t.lifted_fakes)))
        lifted, lifted_fakes = merge_lifted(t, f)
        if len(t.out_fakes) != len(f.out_fakes):
            raise HopRuleError(f"cond's branches return different numbers of tensors: true_fn returns "
                               f"{len(t.out_fakes)}, false_fn returns {len(f.out_fakes)}")
        for i, (x, y) in enumerate(zip(t.out_fakes, f.out_fakes)):
            if (x.shape, x.dtype, x.device) != (y.shape, y.dtype, y.device):
                raise HopRuleError(f"cond's branches must return tensors with the same metadata: output {i} "
                                   f"is {_meta(x)} in true_fn but {_meta(y)} in false_fn")
        pred_node, pred_fake = lower(tx, pred)
        node, result = emit(tx, cond_op,
                            (pred_node, _attach(tx, t, "cond_true"), _attach(tx, f, "cond_false"), tuple(lifted)),
                            (pred_fake, t.gm, f.gm, tuple(lifted_fakes)))
        return t.rebuild(outer_outputs(tx, node, result, len(t.out_fakes)))


class MapValue(HopFunctionValue):
    op = "map"

    def call(self, tx, args, kwargs):
        if len(args) < 2 or kwargs:
            raise Unsupported("map(f, xs, *args) with keyword arguments or too few arguments")
        fn, xs, extra = args[0], args[1], list(args[2:])
        xs_items = _items(xs, "map's xs")
        if not all(isinstance(x, TensorValue) for x in xs_items):
            raise Unsupported("map's xs must be tensors")
        sizes = [x.fake.shape[0] if x.fake.ndim else None for x in xs_items]   # SymInts are not hashable
        if any(n is None for n in sizes) or any(n != sizes[0] for n in sizes) or sizes[0] == 0:
            raise HopRuleError(f"map's xs must share one non-zero leading dimension, got shapes "
                               f"{[tuple(x.fake.shape) for x in xs_items]}")
        with tx.state.builder.fake_mode:
            slices = [x.fake.select(0, 0) for x in xs_items]
        if isinstance(xs, TensorValue):
            body_xs = slices[0]
        else:
            body_xs = tuple(slices) if isinstance(xs, TupleValue) else list(slices)
        body = tx.trace_subgraph(fn, [body_xs, *extra], "map")
        if not body.out_fakes:
            raise HopRuleError("map's body must return at least one tensor")
        xs_nodes = _distinct(tx, [lower(tx, x) for x in xs_items], body.lifted)
        node, result = emit(tx, map_impl,
                            (_attach(tx, body, "map_body"), [n for n, _ in xs_nodes], list(body.lifted)),
                            (body.gm, [f for _, f in xs_nodes], list(body.lifted_fakes)))
        return body.rebuild(outer_outputs(tx, node, result, len(body.out_fakes)))


def _check_carried(op, what, carried_fakes, out_fakes):
    if len(out_fakes) != len(carried_fakes):
        raise HopRuleError(f"{op}'s {what} returns {len(out_fakes)} tensors for {len(carried_fakes)} carried values")
    for i, (c, o) in enumerate(zip(carried_fakes, out_fakes)):
        if (c.shape, c.dtype, c.device) != (o.shape, o.dtype, o.device):
            raise HopRuleError(f"{op}'s {what} must keep the carried state's metadata: carried value {i} is "
                               f"{_meta(c)} but the body returns {_meta(o)}")


class WhileLoopValue(HopFunctionValue):
    op = "while_loop"

    def call(self, tx, args, kwargs):
        a = self.bind(args, kwargs, ["cond_fn", "body_fn", "carried_inputs"])
        carried = _items(a["carried_inputs"], "while_loop's carried_inputs")
        if not all(isinstance(c, TensorValue) for c in carried):
            raise Unsupported("while_loop with carried values that are not tensors")
        fakes = [c.fake for c in carried]
        c_sub = tx.trace_subgraph(a["cond_fn"], fakes, "while_loop")
        b_sub = tx.trace_subgraph(a["body_fn"], fakes, "while_loop",
                                  prelift=list(zip(c_sub.lifted, c_sub.lifted_fakes)))
        lifted, lifted_fakes = merge_lifted(c_sub, b_sub)
        if len(c_sub.out_fakes) != 1 or c_sub.out_fakes[0].numel() != 1 or c_sub.out_fakes[0].dtype != torch.bool:
            raise HopRuleError("while_loop's cond_fn must return one boolean one-element tensor")
        _check_carried("while_loop", "body_fn", fakes, b_sub.out_fakes)
        out = c_sub.gm.graph.output_node()   # cond_fn's graph returns the tensor, not a 1-tuple
        out.args = (out.args[0][0],)
        c_sub.gm.recompile()
        nodes = _distinct(tx, [lower(tx, c) for c in carried], lifted)
        node, result = emit(tx, while_loop_op,
                            (_attach(tx, c_sub, "while_cond"), _attach(tx, b_sub, "while_body"),
                             tuple(n for n, _ in nodes), tuple(lifted)),
                            (c_sub.gm, b_sub.gm, tuple(f for _, f in nodes), tuple(lifted_fakes)))
        outs = outer_outputs(tx, node, result, len(carried))
        return b_sub.rebuild(outs)


class ScanValue(HopFunctionValue):
    op = "scan"

    def call(self, tx, args, kwargs):
        a = self.bind(args, kwargs, ["combine_fn", "init", "xs", "dim", "reverse"],
                      {"dim": ConstantValue(0), "reverse": ConstantValue(False)})
        init_items = _items(a["init"], "scan's init")
        xs_items = _items(a["xs"], "scan's xs")
        dim, reverse = a["dim"].as_constant(), a["reverse"].as_constant()
        if not all(isinstance(x, TensorValue) for x in [*init_items, *xs_items]):
            raise Unsupported("scan with init or xs that are not tensors")
        builder = tx.state.builder
        xs_nodes = []
        for x in xs_items:
            node, fake = lower(tx, x)
            if dim != 0:
                node, fake = builder.call("call_function", torch.movedim, (node, dim, 0), {}, (fake, dim, 0), {})
            if reverse:
                node, fake = builder.call("call_function", torch.flip, (node, [0]), {}, (fake, [0]), {})
            xs_nodes.append((node, fake))
        with builder.fake_mode:
            slices = [f.select(0, 0) for _, f in xs_nodes]
        init_nodes = [lower(tx, x) for x in init_items]
        init_arg = _like(a["init"], [f for _, f in init_nodes])
        xs_arg = _like(a["xs"], slices)
        body = tx.trace_subgraph(a["combine_fn"], [init_arg, xs_arg], "scan")
        n_carry = len(init_items)
        _check_carried("scan", "combine_fn's carry", [f for _, f in init_nodes], body.out_fakes[:n_carry])
        # the body's graph takes flat (*carry, *x); trace_subgraph made its inputs in that order
        init_nodes = _distinct(tx, init_nodes, [*body.lifted, *(n for n, _ in xs_nodes)])
        node, result = emit(tx, scan_op,
                            (_attach(tx, body, "scan_combine"), [n for n, _ in init_nodes], [n for n, _ in xs_nodes],
                             tuple(body.lifted)),
                            (body.gm, [f for _, f in init_nodes], [f for _, f in xs_nodes], tuple(body.lifted_fakes)))
        outs = outer_outputs(tx, node, result, len(body.out_fakes))
        ys = []
        for v in outs[n_carry:]:
            if reverse:
                v = _call(tx, torch.flip, [v, ConstantValue([0])])
            if dim != 0:
                v = _call(tx, torch.movedim, [v, ConstantValue(0), ConstantValue(dim)])
            ys.append(v)
        return body.rebuild([*outs[:n_carry], *ys])


def _distinct(tx, pairs: list, others: list) -> list:
    """Operands that are also passed elsewhere in the same call (a carried value that the
    body also closes over) are cloned: torch's operators refuse aliased inputs."""
    builder, seen, out = tx.state.builder, set(map(id, others)), []
    for node, fake in pairs:
        if id(node) in seen:
            node, fake = builder.call("call_method", "clone", (node,), {}, (fake,), {})
        seen.add(id(node))
        out.append((node, fake))
    return out


def _call(tx, fn, args):
    return graph_call(tx, "call_function", fn, args, {})


def _like(structure: Value, fakes: list):
    if isinstance(structure, TensorValue):
        return fakes[0]
    return tuple(fakes) if isinstance(structure, TupleValue) else list(fakes)
