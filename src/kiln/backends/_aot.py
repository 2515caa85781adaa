"""Plumbing shared by the backends that go through AOTAutograd.

AOTAutograd (``torch._functorch.aot_autograd.aot_module_simplified``) is what gives
``aot_eager``, ``aten`` and ``inductor`` their exact eager semantics: it traces the
graph to a functional ATen joint graph, splits it into forward and backward, and wraps
the compiled pieces in runtime code that (a) writes input mutations back into the
caller's real tensors and (b) regenerates outputs that alias inputs as real views of
those inputs.  This module only adapts Kiln's graphs to what it expects and makes the
result behave like the graph it replaced:

* AOTAutograd wants a graph that returns a flat tuple; a graph returning one tensor or a
  nested structure is rewritten into one that does, and the result is rebuilt.
* AOTAutograd returns lists; the graph returned a tuple, so callers get a tuple.
* AOTAutograd bakes non-tensor inputs (ints, floats) into the graph.  The compiled
  callable checks on every call that they still have the values it was compiled for,
  instead of silently computing with the old ones.
* AOTAutograd's result is specialized on grad mode and on which inputs require grad;
  :class:`GradSpecialized` compiles one variant per situation it is called in.
* The backward graph is compiled eagerly (``force_non_lazy_backward_lowering``), so a
  backend that cannot handle it fails inside ``compile_graph``, where Kiln can fall
  back to eager, rather than in the middle of the user's ``loss.backward()``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._guards import TracingContext, tracing

from kiln.exc import BackendError

from ..runtime import NodeWatch, backwards_made_by, boxed, reach_aware
from .body_calls import body_tracing_context, with_invoke_subgraph
from .random_draws import redrawn_by_trace

#: Functions ``wrap(compiler, backend_name, which) -> compiler`` applied in order to the
#: inner graph compilers AOTAutograd calls (``which`` is "forward" or "backward").  A
#: higher layer (the automatic repro writer in ``kiln.debug``) registers here; this
#: module never imports it.  A wrapper with nothing to do returns ``compiler``.
INNER_COMPILER_WRAPPERS: list[Callable[[Callable, str, str], Callable]] = []


def wrap_inner_compiler(compiler: Callable, backend_name: str, which: str) -> Callable:
    """``compiler`` passed through every registered INNER_COMPILER_WRAPPERS entry."""
    for wrap in INNER_COMPILER_WRAPPERS:
        compiler = wrap(compiler, backend_name, which)
    return compiler


def tuple_output_graph(gm: torch.fx.GraphModule):
    """Return ``(graph_module, rebuild)`` where the graph module returns a flat tuple.

    ``rebuild(flat_outputs)`` turns the flat outputs back into what ``gm`` returned.
    When ``gm`` already returns a flat tuple of nodes it is returned unchanged, with a
    ``rebuild`` that only makes sure the result is a tuple.  Otherwise a new
    GraphModule sharing ``gm``'s submodules and attributes is built, so ``gm`` itself
    (which Kiln keeps as its eager fallback) is never edited.
    """
    output_node = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    (result,) = output_node.args
    if isinstance(result, tuple) and all(isinstance(r, torch.fx.Node) for r in result):
        return gm, tuple
    leaves, spec = pytree.tree_flatten(_plain(result))
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in gm.graph.nodes:
        if node.op == "output":
            break
        env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output(tuple(env[x] if isinstance(x, torch.fx.Node) else x for x in leaves))
    flat_gm = torch.fx.GraphModule(gm, graph)

    def rebuild(flat):
        return pytree.tree_unflatten(list(flat), spec)

    return flat_gm, rebuild


def _plain(obj):
    """fx stores output structures as immutable_dict / immutable_list; the graph's own
    code returns plain dicts and lists, so rebuild with those."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_plain(v) for v in obj)
    return obj


def nontensor_guard(example_inputs: Sequence[Any], backend_name: str):
    """Return a checker for the non-tensor inputs baked in at compile time, or None."""
    # SymInts are inputs of a graph with symbolic sizes (it takes any value): not baked in
    baked = [(i, v) for i, v in enumerate(example_inputs) if not isinstance(v, (torch.Tensor, torch.SymInt))]
    if not baked:
        return None

    def check(args):
        for i, v in baked:
            got = args[i]
            if type(got) is not type(v) or got != v:
                raise BackendError(
                    f"the {backend_name} backend compiled this graph with input {i} = {v!r} baked in, "
                    f"but it was called with {got!r}; Kiln must guard on that value and recompile"
                )

    return check


