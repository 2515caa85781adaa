"""What a graph returns besides the values the glue needs.

A graph's outputs are the tensors the rest of the frame uses (the return value, the
values handed on at a break, the values side effects store).  Two rules add outputs,
so that what a backend makes of the graph still behaves like eager:

* **Every op eager runs still runs.**  An op whose result nobody uses is dead code to a
  backend (AOTAutograd removes it), but eager runs it: a random op advances the
  generator, and any op may raise where the fake run could not tell (``softmax`` on an
  int64 tensor, ``rand_like`` on one: kernels that exist for some dtypes only).  So the
  last op of each dead chain that makes a new tensor is an output, which keeps the
  whole chain alive, with the views and in-place changes of that tensor.  Not needed for
  results that alias a graph input: in-place changes of inputs are kept by every backend
  (and so is what they read), and views fail only on metadata, which the fake run checks.
* **A view keeps its base.**  An output that is a view of a tensor the graph computes
  (``torch.tanh(x)[0]``) is a view in eager: changing it in place changes the base,
  and its ``grad_fn`` is the view's.  AOTAutograd returns such an output as a plain
  tensor unless the base is an output too, in which case it regenerates the view from
  it.  So the base is an output; ``Codegen.realias_outputs`` rebuilds the view from it
  for backends that return copies.

And outputs of a graph compiled as one autograd node (AOTAutograd's) must behave as
eager's per-op autograd graph does: each shows eager's ``grad_fn`` name, and a backward
from some of them gives gradients only to the inputs those reach.  The functions that do
that on every call are run-time code (``kiln.runtime.outputs``); this module is the
compile-time analysis that decides which of them an entry needs (``output_reach``;
``partial_backward_diverges`` says when even that is not enough and the graph must run
op by op; ``mutated_inputs``: which inputs the trace changed in place, for the glue's
error fallback).
"""
from __future__ import annotations

import torch
import torch.fx


def storage_key(t):
    """What identifies ``t``'s memory (None for a non-strided tensor or a non-tensor)."""
    return t.untyped_storage()._cdata if isinstance(t, torch.Tensor) and t.layout == torch.strided else None


def extra_outputs(graph: torch.fx.Graph, outputs: list) -> tuple[list, list]:
    """The nodes ``graph`` must return besides ``outputs`` (see the module docstring):
    ``(bases, dead)``.  A dead op's result is returned detached: no backward reaches it,
    so no input gets a gradient (zeros) through it that eager would leave ``None``."""
    fake_node, first_user = {}, {}        # fake -> node; storage -> the node that made it
    input_storages = set()
    for node in graph.nodes:
        fake = node.meta.get("example_value")
        if isinstance(fake, torch.Tensor):
            fake_node.setdefault(id(fake), node)
            first_user.setdefault(storage_key(fake), node)
            if node.op == "placeholder":
                input_storages.add(storage_key(fake))
    extra = []
    returned = {id(n.meta.get("example_value")) for n in outputs}
    for node in outputs:
        fake = node.meta.get("example_value")
        if not isinstance(fake, torch.Tensor) or not fake._is_view():
            continue
        base = fake_node.get(id(fake._base))
        if base is not None and storage_key(fake._base) not in input_storages and id(fake._base) not in returned:
            returned.add(id(fake._base))
            extra.append(base)
    used: set = set()
    _mark_used(used, outputs + extra)
    dead = []
    for node in reversed(graph.nodes):
        if node in used or node.op in ("placeholder", "output"):
            continue
        fake = node.meta.get("example_value")
        if not isinstance(fake, torch.Tensor):
            continue
        if storage_key(fake) in input_storages:
            _mark_used(used, [node])   # an input changed in place (kept) or an input's view
            continue
        if first_user.get(storage_key(fake)) is not node:
            # a view or in-place change of a tensor the graph made: it runs if that tensor
            # is kept (an output aliasing another would make AOTAutograd return both as views)
            continue
        _mark_used(used, [node])
        if fake.requires_grad:
            with graph.inserting_after(node):
                node = graph.call_method("detach", (node,))
            node.meta["example_value"] = fake.detach()
        dead.append(node)
    return extra, dead


