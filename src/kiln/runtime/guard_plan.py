"""Guard plans: an entry's guards as steps the C accelerator runs (``_guard_plan.c``).

The generated Python guard function is the specification; a plan is the same walk
written as data (``capture/basics/guards.py``: ``GuardCodegen.plan`` makes it from the same
sorted guard list, binding the same sources in the same order): slots for the frame's
arguments and every source read, steps that read a source into a slot, steps that
check a fact about slot values, and the slots handed to the glue.  A guard that has no
step kind of its own (symbolic-shape relations, rarer checks) is a ``C_PY`` step: its
own check text as a Python lambda over the slots, run in its place in the order, so
the plan never has to know a guard kind to take its decision.

``make_guard`` returns the Plan object when the accelerator is built
(``native.guard_plan_module``), else the Python guard function itself; both are called
the same way (``guard(fn, *args, **kwargs)``).  A call whose arguments do not bind the
simple way is handed to the Python function by the Plan.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

from ..config import config
from ..exc import GuardPlanMismatch
from . import native

# step codes, as in _guard_plan.c
L_ATTR, L_ITEM, L_CONST, L_CALL = 0, 1, 2, 3
C_IS, C_TYPE, C_EQ, C_LEN, C_TENSOR, C_SAME, C_ATTR_IS = 10, 11, 12, 13, 14, 15, 16
C_FALSY_ATTRS, C_IN_DICT, C_IN, C_HASATTR, C_TRUTH, C_CALL_IS = 17, 18, 19, 20, 21, 22
C_CALL_EQ, C_METHOD_IS, C_KEYS, C_PY = 23, 24, 25, 26


@dataclass(frozen=True)
class Lambda:
    """Python source of a callable a step runs (``lambda ___a0: ...``), evaluated in the
    entry's namespace when the plan is built."""
    text: str


@dataclass
class PlanSpec:
    """A guard plan before the entry's namespace exists: ``steps`` are tuples whose
    callables may still be ``Lambda`` texts; ``handoff`` the slots returned (None: True)."""
    nslots: int
    steps: list
    handoff: tuple | None


def parameter_names(code) -> list:
    """The guard function's parameters in slot order: ``___fn``, the positional ones, the
    keyword-only ones, then ``*args`` and ``**kwargs`` (``codegen.render_params``'s)."""
    n = code.co_argcount + code.co_kwonlyargcount
    names = ["___fn", *code.co_varnames[:n]]
    extra = int(bool(code.co_flags & inspect.CO_VARARGS)) + int(bool(code.co_flags & inspect.CO_VARKEYWORDS))
    return names + list(code.co_varnames[n:n + extra])


def make_guard(spec: PlanSpec | None, python_guard, namespace: dict, code, defaults: tuple):
    """The callable an entry uses as its guard: a Plan taking ``python_guard``'s decisions,
    or ``python_guard`` itself (no accelerator, or no plan)."""
    module = native.guard_plan_module()
    if module is None or spec is None:
        return python_guard
    made: dict = {}

    def resolve(x):
        if isinstance(x, Lambda):
            if x not in made:
                made[x] = eval(x.text, namespace)   # noqa: S307 - Kiln's own generated text
            return made[x]
        return x

    steps = [tuple(resolve(x) for x in step) for step in spec.steps]
    pos_defaults, kw_defaults = defaults
    npos = 1 + code.co_argcount
    names = tuple(parameter_names(code)[:npos + code.co_kwonlyargcount])
    plan = module.Plan(python_guard, npos, 1 + code.co_posonlyargcount if code.co_posonlyargcount else 0,
                       code.co_kwonlyargcount, bool(code.co_flags & inspect.CO_VARARGS),
                       bool(code.co_flags & inspect.CO_VARKEYWORDS), names, pos_defaults, kw_defaults,
                       spec.nslots, steps, spec.handoff)
    return crosschecked(plan, python_guard) if config.guard_crosscheck else plan


def _alike(a, b) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(x is y for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def crosschecked(plan, python_guard):
    """A guard that runs both ``plan`` and ``python_guard`` and raises where they differ
    (``config.guard_crosscheck``)."""
    def guard(*args, **kwargs):
        got, expected = plan(*args, **kwargs), python_guard(*args, **kwargs)
        if not _alike(got, expected):
            raise GuardPlanMismatch(f"the C guard plan returned {got!r:.200} where the Python guard "
                                    f"{python_guard.__name__} returned {expected!r:.200}")
        return expected
    guard.python = python_guard
    guard.plan = plan
    return guard


def python_guard_of(guard):
    """The generated Python function behind ``guard`` (a Plan or that function)."""
    return getattr(guard, "python", guard)
