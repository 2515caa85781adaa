"""The scope of one higher-order operator body being traced, and the errors that
bodies raise when they break an operator's rules.

A body may read anything outside it but change only what it created itself: eager
torch runs cond and map bodies through a compiler of its own, and none of the
operators has a meaning for a body that changes outer state.  ``SideEffects`` asks
the innermost scope (``side_effects.in_hop``) whether a write is allowed and raises
the scope's ``mutation_error`` when it is not.  For cond, map, while_loop and scan
the error is *fatal*: in default mode as under fullgraph it reaches the user instead
of becoming a graph break, since running the operator as Python could not succeed
either (``FATAL_OPS``).
"""
from __future__ import annotations

import ast
import os

from ...exc import Unsupported


class HopRuleError(Unsupported):
    """A body breaks its operator's rules; raised in every mode (see module docstring)."""

    fatal = True


class HopBodyMutation(HopRuleError):
    """A body changes state outside its own scope.

    The message names the statement, what it mutates (read from the user's source line,
    so it reads the same whatever kind of object holds the state), the operator and
    the user's file:line; the location is attached by the tracer where the write runs.
    """

    def __init__(self, what: str, op: str, fatal: bool = True):
        self.what = what
        self.op = op
        self.fatal = fatal
        super().__init__(f"{what} is mutated inside the body of `{op}`; higher-order operator bodies "
                         f"may not change outer state")

    def with_location(self, location, source_line):
        if self.location is None and location:
            stmt = (source_line or "").strip()
            target, stmt = mutated_expression(stmt)
            target = target or self.what
            where = _short_location(location)
            if stmt:
                self.reason = (f"`{stmt}` mutates `{target}` inside the body of `{self.op}` ({where}); "
                               f"higher-order operator bodies may not change outer state")
            else:
                self.reason = (f"{self.what} is mutated inside the body of `{self.op}` ({where}); "
                               f"higher-order operator bodies may not change outer state")
        return super().with_location(location, source_line)


def _short_location(location: str) -> str:
    path, _, line = location.rpartition(":")
    return f"{os.path.basename(path)}:{line}" if path else location


def mutated_expression(stmt: str) -> tuple[str | None, str]:
    """What a one-line statement writes to (``self.w += 1`` -> ``self.w``,
    ``acc.append(x)`` -> ``acc``, ``acc[0] = x`` -> ``acc``; None if unclear), and the
    statement without its comment."""
    try:
        tree = ast.parse(stmt)
    except SyntaxError:
        return None, stmt
    if len(tree.body) != 1:
        return None, stmt
    node = tree.body[0]
    stmt = ast.get_source_segment(stmt, node) or stmt
    target = None
    if isinstance(node, ast.AugAssign):
        target = node.target
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        target = next((t for t in targets if isinstance(t, (ast.Attribute, ast.Subscript))), targets[0])
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
            and isinstance(node.value.func, ast.Attribute):
        target = node.value.func.value
    elif isinstance(node, ast.Delete) and node.targets:
        target = node.targets[0]
    if isinstance(target, ast.Subscript):
        target = target.value
    return (ast.unparse(target) if target is not None else None), stmt



# Operators that eager torch itself runs only by compiling their bodies: a body that
# breaks their rules cannot run as Python either, so their errors are fatal.  The other
# operators (checkpoint, autograd.Function, torch.func, flex_attention) run such a body
# eagerly, so there a mutation is an ordinary refusal: a graph break in default mode.
FATAL_OPS = frozenset({"cond", "map", "while_loop", "scan"})


class HopScope:
    """One body being traced: the operator's name, its graph builder, and the first
    Value serial made inside it (values made later were created by the body)."""

    def __init__(self, op: str, builder, start_serial: int):
        self.op = op
        self.builder = builder
        self.start_serial = start_serial
        self.created_ids: set = set()      # NewObjectValues made in the body (SideEffects.track_new)
        self.foreign_ids: set = set()      # the body's own arguments: made here, owned by the caller

    def owns(self, value) -> bool:
        """Whether ``value`` was created by the body (its own containers, objects, cells)."""
        if id(value) in self.foreign_ids:
            return False
        return id(value) in self.created_ids or getattr(value, "_serial", 0) > self.start_serial

    def owns_tensor(self, value) -> bool:
        """A tensor the body computed: its node is an op of this body's graph."""
        node = getattr(value, "node", None)
        return node is not None and node.graph is self.builder.graph and node.op != "placeholder"

    def mutation_error(self, what: str) -> HopBodyMutation:
        return HopBodyMutation(what, self.op, fatal=self.op in FATAL_OPS)
