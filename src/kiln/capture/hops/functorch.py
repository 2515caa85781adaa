"""torch.func transforms (grad, grad_and_value, vmap, jacrev), functional_call and
flex_attention's score_mod.

The user's function is traced into a subgraph (closed-over tensors lifted), and the
outer graph calls a small runner that applies the real transform to the subgraph.
Eager runs it as written; AOTAutograd and inductor trace through torch.func (it is
built to be traced), so the transform never reaches them as Python.  Arguments may
be tensors or dicts/tuples/lists of tensors (parameter dicts); the runner takes and
returns flat tensors, and Kiln rebuilds the structures from pytree specs.
"""
from __future__ import annotations

import functools

import torch
import torch.func
import torch.utils._pytree as pytree
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

from ...exc import Unsupported
from ...runtime import caches
from ..values import ConstantValue, DictValue, ListValue, TensorValue, TupleValue, Value
from .control_flow import HopFunctionValue
from .scope import HopRuleError
from .subgraph import emit, emit_known, outer_outputs

_TRANSFORMS = {"grad": torch.func.grad, "grad_and_value": torch.func.grad_and_value,
               "vmap": torch.func.vmap, "jacrev": torch.func.jacrev}


@functools.lru_cache(maxsize=256)
def _spec(dumped: str):
    return pytree.treespec_loads(dumped)


caches.register_lru("capture.hops.functorch.treespecs", _spec)


def run_transform(kind: str, options: tuple, in_spec: str, out_spec: str, n_leaves: int, body, *operands):
    """What the outer graph calls: ``torch.func.<kind>`` of the body (closed over its
    lifted inputs) on the arguments rebuilt from ``in_spec`` (a dumped pytree spec: fx
    code must be able to print it); returns flat leaves."""
    leaves, lifted = operands[:n_leaves], operands[n_leaves:]
    args = pytree.tree_unflatten(list(leaves), _spec(in_spec))

    body_out = _spec(out_spec)

    def fn(*structured):
        return pytree.tree_unflatten(list(body(*pytree.tree_leaves(list(structured)), *lifted)), body_out)
    return tuple(pytree.tree_leaves(_TRANSFORMS[kind](fn, **dict(options))(*args)))


_MASK_TENSORS = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
                 "q_indices", "full_q_num_blocks", "full_q_indices", "dq_write_order", "dq_write_order_full",
                 "dq_kv_order")


def run_flex_attention(options: tuple, score_body, n_score: int, mask: tuple | None, mask_body, q, k, v, *rest):
    """flex_attention with the traced score_mod and mask_mod closed over their lifted
    tensors.  ``mask`` describes the BlockMask: its constants and which of its tensor
    fields are present (those follow the score_mod's lifted inputs in ``rest``)."""
    score_lifted = rest[:n_score]
    rest = rest[n_score:]

    def score_mod(score, b, h, q_idx, kv_idx):
        return score_body(score, b, h, q_idx, kv_idx, *score_lifted)[0]
    block_mask = None
    if mask is not None:
        constants, present = mask
        fields, i = {}, 0
        for name in _MASK_TENSORS:
            if name in present:
                fields[name], i = rest[i], i + 1
            else:
                fields[name] = None
        mask_lifted = rest[i:]

        def mask_mod(b, h, q_idx, kv_idx):
            return mask_body(b, h, q_idx, kv_idx, *mask_lifted)[0]
        block_mask = BlockMask(**dict(constants), **fields, mask_mod=mask_mod)
    return flex_attention(q, k, v, score_mod=score_mod if score_body is not None else None, block_mask=block_mask,
                          **dict(options))


def _block_mask_of(options: tuple, mask_body, lifted) -> BlockMask:
    def mask_mod(b, h, q_idx, kv_idx):
        return mask_body(b, h, q_idx, kv_idx, *lifted)[0]
    return create_block_mask(mask_mod, **dict(options))


def run_create_block_mask(options: tuple, mask_body, *lifted):
    """What the outer graph calls for ``create_block_mask`` in the frame: the real function
    on the traced mask_mod (closed over its lifted inputs).  Returns the BlockMask's tensor
    fields that are present, in ``_MASK_TENSORS`` order; the mask itself is rebuilt around
    them where flex_attention is called (a graph passes tensors, not BlockMasks)."""
    bm = _block_mask_of(options, mask_body, lifted)
    return tuple(t for t in (getattr(bm, n) for n in _MASK_TENSORS) if t is not None)


