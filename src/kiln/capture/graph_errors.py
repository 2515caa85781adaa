"""When a compiled graph raises at run time: run the frame as Python instead.

The glue applies a frame's Python side effects (stores to globals and attributes, list
and dict mutations) after its graph has run.  If an op in the graph raises (an integer
tensor given to ``rand_like``, an index out of range), eager would have applied the
side effects that come before that op and raised there; applying none of them and
re-raising would be a silently different program.  So the glue calls the graph inside
``try``; on an exception it puts back the state the graph may have changed (grad mode,
the random generators when the graph draws from them) and runs the frame's own code as
Python from its start, which applies exactly eager's side effects and raises eager's
error.  This is sound only when the failed graph changed no input: the backend applies
input mutations only after every op has run (AOTAutograd's functional graphs; the
backend declares ``applies_input_mutations_last``, ``backends.contract``), or the inputs the graph mutates kept their version counters
until the error (read before the call; compared in the handler), or they can be put
back from copies taken before the call (``InputSnapshot``: only where the frame has
Python side effects to lose, and for inputs that do not require grad).

If the Python run does not raise, the graph raised where eager does not (a backend
bug): the result is eager's and a ``BackendFallbackWarning`` says so, or with
``config.raise_on_backend_error`` the error is raised.
"""
from __future__ import annotations

import functools
import warnings

import torch

from ..backends.policy import BackendFallbackWarning
from ..config import config
from ..exc import BackendError


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


def draws_random_numbers(gm: torch.fx.GraphModule) -> bool:
    """Whether running ``gm`` (or a subgraph it calls) may advance a random generator."""
    for module in gm.modules():
        graph = getattr(module, "graph", None)
        if not isinstance(graph, torch.fx.Graph):
            continue
        if any(is_random_op(node) for node in graph.nodes):
            return True
    return False


def is_random_op(node: torch.fx.Node) -> bool:
    """Whether ``node`` draws from a random generator."""
    if node.op == "call_method":
        return _random_name(node.target)
    if node.op != "call_function":
        return False
    tags = getattr(node.target, "tags", None)
    name = getattr(node.target, "__name__", "")
    if _switched_off(node, name):
        return False
    if tags is not None and torch.Tag.nondeterministic_seeded in tags:
        return True
    return _random_name(name)


_DROPOUT_SWITCHES = ((("training", "train"), 2, False), (("p",), 1, 0))
# Random ops whose randomness a constant argument turns off (``F.dropout(x, p,
# training=False)`` in an eval-mode model, attention with ``dropout_p=0.0``): for each,
# (argument names, position, the value that turns it off).  Checked against the draws of
# eager's kernels: no generator moves.
_OFF_SWITCHES = {
    **dict.fromkeys(("dropout", "alpha_dropout", "feature_alpha_dropout", "feature_dropout", "dropout1d",
                     "dropout2d", "dropout3d"), _DROPOUT_SWITCHES),
    "scaled_dot_product_attention": ((("dropout_p",), 4, 0),),
}


def _switched_off(node: torch.fx.Node, name: str) -> bool:
    """Whether a constant argument of this call turns its randomness off."""
    for names, position, off in _OFF_SWITCHES.get(name, ()):
        given = [node.kwargs[n] for n in names if n in node.kwargs]
        if not given and len(node.args) > position:
            given = [node.args[position]]
        if given and type(given[0]) in (bool, int, float) and given[0] == off:
            return True
    return False


@functools.lru_cache(maxsize=None)
def _random_name(name: str) -> bool:
    """An ATen op of this name is tagged nondeterministic_seeded (``rand_like``,
    ``dropout``, ``bernoulli_``...), or the name is of the dropout family
    (``F.dropout2d`` has no ATen op of its own name)."""
    if "dropout" in name:
        return True
    packet = getattr(torch.ops.aten, name, None) if name.isidentifier() else None
    overloads = getattr(packet, "overloads", None)
    if overloads is None:
        return False
    return any(torch.Tag.nondeterministic_seeded in getattr(packet, o).tags for o in overloads())


class RngSnapshot:
    """The state of the CPU generator (and the current CUDA one, if CUDA is in use)."""

    __slots__ = ("cpu", "cuda")

    def __init__(self):
        self.cpu = torch.random.get_rng_state()
        self.cuda = torch.cuda.get_rng_state() if torch.cuda.is_available() and torch.cuda.is_initialized() else None

    def restore(self):
        torch.random.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda)


class InputSnapshot:
    """Copies of the inputs a graph run op by op changes in place, taken before the call
    when the frame also has Python side effects to replay, so that if the graph raises
    after changing them they are put back and the frame can still run as Python (which
    applies eager's side effects before the error).  Not for inputs that require grad:
    putting the values back would not undo the autograd history of the change."""

    __slots__ = ("tensors", "copies")

    def __init__(self, *tensors):
        self.tensors = tensors
        self.copies = None if any(t.requires_grad for t in tensors) else [t.clone() for t in tensors]

    def restore(self) -> bool:
        """Put the inputs back; False when there is nothing to put them back from."""
        if self.copies is None:
            return False
        with torch.no_grad():
            for t, c in zip(self.tensors, self.copies):
                t.copy_(c)
        return True


def run_frame_as_python(error: Exception, grad_mode: bool, rng: RngSnapshot | None, call):
    """The glue's handler for a graph that raised ``error``: see the module docstring."""
    if isinstance(error, BackendError):
        raise error       # the failure policy chose to raise (config.raise_on_backend_error)
    torch._C._set_grad_enabled(grad_mode)
    if rng is not None:
        rng.restore()
    result = call()        # raises eager's error, with eager's side effects before it
    message = (f"kiln: a compiled graph raised {type(error).__name__}: {error}, but the frame ran as "
               f"Python without error; its result is eager's")
    if config.raise_on_backend_error:
        raise BackendError(message) from error
    warnings.warn(message, BackendFallbackWarning, stacklevel=3)
    return result