def aot_compile(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *,
                backend_name: str,
                fw_compiler: Callable,
                bw_compiler: Callable | None = None,
                keep_inference_input_mutations: bool = False) -> "GradSpecialized":
    """Compile ``gm`` through AOTAutograd with the given graph compilers.

    Returns a callable ``fn(*args)`` giving what ``gm`` gives.  Errors while tracing are
    re-raised as :class:`kiln.exc.BackendError` naming the backend, chained from the
    original so nothing is lost.
    """
    refuse_redrawing_graph(gm, backend_name)
    # imported on first use: AOTAutograd takes ~1.4 s to import, paid only by its backends
    from torch._functorch import config as functorch_config
    from torch._functorch.aot_autograd import aot_module_simplified  # (see above)

    # a backward whose saved tensors are donated buffers (freed as it runs) refuses
    # retain_graph=True and a second backward, which eager allows.  AOTAutograd reads the
    # flag both when compiling and when a backward runs, so it is switched off for the process.
    functorch_config.donated_buffer = False

    def compile_flat(flat_gm, inputs):
        try:
            # backward_pass_autocast="off": eager's backward runs no autocast of its own (the
            # forward's casts are recorded ops), even when compiled inside an autocast region
            with functorch_config.patch(force_non_lazy_backward_lowering=True, backward_pass_autocast="off"):
                return aot_module_simplified(
                    flat_gm, inputs,
                    fw_compiler=wrap_inner_compiler(fw_compiler, backend_name, "forward"),
                    bw_compiler=_no_random_in_backward(reach_aware(
                        wrap_inner_compiler(bw_compiler or fw_compiler, backend_name, "backward"))),
                    keep_inference_input_mutations=keep_inference_input_mutations,
                )
        except BackendError:
            raise
        except Exception as e:
            raise BackendError(f"the {backend_name} backend could not trace the graph through AOTAutograd: "
                               f"{type(e).__name__}: {first_line(e)}") from e

    return GradSpecialized(gm, example_inputs, compile_flat, backend_name)


def refuse_redrawing_graph(gm: torch.fx.GraphModule, backend_name: str) -> None:
    """A graph with a random call that AOTAutograd's trace would draw differently from
    eager's kernel (``random_draws.redrawn_by_trace``) cannot be compiled exactly.  Kiln
    runs such graphs op by op before asking an AOTAutograd backend; this catches a
    backend reached another way (wrapped in a user's function), so that the failure
    policy runs the graph eagerly instead of drawing other numbers."""
    node = redrawn_by_trace(gm)
    if node is not None:
        raise BackendError(f"the {backend_name} backend would draw other random numbers than eager for "
                           f"{node.format_node()}: AOTAutograd traces it through a Python decomposition "
                           f"whose draws differ from eager's kernel")


def _is_random(node) -> bool:
    target = node.target
    return node.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(target, "tags", ())


def _no_random_in_backward(bw_compiler: Callable) -> Callable:
    """Eager's backward never draws from the generator.  AOTAutograd's default partition
    can leave a dead copy of a forward random op (dropout) in the backward graph, which
    would advance the generator on every ``backward()``: such nodes are removed.  A random
    op whose result the backward uses (a recomputed mask) cannot match eager: refused."""

    def compile_bw(gm: torch.fx.GraphModule, example_inputs):
        for node in reversed(list(gm.graph.nodes)):
            if _is_random(node):
                users = list(node.users)
                if all(u.op == "call_function" and not u.users and u.target.__name__ == "getitem" for u in users):
                    for u in users:
                        gm.graph.erase_node(u)
                    gm.graph.erase_node(node)
                else:
                    raise BackendError(f"the backward graph recomputes a random op ({node.format_node()}); "
                                       f"eager's backward reuses the forward's result")
        gm.recompile()
        return bw_compiler(gm, example_inputs)

    return compile_bw