# id(module) -> its functional caller (which holds the module)
_FUNCTIONAL_CALLERS: dict = caches.register_dict("capture.hops.functorch.functional_callers", {})


def functional_caller(module):
    """A runner calling ``torch.func.functional_call`` on one module (fx cannot take a
    module as an argument); the entry guards the module's identity."""
    fn = _FUNCTIONAL_CALLERS.get(id(module))
    if fn is None or fn.module is not module:
        def fn(keys, n_params, *tensors):
            params = dict(zip(keys, tensors[:n_params]))
            return torch.func.functional_call(module, params, tuple(tensors[n_params:]))
        fn.module = module
        fn.__name__ = fn.__qualname__ = f"functional_call_{type(module).__name__}"
        _FUNCTIONAL_CALLERS[id(module)] = fn
    return fn


def _constant(v: Value, what: str):
    try:
        return v.as_constant() if isinstance(v, ConstantValue) else v.python_value()
    except Unsupported:
        raise Unsupported(f"{what} must be a constant")


def tensor_tree(v: Value, what: str):
    """A Value made of tensors in dicts/tuples/lists as the same structure of TensorValues."""
    if isinstance(v, TensorValue):
        return v
    if type(v) in (TupleValue, ListValue):
        items = [tensor_tree(i, what) for i in v.items]
        return tuple(items) if isinstance(v, TupleValue) else items
    if isinstance(v, DictValue) and v.cls is dict and not v.key_values:
        return {k: tensor_tree(i, what) for k, i in v.items.items()}
    raise Unsupported(f"{what}: {v.describe()} is not a tensor or a dict/tuple/list of tensors")


def values_from_tree(tree) -> Value:
    """The inverse of ``tensor_tree`` for rebuilt results (leaves are already Values)."""
    if isinstance(tree, Value):
        return tree
    if isinstance(tree, tuple):
        return TupleValue([values_from_tree(i) for i in tree])
    if isinstance(tree, list):
        return ListValue([values_from_tree(i) for i in tree])
    if isinstance(tree, dict):
        return DictValue({k: values_from_tree(i) for k, i in tree.items()})
    raise Unsupported(f"a transform returned a {type(tree).__name__}")


def _is_tv(x) -> bool:
    return isinstance(x, TensorValue)


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
        return TransformedValue(self.kind, args[0], options)


class TransformedValue(Value):
    """``torch.func.<kind>(f, **options)``: calling it traces ``f`` and records the transform."""

    def __init__(self, kind, fn_value, options):
        self.kind, self.fn_value, self.options = kind, fn_value, options

    def describe(self):
        return f"torch.func.{self.kind}({self.fn_value.describe()})"

    def call(self, tx, args, kwargs):
        if kwargs:
            raise Unsupported(f"{self.describe()} called with keyword arguments")
        trees = [tensor_tree(a, f"an argument of {self.describe()}") for a in args]
        leaves, in_spec = pytree.tree_flatten(trees, is_leaf=_is_tv)
        fake_trees = pytree.tree_map(lambda v: v.fake, trees, is_leaf=_is_tv)
        body_fakes = fake_trees
        if self.kind == "vmap":
            dims = self.options.get("in_dims", 0)
            dims = dims if isinstance(dims, (tuple, list)) else [dims] * len(args)
            with tx.state.builder.fake_mode:
                body_fakes = [t if d is None else pytree.tree_map(lambda f, d=d: f.select(d, 0), t)
                              for t, d in zip(fake_trees, dims)]
        body = tx.trace_subgraph(self.fn_value, list(body_fakes), self.kind)
        builder = tx.state.builder
        options = tuple(sorted(self.options.items()))
        nodes = [builder.lift(v.node, v.fake) for v in leaves]
        attr = builder.add_attr(body.gm, f"{self.kind}_body")
        # the result's structure (dicts of gradients...) comes from running the transform
        # on fakes here; the node returns its flat leaves
        fakes = [v.fake for v in leaves]
        with builder.fake_mode:
            body_spec = pytree.tree_structure(body.out_tree)
            out_tree = _TRANSFORMS[self.kind](_closed(body.gm, body.lifted_fakes, body_spec), **self.options)(
                *pytree.tree_unflatten(fakes, in_spec))
        out_leaves, out_spec = pytree.tree_flatten(out_tree)
        node, result = emit_known(tx, run_transform,
                                  (self.kind, options, pytree.treespec_dumps(in_spec),
                                   pytree.treespec_dumps(body_spec), len(leaves), attr, *nodes, *body.lifted),
                                  tuple(out_leaves))
        outs = outer_outputs(tx, node, result, len(result))
        return values_from_tree(pytree.tree_unflatten(outs, out_spec))


