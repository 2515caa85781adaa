"""``SCRIPT.py:NAME`` on the command line: load a function or module and its example inputs.

Shared by ``kiln explain``, ``kiln minify`` and ``kiln bisect`` so that they agree on
what a target is.  NAME is a function, an ``nn.Module`` instance, or an ``nn.Module``
subclass (instantiated with no arguments) defined by the script.  Its arguments come
from ``NAME_inputs()`` or else ``example_inputs()`` if the script defines one: a tuple
of positional arguments, a single argument, or ``(args_tuple, kwargs_dict)``.
"""
from __future__ import annotations

import os
import runpy
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

__all__ = ["ScriptTarget", "TargetError", "load_target"]


class TargetError(Exception):
    """The target cannot be loaded; the message says why, naming the script."""


@dataclass
class ScriptTarget:
    fn: Callable
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    namespace: dict = field(default_factory=dict)


def load_target(spec: str, run_name: str) -> ScriptTarget:
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise TargetError(f"expected SCRIPT.py:NAME, got {spec!r}")
    if not os.path.exists(path):
        raise TargetError(f"no such script: {path}")
    namespace = runpy.run_path(path, run_name=run_name)
    if name not in namespace:
        known = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_"))
        raise TargetError(f"{path} defines no {name!r}; callables there: {', '.join(known)}")
    target = namespace[name]
    if isinstance(target, type) and issubclass(target, torch.nn.Module):
        target = target()
    maker = namespace.get(f"{name}_inputs") or namespace.get("example_inputs")
    args: tuple = ()
    kwargs: dict[str, Any] = {}
    if maker is not None:
        made = maker()
        if isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], dict) and isinstance(made[0], tuple):
            args, kwargs = made
        else:
            args = made if isinstance(made, tuple) else (made,)
    return ScriptTarget(target, tuple(args), dict(kwargs), namespace)
