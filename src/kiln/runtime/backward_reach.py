"""A compiled backward that does only what eager's backward would do from the same roots.

AOTAutograd makes one autograd node for a whole graph, and its backward graph takes one
gradient ("tangent") per output that requires grad.  Eager's autograd graph has one node
per op, and a backward that reaches only some of a graph's outputs never runs the
backward ops of the others.  The engine hands the compiled node ``None`` for the outputs
it did not reach, which ``autograd.Function`` turns into zeros, so the compiled backward
runs those ops on zeros.  Two differences follow, both visible to a user:

* **Zeros are not absent.**  ``0 * inf`` is NaN: ``y / dropout(x)`` has an infinite local
  gradient where the mask dropped an element, so a backward from another output of the
  same graph gives ``x`` NaN gradients where eager's are finite (fuzz seed 70276).
* **A gradient passed through is a copy.**  AOTAutograd makes each tangent the layout it
  traced with (contiguous); where the backward graph hands a tangent on unchanged
  (``x + r``: the gradient of ``x`` is the gradient of the sum), eager hands on the very
  tensor it got, which ``torch.autograd.grad`` returns (a ``sum``'s gradient: an expanded
  view with stride 0; fuzz seed 74477).

So a backward compiled through here (:func:`reach_aware`) learns, per call, which
tangents the engine left out and what it was given: a pre-hook on the node
(:class:`NodeWatch`, installed by ``backends._aot.GradSpecialized`` on each call's node) notes
them, and the compiled backward, which the engine runs right after that hook on the
same thread, reads the note.  With tangents left out it runs a variant of the backward
graph (:func:`skipping_absent_tangents`) in which everything computed only from them
counts as absent: their contributions are dropped where they meet others (a sum with one
absent term is the other term itself, as eager's engine hands it on; elsewhere zeros),
and an input gradient made only of them is ``None`` (eager: not reached).  A
tangent passed through unchanged is returned as the tensor the engine gave.

The variant runs the backward graph's ATen ops eagerly (a rare path: a backward from
part of a graph's outputs); the usual call runs the backend's compiled backward.

Run-time code: the hooks and the compiled backward run on every call and every
backward.  The compile-time part is one wrapper (:func:`reach_aware`, which AOTAutograd
calls with each backward graph), kept here because what it makes and the note it fills
are this module's; the variants are built lazily, on the first backward that leaves
tangents out.  It imports only torch.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import torch
import torch.fx

_NOTE = threading.local()   # .slot: (CompiledBackward, absent tangent indices, the engine's gradient per tangent)


def reach_aware(bw_compiler: Callable) -> Callable:
    """Wrap a backward-graph compiler so that what it compiles is a :class:`CompiledBackward`."""

    def compile_bw(gm: torch.fx.GraphModule, example_inputs):
        pristine = torch.fx.GraphModule(gm, copy_graph(gm.graph))   # compilers may edit gm
        compiled = bw_compiler(gm, example_inputs)
        made = CompiledBackward(compiled, pristine)
        sink = getattr(_NOTE, "made", None)
        if sink is not None:
            sink.append(made)
        return made

    return compile_bw


def backwards_made_by(compile: Callable[[], Any]) -> tuple[Any, list]:
    """Run ``compile()``; also return the :class:`CompiledBackward` objects it made."""
    outer = getattr(_NOTE, "made", None)
    _NOTE.made = made = []
    try:
        return compile(), made
    finally:
        _NOTE.made = outer


class CompiledBackward:
    """A compiled backward graph (AOTAutograd's boxed calling convention) that takes the
    note a :class:`NodeWatch` left for it (see the module docstring)."""

    _boxed_call = True

    def __init__(self, compiled: Callable, graph: torch.fx.GraphModule):
        self.compiled = compiled if getattr(compiled, "_boxed_call", False) else boxed(compiled)
        self.graph = graph
        placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
        tangents = [i for i, n in enumerate(placeholders) if _is_tangent(n)]
        self.first_tangent = tangents[0] if tangents else 0
        self.tangents = len(tangents)
        ok = tangents == list(range(self.first_tangent, self.first_tangent + self.tangents))
        self.usable = ok and self.tangents > 0
        self.passed_through = passed_through(graph)
        self._variants: dict[tuple, tuple] = {}

    def __call__(self, args):
        note = getattr(_NOTE, "slot", None)
        if note is None or note[0] is not self:
            return self.compiled(args)
        _NOTE.slot = None
        _, absent, given = note
        run, handed_on = self.compiled, self.passed_through
        if absent:
            run, handed_on = self._variant(absent)
        grads = run(args)
        if handed_on:
            grads = list(grads)
            for k, j in handed_on.items():
                raw, made = given[j], grads[k]
                if raw is not None and isinstance(made, torch.Tensor) and raw.dtype == made.dtype and \
                        raw.shape == made.shape and raw.device == made.device:
                    grads[k] = raw
        return grads

    def _variant(self, absent: tuple) -> tuple:
        if absent not in self._variants:
            gm = skipping_absent_tangents(self.graph, {self.first_tangent + j for j in absent})
            self._variants[absent] = (self.compiled, self.passed_through) if gm is None else \
                (boxed(gm.forward), passed_through(gm))
        return self._variants[absent]


def passed_through(gm: torch.fx.GraphModule) -> dict:
    """Output position -> tangent index, for the gradients backward graph ``gm`` hands on
    unchanged (returns a tangent placeholder itself)."""
    tangents = [n for n in gm.graph.nodes if _is_tangent(n)]
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output").args[0]
    return {k: tangents.index(o) for k, o in enumerate(out) if o in tangents}


def skipping_absent_tangents(gm: torch.fx.GraphModule, absent: set) -> torch.fx.GraphModule | None:
    """A copy of backward graph ``gm`` in which the placeholders at positions ``absent``
    (tangents the engine left out) count as absent: every node computed only from them is
    dropped; where such a value meets another it is replaced by zeros of its layout
    (``zeros_like``: adding zeros is exact, multiplying them by an infinite local
    gradient is what must not happen); an output made only of them is ``None``.

    Backward ops are linear in the gradients they take, so a node whose every
    gradient-derived input is absent is absent.  Nodes that read only the metadata of a
    gradient (``zeros_like``, ``sym_size``) are not gradient-derived.  None when the graph
    does not fit these assumptions (an absent non-tensor value used by a kept node)."""
    graph = copy_graph(gm.graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    gone = {placeholders[i] for i in absent}
    derived = {n for n in placeholders if _is_tangent(n)}
    output = None
    for node in graph.nodes:
        if node.op == "output":
            output = node
            continue
        if node.op == "placeholder" or _reads_metadata_only(node):
            continue
        inputs = [i for i in node.all_input_nodes if i in derived]
        if inputs:
            derived.add(node)
            if all(i in gone for i in inputs):
                gone.add(node)
    for node in list(graph.nodes):
        kept = _sum_with_absent(node, gone)
        if kept is not None:          # eager hands on the other gradient itself
            node.replace_all_uses_with(kept)      # (the sum is then dead code)
    for node in list(gone):
        for user in list(node.users):
            if user in gone or user is output:
                continue
            if not isinstance(node.meta.get("val"), torch.Tensor):
                return None
            with graph.inserting_after(node):
                zeros = graph.call_function(torch.ops.aten.zeros_like.default, (node,))
            user.replace_input_with(node, zeros)
    if output is not None:
        result = output.args[0]
        if isinstance(result, (tuple, list)):
            output.args = (type(result)(None if r in gone else r for r in result),)
    graph.eliminate_dead_code()
    return torch.fx.GraphModule(gm, graph)


_SUMS = {torch.ops.aten.add.Tensor: (0, 1), torch.ops.aten.sub.Tensor: (0,)}


def _sum_with_absent(node: torch.fx.Node, gone: set) -> torch.fx.Node | None:
    """For ``a + b`` (or ``a - b``) where ``b`` is absent and ``a`` is not: ``a``, when it has
    the sum's shape and dtype (the engine sums gradients of one tensor from several paths;
    with one path absent eager hands on the other's gradient as it is)."""
    keep_positions = _SUMS.get(node.target)
    if keep_positions is None or node in gone or node.kwargs.get("alpha", 1) != 1 or len(node.args) != 2:
        return None
    for k in keep_positions:
        kept, other = node.args[k], node.args[1 - k]
        if isinstance(kept, torch.fx.Node) and kept not in gone and other in gone:
            a, b = kept.meta.get("val"), node.meta.get("val")
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype:
                return kept
    return None


def _is_tangent(node: torch.fx.Node) -> bool:
    """AOTAutograd names the backward graph's gradient placeholders ``tangents_N``."""
    return node.op == "placeholder" and node.name.startswith("tangents")


def _reads_metadata_only(node: torch.fx.Node) -> bool:
    name = getattr(node.target, "__name__", str(node.target)).split(".")[0]
    return name.endswith("_like") or name.startswith(("new_", "sym_")) or name in ("size", "stride", "numel", "dim")


class NodeWatch:
    """Per compiled forward: on each call, a pre-hook on the call's autograd node notes
    for its :class:`CompiledBackward` which tangents the engine left out and the tensors
    it gave for those the backward hands on unchanged."""

    def __init__(self, backward: CompiledBackward):
        self.backward = backward
        self.surviving: list | None = None    # node output index of each tangent, in order
        self.useless = not backward.usable

    def watch(self, outputs) -> None:
        if self.useless:
            return
        node = None
        for t in outputs:
            fn = t.grad_fn if isinstance(t, torch.Tensor) else None
            if fn is not None and getattr(getattr(fn, "_forward_cls", None), "compiled_bw", None) is self.backward:
                node = fn
                break
        if node is None:
            return
        if self.surviving is None:
            self.surviving = _tangent_slots(node._forward_cls.metadata)
            # (the engine runs a node on its path even when every gradient it got is
            # None: eager's nodes then pass on None, so a single tangent matters too)
            if len(self.surviving) != self.backward.tangents:
                self.useless = True
                return
        node.register_prehook(self._note)

    def _note(self, grad_outputs):
        slots, backward = self.surviving, self.backward
        absent = tuple(j for j, s in enumerate(slots) if grad_outputs[s] is None)
        _NOTE.slot = (backward, absent, [grad_outputs[s] for s in slots])


def _tangent_slots(meta) -> list:
    """The node's output index of each tangent of its backward graph, in order: AOTAutograd
    takes tangents for the inputs it changes in place that require grad, then for the
    outputs it computes (not aliases) that require grad, then for the bases of outputs
    that are views of intermediates (``runtime_wrappers._codegen_backward_prologue``)."""
    from torch._functorch._aot_autograd.schemas import OutputType  # loaded with AOTAutograd by now
    mutated = meta.num_mutated_inp_runtime_indices
    slots = [i for i, k in enumerate(meta.mutated_inp_runtime_indices)
             if meta.input_info[k].mutates_data and meta.input_info[k].requires_grad]
    kinds = (OutputType.non_alias, OutputType.unsafe_view_alias, OutputType.custom_function_view)
    slots += [mutated + i for i, info in enumerate(meta.output_info)
              if info.output_type in kinds and issubclass(info.raw_type, torch.Tensor)
              and info.requires_grad_for_backward]
    start = mutated + meta.num_outputs
    slots += list(range(start, start + meta.num_intermediate_bases))
    return slots


def boxed(fn: Callable) -> Callable:
    """Give ``fn(*args)`` AOTAutograd's boxed calling convention ``fn(list_of_args)``."""

    def run(args):
        return fn(*args)

    run._boxed_call = True
    return run


def copy_graph(graph: torch.fx.Graph) -> torch.fx.Graph:
    """A copy of ``graph`` with new nodes (a compiler may edit the nodes it is given)."""
    new = torch.fx.Graph()
    env: dict = {}
    for node in graph.nodes:
        env[node] = new.node_copy(node, lambda n: env[n])
    return new
