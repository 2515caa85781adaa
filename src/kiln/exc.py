"""Kiln's exception types.

Every error Kiln raises on purpose is one of these, so users can catch them and
tests can tell a deliberate refusal from a bug inside Kiln.
"""
from __future__ import annotations


class KilnError(Exception):
    """Base class of every deliberate Kiln error."""


class Unsupported(KilnError):
    """A construct Kiln cannot capture.

    With ``fullgraph=True`` this reaches the user; otherwise the step runs as plain
    Python (a graph break) and the rest of the frame resumes compiled.  Fields:

    * ``reason``: what Kiln could not capture; ``location`` / ``source_line``: the user's
      ``file:line`` and its text (the innermost frame's, attached by the tracer);
    * ``user_stack``: ``(location, text)`` per frame from the compiled frame down to the
      step, and ``depth``: how many inlined calls deep the step is (0: in the frame being
      compiled), both set by the tracer where it stops;
    * ``root_index``: the compiled frame's instruction where the break goes (the call
      that led to the step, when it is inside an inlined function);
    * ``fix``: where the construct has one, how to write it so that it is captured
      (``torch.where`` for a data-dependent ``if``), shown with the reason in the error,
      ``kiln explain``, the report and the logs, as torch.compile's explanations do;
    * ``fatal`` (a class attribute, or set by a subclass): Python itself could not run
      the step either (a higher-order operator's rule is broken), so no break helps and
      the error reaches the user in every mode.
    """

    fatal: bool = False

    def __init__(self, msg: str, *, location: str | None = None, source_line: str | None = None,
                 fix: str | None = None):
        self.reason = msg
        self.fix = fix
        self.location = location
        self.source_line = source_line
        self.user_stack: list[tuple[str, str]] | None = None
        self.depth = 0
        self.root_index: int | None = None
        super().__init__(self._render())

    def _render(self) -> str:
        text = self.reason
        if self.location:
            text += f"\n  at {self.location}"
            if self.source_line:
                text += f"\n    {self.source_line.strip()}"
        if self.fix:
            text += f"\n  fix: {self.fix}"
        return text

    def with_location(self, location: str, source_line: str | None) -> "Unsupported":
        """Attach the user's location once (the innermost frame wins)."""
        if self.location is None:
            self.location = location
            self.source_line = source_line
            self.args = (self._render(),)
        return self


# Fixes for the breaks that have one (``Unsupported.fix``): the rewrites that keep the code
# in one graph, in the words torch.compile's explanations use
DATA_DEPENDENT_IF = ("compute both results and pick with torch.where(cond, a, b), or keep the branch in the "
                     "graph with torch.cond(pred, true_fn, false_fn, (x,))")
DATA_IN_PYTHON = ("keep the value a tensor (use it in torch ops, or torch.where for a choice); .item() of a "
                  "0-d tensor is captured where it only feeds ops")
TENSOR_MIN_MAX = "use torch.maximum(a, b) / torch.minimum(a, b), or torch.stack([...]).max(0)"


class AutogradEngineCall(Unsupported):
    """A call that runs the autograd engine (``Tensor.backward``, ``torch.autograd.grad`` /
    ``backward``): it runs as Python, from the tensors on the stack at the break.
    ``raw_gradients``: the call returns the gradients it computes (``autograd.grad``)."""

    def __init__(self, msg: str, *, raw_gradients: bool = False):
        super().__init__(msg)
        self.raw_gradients = raw_gradients


class SpecializationError(KilnError):
    """A dimension marked with ``kiln.mark_dynamic`` was made constant by the traced code."""


class ConstraintViolation(KilnError):
    """``kiln.export``: the ranges ``dynamic_shapes`` gives include sizes for which the
    traced program would take another path (a branch on a size, a specialised size); the
    message lists what the trace assumed and the user line that made each assumption."""


class BackendError(KilnError):
    """A backend raised while compiling or running a captured graph."""


class RecompileError(KilnError):
    """A frame needed a new entry under ``kiln.set_stance("fail_on_recompile")``; the
    message names the frame and the guard that failed (what changed)."""


class RecompileLimitReached(KilnError):
    """Raised only when ``config.error_on_recompile_limit`` is set."""


class GuardPlanMismatch(KilnError):
    """The C accelerator's guard plan and the Python guard it was made from decided a call
    differently (only checked with ``kiln.config.guard_crosscheck``): a bug in Kiln."""


class ArgumentError(TypeError):
    """The call's arguments do not fit the function's signature (as eager would say)."""