# Reading these of a tensor needs only its metadata: a backend computes them from the
# inputs' sizes and drops the ops that made the tensor (``(y + torch.rand(())).size(0)``).
_METADATA_READS = frozenset({"size", "stride", "numel", "nelement", "dim", "ndimension", "storage_offset"})


def _mark_used(used: set, nodes: list) -> None:
    """Mark ``nodes`` and what they need computed (not what they read only metadata of)."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if node not in used:
            used.add(node)
            if node.op == "call_method" and node.target in _METADATA_READS:
                continue
            stack.extend(node.all_input_nodes)


def partial_backward_diverges(roots: list, outputs: list, raw_gradients: bool) -> bool:
    """Whether a backward the break right after the graph runs from ``roots`` (fakes of the
    tensors it hands to the autograd engine) through a graph compiled as one autograd node
    could differ from eager's.  Such a node computes its inputs' gradients from all its
    outputs, the ones the backward did not reach counting as zeros:

    * gradients the engine returns as they are (``raw_gradients``: ``torch.autograd.grad``)
      are sums with those zeros, with other strides than eager's (a ``sum``'s gradient is
      an expanded view);
    * an output no root depends on sends its zeros through backward ops eager never runs:
      ``0 * inf`` is NaN (``y / dropout(x)``, fuzz seed 70276), and the engine goes on into
      the autograd graph behind the inputs only it reaches, which an earlier backward may
      have freed ("backward through the graph a second time", fuzz seed 1129).

    An output the roots depend on (a training step's logits behind its loss) gets its real
    gradient and is fine.  ``outputs``: fakes of the graph's outputs."""
    root_ids = {id(r) for r in roots}
    others = [o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad and id(o) not in root_ids]
    if not others:
        return False
    if raw_gradients:
        return True
    nodes, leaves = _autograd_graph_of(roots)
    return any(id(o) not in leaves if o.grad_fn is None else o.grad_fn not in nodes for o in others)


def _autograd_graph_of(fakes: list) -> tuple[set, set]:
    """The autograd nodes a backward from ``fakes`` runs, and the ids of the leaves it
    reaches (walking the fakes' own autograd graph)."""
    seen, stack = set(), [f.grad_fn for f in fakes if isinstance(f, torch.Tensor) and f.grad_fn is not None]
    leaves = {id(f) for f in fakes if isinstance(f, torch.Tensor) and f.requires_grad and f.grad_fn is None}
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        variable = getattr(fn, "variable", None)
        if variable is not None:
            leaves.add(id(variable))
        stack.extend(nxt for nxt, _ in fn.next_functions)
    return seen, leaves


def _inputs_reached(fakes: list, inputs: list) -> set:
    """The positions of ``inputs`` a backward from ``fakes`` reaches."""
    seen, leaves = _autograd_graph_of(fakes)
    return {i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and
            (id(x) in leaves or x.grad_fn is not None and x.grad_fn in seen)}


def output_reach(outputs: list, inputs: list) -> tuple | None:
    """For outputs that require grad, ``((index, input positions reached), ...)`` when
    they do not all reach the same inputs (a backward from some of them must leave the
    others' inputs alone: ``runtime.outputs.gradients_through_reached_outputs``), else None."""
    reach = tuple((i, frozenset(_inputs_reached([o], inputs))) for i, o in enumerate(outputs)
                  if isinstance(o, torch.Tensor) and o.requires_grad)
    return reach if len({r for _, r in reach}) > 1 else None


def mutated_inputs(placeholders) -> set | None:
    """The placeholders whose tensor the trace changed in place (its fake's version
    moved); None when one of them has no version counter to watch (an inference tensor,
    or an input made without one) and so may have changed unseen."""
    out = set()
    for node in placeholders:
        fake = node.meta.get("example_value")
        if not isinstance(fake, torch.Tensor):
            continue
        before = node.meta.get("kiln_version")
        if before is None or fake.is_inference():
            return None
        if fake._version != before:
            out.add(node)
    return out
