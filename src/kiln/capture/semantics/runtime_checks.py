"""Branches on tensor data whose one side only raises become run-time checks in the graph.

``if not valid.all(): raise ValueError(...)`` (torch.distributions' argument checks) or
``if (x < 0).any(): raise ...`` cannot be decided at trace time: the condition is
computed from tensor data.  Breaking there costs a graph per side of every such check.
Instead, when one side of the branch only raises (a straight run of instructions that
ends in ``RAISE_VARARGS``: nothing on it can return, loop or jump past the raise), the
trace goes on along the other side and the graph checks, where the branch was, that the
condition takes that side (``torch._assert_async`` on a one-element tensor; for a number
read from tensor data, ``torch._check``, which the ShapeEnv turns into an
``_assert_scalar`` and also uses as a fact later in the trace).

If the check fails at run time, the graph raises and the glue runs the frame as Python
from its start (``runtime.fallback``, the one error fallback): the Python run raises
eager's exception, with eager's type and message (the message may format the tensor
itself) and eager's side effects before it, and an ``except`` around it behaves as in
eager.  That re-run is exact only if the failed graph changed nothing it cannot put back:
Python side effects and the random generators are put back already, and graphs of
AOTAutograd backends change inputs only after every op; a graph run op by op has changed
the inputs it changed in place before the check.  So a branch is made a check only when
no input of the graph has been changed in place so far (or has no version counter to
tell), and not inside the body of a higher-order operator (which eager runs through its
own machinery).  Otherwise it stays a graph break.
"""
from __future__ import annotations

import torch

from ... import trace
from ...runtime import CHECK_FAILED
from ..values import graph_call, SymNodeValue, TensorValue

# instructions that leave the straight run before a raise: the side does not only raise
_LEAVES = frozenset({"RETURN_VALUE", "RETURN_CONST", "YIELD_VALUE", "FOR_ITER", "JUMP_BACKWARD",
                     "JUMP_BACKWARD_NO_INTERRUPT", "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE",
                     "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE", "SEND"})
_SCAN_LIMIT = 400     # a raise this far away is no longer "one side only raises"


def only_raises(instructions: list, start: int) -> bool:
    """Whether every path from ``instructions[start]`` reaches a ``RAISE_VARARGS`` going
    forward only: conditional jumps are followed both ways (a conditional expression in
    the message, which 3.12+ compiles as two raises), nothing returns, loops or yields."""
    seen, todo = set(), [start]
    while todo:
        i = todo.pop()
        while i not in seen:
            if i >= len(instructions) or i - start > _SCAN_LIMIT:
                return False
            seen.add(i)
            ins = instructions[i]
            if ins.opname == "RAISE_VARARGS":
                break
            if ins.opname in _LEAVES or (ins.jump_target is not None and ins.jump_target <= ins.index):
                return False
            if ins.jump_target is not None:
                if ins.opname == "JUMP_FORWARD":   # (backward jumps returned above)
                    i = ins.jump_target
                    continue
                todo.append(ins.jump_target)
            i += 1
    return True


def _inputs_changed(builder) -> bool:
    """Whether the graph so far changed one of its inputs in place (its fake's version
    moved), or has an input without a version counter (which may change unseen)."""
    for node, _ in builder.placeholders:
        fake = node.meta.get("example_value")
        if not isinstance(fake, torch.Tensor):
            continue
        before = node.meta.get("kiln_version")
        if before is None or fake.is_inference() or fake._version != before:
            return True
    return False


def _decidable_at_run_time(v) -> bool:
    if isinstance(v, TensorValue):
        return not any(isinstance(s, torch.SymInt) for s in v.fake.shape) and v.fake.numel() == 1
    return isinstance(v, SymNodeValue)


def check_instead(tx, ins, cond, jump_if: bool) -> bool | None:
    """For a conditional jump (``POP_JUMP_*_IF_{jump_if}``) on ``cond``, a value Python
    cannot branch on at trace time: when one side only raises, record a run-time check
    that the condition takes the other side and return whether to jump (the other side);
    None when the branch must stay a graph break."""
    state = tx.state
    if state.side_effects.in_hop or not _decidable_at_run_time(cond) or _inputs_changed(state.builder):
        return None
    raises_if_jump = only_raises(tx.instructions, ins.jump_target) if ins.jump_target is not None else False
    raises_if_not = only_raises(tx.instructions, ins.index + 1)
    if raises_if_jump == raises_if_not:
        return None
    jump = not raises_if_jump
    expected = jump_if if jump else not jump_if     # the truth of cond on the side that goes on
    if isinstance(cond, SymNodeValue):
        fact = cond.fake if isinstance(cond.fake, torch.SymBool) else cond.fake != 0
        torch._check(fact if expected else torch.sym_not(fact))   # an _assert_scalar in the graph
        state.builder.data_dependent = True
        return jump
    holds = cond if expected else graph_call(tx, "call_function", torch.logical_not, [cond], {})
    node = state.builder.raw(torch._assert_async, (holds.node, f"{CHECK_FAILED} (the branch at {tx.location()[0]})"))
    trace.note_origin(node, tx)
    return jump