def _closed(gm, lifted, out_spec):
    def fn(*structured):
        return pytree.tree_unflatten(list(gm(*pytree.tree_leaves(list(structured)), *lifted)), out_spec)
    return fn


class FunctionalCallValue(HopFunctionValue):
    op = "functional_call"

    def call(self, tx, args, kwargs):
        a = self.bind(args, kwargs, ["module", "parameter_and_buffer_dicts", "args", "kwargs", "tie_weights",
                                     "strict"],
                      {"kwargs": ConstantValue(None), "tie_weights": ConstantValue(True),
                       "strict": ConstantValue(False)})
        mod_value = a["module"]
        module = getattr(mod_value, "obj", None)
        if not isinstance(module, torch.nn.Module):
            raise Unsupported(f"functional_call on {mod_value.describe()}")
        if not (isinstance(a["kwargs"], ConstantValue) and a["kwargs"].value is None) or \
                not a["tie_weights"].as_constant() is True or a["strict"].as_constant():
            raise Unsupported("functional_call with kwargs, tie_weights=False or strict=True")
        params = tensor_tree(a["parameter_and_buffer_dicts"], "functional_call's parameters")
        if isinstance(params, (tuple, list)):
            merged = {}
            for d in params:
                merged.update(d)
            params = merged
        if not isinstance(params, dict):
            raise Unsupported("functional_call's parameters must be a dict (or dicts) of tensors")
        call_args = a["args"]
        call_args = [call_args] if isinstance(call_args, TensorValue) else tensor_tree(call_args, "functional_call's args")
        if not all(isinstance(x, TensorValue) for x in call_args):
            raise Unsupported("functional_call with arguments that are not tensors")
        if mod_value.source is not None:
            tx.state.guards.identity(mod_value.source, module, "module")
        # every other parameter and buffer is passed in as well, read through Kiln (guarded,
        # an input of the graph): a tensor the module read by itself at run time would be
        # invisible to AOTAutograd
        params = dict(params)
        for name, _ in [*module.named_parameters(), *module.named_buffers()]:
            if name not in params:
                v = mod_value
                for part in name.split("."):
                    v = v.getattr(tx, part)
                if not isinstance(v, TensorValue):
                    raise Unsupported(f"functional_call: {name} of the module is not a tensor")
                params[name] = v
        keys = tuple(params)
        tensors = [*params.values(), *call_args]
        builder = tx.state.builder
        nodes = [builder.lift(t.node, t.fake) for t in tensors]
        node, result = emit(tx, functional_caller(module), (keys, len(keys), *nodes),
                            (keys, len(keys), *[t.fake for t in tensors]))
        return tx.wrap_fake_result(node, result)


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
        mask, mask_attr, mask_gm, mask_values, mask_lifted, mask_lifted_fakes = self._block_mask(tx, a["block_mask"])
        nodes = [builder.lift(t.node, t.fake) for t in (q, k, v, *mask_values)]
        node, result = emit(tx, run_flex_attention,
                            (options, body_attr, len(lifted), mask, mask_attr, *nodes[:3], *lifted, *nodes[3:],
                             *mask_lifted),
                            (options, body_gm, len(lifted), mask, mask_gm, *[t.fake for t in (q, k, v)],
                             *lifted_fakes, *[t.fake for t in mask_values], *mask_lifted_fakes))
        return tx.wrap_fake_result(node, result)

    def _block_mask(self, tx, bm: Value):
        """A BlockMask argument: its tensors become inputs, its mask_mod a subgraph."""
        if isinstance(bm, ConstantValue) and bm.value is None:
            return None, None, None, [], [], []
        builder = tx.state.builder
        if isinstance(bm, BlockMaskValue):
            body = bm.body
            lifted = [builder.lift(n, f) for n, f in zip(body.lifted, body.lifted_fakes)]
            return ((bm.constants, bm.present), builder.add_attr(body.gm, "mask_mod"), body.gm, bm.tensors,
                    lifted, body.lifted_fakes)
        if not isinstance(getattr(bm, "obj", None), BlockMask):
            raise Unsupported(f"flex_attention's block_mask is {bm.describe()}, not a BlockMask passed in")
        constants = tuple((n, _constant(bm.getattr(tx, n), f"BlockMask.{n}"))
                          for n in ("seq_lengths", "BLOCK_SIZE", "dq_kv_order_spt"))
        present, values = [], []
        for name in _MASK_TENSORS:
            v = bm.getattr(tx, name)
            if isinstance(v, TensorValue):
                present.append(name)
                values.append(v)
            elif not (isinstance(v, ConstantValue) and v.value is None):
                raise Unsupported(f"BlockMask.{name} is {v.describe()}")
        body = _trace_mask_mod(tx, bm.getattr(tx, "mask_mod"))
        attr = tx.state.builder.add_attr(body.gm, "mask_mod")
        return (constants, tuple(present)), attr, body.gm, values, body.lifted, body.lifted_fakes


