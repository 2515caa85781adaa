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