class GradSpecialized:
    """A compiled graph, compiled once per autograd situation it is called in.

    What AOTAutograd produces is specialized on the autograd state at compile time: with
    grad enabled and some input requiring grad it builds a training function (outputs
    carry a ``grad_fn``), otherwise an inference function (outputs never do).  Called in
    the other situation it is silently wrong: a training function under ``no_grad``
    returns outputs that require grad, an inference function in a training step returns
    outputs that cut the graph, and a training function compiled for other
    ``requires_grad`` flags computes the wrong set of gradients.  So the situation is part
    of the key: ``None`` for inference, else the tuple of ``requires_grad`` flags of the
    tensor inputs (and of parameters the graph module owns); a new key compiles a new
    variant from the call's own inputs.  (Kiln's guards would normally keep the
    situation fixed per compiled entry; this makes the backend correct regardless.)

    Also: guards the non-tensor inputs AOTAutograd bakes in (see
    :func:`nontensor_guard`), rebuilds the graph's output structure, and carries no
    ``_boxed_call`` flag (AOTAutograd copies that flag from the inner compiler onto its
    unboxed result, which would mislead a caller).
    """

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                 compile_flat: Callable, backend_name: str):
        example_inputs = list(example_inputs)
        self.backend_name = backend_name
        self._flat_gm, self._rebuild = tuple_output_graph(gm)
        # calls of a layer body traced once become torch's invoke_subgraph (body_calls.py)
        self._flat_gm = with_invoke_subgraph(self._flat_gm)

        self._compile_flat = compile_flat = _with_body_context(compile_flat)
        self._check = nontensor_guard(example_inputs, backend_name)
        self._tensor_positions = [i for i, a in enumerate(example_inputs) if isinstance(a, torch.Tensor)]
        self._all_tensors = len(self._tensor_positions) == len(example_inputs)
        # parameters the graph reaches through get_attr / call_module are inputs to
        # AOTAutograd too (Kiln's own graphs pass them as placeholders, so this is empty)
        self._params = list(gm.parameters())
        # a graph with symbolic sizes is compiled inside a tracing context holding its fake
        # mode; later variants must be compiled from the same symbolic examples, not from
        # one call's real (static) inputs.  Only their fakes are kept: holding the real
        # examples (parameters among them) would keep a freed model's tensors alive.
        self._context = TracingContext.try_get()
        self._examples = None if self._context is None else [
            self._context.fake_mode.from_tensor(e) if isinstance(e, torch.Tensor) else e for e in example_inputs]
        self.variants: dict[Any, Callable] = {}
        self._watches: dict[Any, NodeWatch] = {}   # training variants: see backward_reach
        self._add_variant(self._key(example_inputs), lambda: compile_flat(self._flat_gm, example_inputs))

    def _add_variant(self, key, compile: Callable) -> Callable:
        fn, backwards = backwards_made_by(compile)
        self.variants[key] = fn
        if key is not None and len(backwards) == 1:
            self._watches[key] = NodeWatch(backwards[0])
        return fn

    def _key(self, args: Sequence[Any]):
        if not torch.is_grad_enabled():
            return None
        if self._all_tensors:
            flags = tuple([a.requires_grad for a in args])
        else:
            flags = tuple([args[i].requires_grad for i in self._tensor_positions])
        if self._params:
            flags += tuple(p.requires_grad for p in self._params)
        return flags if any(flags) else None

    def __call__(self, *args):
        if self._check is not None:
            self._check(args)
        key = self._key(args)
        fn = self.variants.get(key)
        if fn is None:
            fn = self._add_variant(key, lambda: self._compile_variant(args))
        out = fn(*args)
        if key is not None:
            watch = self._watches.get(key)
            if watch is not None:
                watch.watch(out)
        return self._rebuild(out)

    def _compile_variant(self, args):
        if self._context is None:
            return self._compile_flat(self._flat_gm, list(args))
        mode = self._context.fake_mode
        examples = []
        for example, arg in zip(self._examples, args):
            if isinstance(example, torch.Tensor):
                fake = example                       # the symbolic fake made at capture
                if fake.requires_grad != arg.requires_grad:
                    with mode:
                        fake = fake.detach().requires_grad_(arg.requires_grad)
                example = fake
            examples.append(example)
        with tracing(self._context):
            return self._compile_flat(self._flat_gm, examples)

    def __repr__(self) -> str:
        return f"<kiln {self.backend_name} compiled graph, {len(self.variants)} variant(s)>"


def _with_body_context(compile_flat: Callable) -> Callable:
    """``compile_flat`` inside a tracing context where the graph calls bodies and none is
    open (``body_calls.body_tracing_context``)."""
    def compile_with_bodies(flat_gm, inputs):
        with body_tracing_context(flat_gm):
            return compile_flat(flat_gm, inputs)
    return compile_with_bodies


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "(no message)"