def _trace_mask_mod(tx, mask_mod: Value):
    with tx.state.builder.fake_mode:
        idx = [torch.empty((), dtype=torch.int32) for _ in range(4)]
    body = tx.trace_subgraph(mask_mod, idx, "flex_attention")
    if len(body.out_fakes) != 1 or body.out_fakes[0].shape != () or body.out_fakes[0].dtype != torch.bool:
        raise HopRuleError("flex_attention's mask_mod must return one 0-d boolean tensor")
    return body


class BlockMaskValue(Value):
    """A BlockMask made by ``create_block_mask`` in the frame: its tensors (graph values),
    its constants and its traced mask_mod.  It may be passed to flex_attention in the same
    frame; anything else asked of it is refused (so it breaks, and runs as Python)."""

    def __init__(self, constants: tuple, present: tuple, tensors: list, body):
        self.constants, self.present, self.tensors, self.body = constants, present, tensors, body

    def python_type(self):
        return BlockMask

    def describe(self):
        return "a BlockMask made by create_block_mask in the compiled function"


class CreateBlockMaskValue(HopFunctionValue):
    """``create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, ...)`` called in the frame: the
    mask_mod is traced as a body and the outer graph calls the real function on it, as a
    runner that returns the mask's tensors."""

    op = "create_block_mask"
    _NAMES = ["mask_mod", "B", "H", "Q_LEN", "KV_LEN", "device", "BLOCK_SIZE", "_compile", "separate_full_blocks",
              "compute_dq_write_order", "dq_kv_order"]

    def call(self, tx, args, kwargs):
        a = self.bind(args, kwargs, self._NAMES, {n: ConstantValue(None) for n in self._NAMES[5:]})
        options = {n: _constant(a[n], f"create_block_mask's {n}") for n in self._NAMES[1:]}
        options = tuple((n, v) for n, v in options.items() if v is not None or n in ("B", "H"))
        if dict(options).get("_compile"):
            raise Unsupported("create_block_mask(_compile=True) compiles with torch.compile: runs as Python")
        body = _trace_mask_mod(tx, a["mask_mod"])
        builder = tx.state.builder
        # the mask's structure (which fields exist, its constants) and its tensors' metadata
        # come from running create_block_mask on fakes here
        with builder.fake_mode:
            fake_mask = _block_mask_of(options, body.gm, body.lifted_fakes)
        present = tuple(n for n in _MASK_TENSORS if getattr(fake_mask, n) is not None)
        constants = tuple((n, getattr(fake_mask, n)) for n in ("seq_lengths", "BLOCK_SIZE", "dq_kv_order_spt"))
        fakes = tuple(getattr(fake_mask, n) for n in present)
        node, result = emit_known(tx, run_create_block_mask,
                                  (options, builder.add_attr(body.gm, "mask_mod"), *body.lifted), fakes)
        return BlockMaskValue(constants, present, outer_outputs(tx, node, result, len(result)), body)
