"""``SCRIPT.py:NAME`` command-line targets: load the script, find NAME, make its inputs.

Shared by ``kiln explain``, ``kiln report``, ``kiln minify`` and ``kiln bisect``, so they
accept the same targets and fail the same clean way.  NAME is a function, an
``nn.Module`` instance, or an ``nn.Module`` subclass (instantiated with no arguments)
defined by the script; it is called with what ``NAME_inputs()`` (or else ``example_inputs()``)
returns: a tuple of positional arguments, ``(args, kwargs)``, or a single argument.
Without either, it is called with no arguments.

The ``--backend`` they take is read by :func:`resolve_backend`.  Every problem is a
:class:`TargetError` whose message is one sentence saying what is
missing and how to provide it; commands turn it into a usage error (exit status 2)
instead of a traceback from inside Kiln.
"""
from __future__ import annotations

import importlib
import inspect
import os
import runpy
import sys
from dataclasses import dataclass, field
from typing import Any

import torch

from ..backends import list_backends

#: for --help texts
INPUTS_HELP = ("NAME is called with the arguments returned by NAME_inputs() (or example_inputs()) if the "
               "script defines one: a tuple of positional arguments, or (args, kwargs); otherwise with none, "
               "and a NAME that needs arguments is an error saying which.")


class TargetError(Exception):
    """A SCRIPT.py:NAME target that cannot be run; the message says what to do."""


def resolve_backend(text: str) -> Any:
    """A ``--backend`` argument: a registered name stays a name; ``module:attr`` is imported
    (the current directory is searched first, as ``python -m`` would).  A name that is
    neither is a :class:`TargetError` listing the registered ones."""
    if ":" not in text:
        if text not in list_backends():
            raise TargetError(f"unknown backend {text!r}; known: {', '.join(list_backends())} (or module:attr)")
        return text
    module, _, attr = text.partition(":")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())   # as `python -m` would: modules in the current directory
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as e:
        raise TargetError(f"cannot import backend {text!r}: {type(e).__name__}: {e}") from None
    return obj


@dataclass
class ScriptTarget:
    path: str
    name: str
    obj: object
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    namespace: dict = field(default_factory=dict)   # the script's globals after running it

    @property
    def spec(self) -> str:
        return f"{self.path}:{self.name}"

    @property
    def fn(self):
        """What to call (the function or module)."""
        return self.obj


def split_spec(spec: str) -> tuple[str, str]:
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise TargetError(f"expected SCRIPT.py:NAME, got {spec!r}")
    return path, name


def load(spec: str, run_name: str = "__kiln_target__") -> ScriptTarget:
    """Run the script, find NAME and its inputs, and check that they fit its signature."""
    path, name = split_spec(spec)
    if not os.path.exists(path):
        raise TargetError(f"no such script: {path}")
    try:
        namespace = runpy.run_path(path, run_name=run_name)
    except SystemExit as e:
        raise TargetError(f"{path} called sys.exit({e.code}) while being loaded; guard its main code with "
                          f"`if __name__ == '__main__':`") from None
    except Exception as e:
        raise TargetError(f"running {path} raised {type(e).__name__}: {e}") from e
    if name not in namespace:
        known = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_")
                       and getattr(v, "__module__", None) == run_name)
        raise TargetError(f"{path} defines no {name!r}; functions and modules there: {', '.join(known) or 'none'}")
    obj = namespace[name]
    if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        try:
            obj = obj()
        except Exception as e:
            raise TargetError(f"{name}() in {path} (an nn.Module class) could not be built with no arguments: "
                              f"{type(e).__name__}: {e}") from e
    if not callable(obj):
        raise TargetError(f"{name} in {path} is a {type(obj).__name__}, not a function or nn.Module")
    maker_name = f"{name}_inputs" if f"{name}_inputs" in namespace else (
        "example_inputs" if "example_inputs" in namespace else None)
    args, kwargs = (), {}
    if maker_name is not None:
        try:
            made = namespace[maker_name]()
        except Exception as e:
            raise TargetError(f"{maker_name}() in {path} raised {type(e).__name__}: {e}") from e
        args, kwargs = _as_call(made)
    _check_fits(obj, name, path, maker_name, args, kwargs)
    return ScriptTarget(path, name, obj, args, kwargs, namespace)


def _as_call(made) -> tuple[tuple, dict]:
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], tuple) and isinstance(made[1], dict):
        return made
    return (made if isinstance(made, tuple) else (made,)), {}


def _check_fits(obj, name, path, maker_name, args, kwargs) -> None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return      # no signature to check against: the call itself will say
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        if maker_name is None:
            missing = [p.name for p in sig.parameters.values()
                       if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                                              p.KEYWORD_ONLY)]
            raise TargetError(
                f"{name}() needs argument(s) {', '.join(missing) or '?'} but {path} defines neither "
                f"{name}_inputs() nor example_inputs(); add one that returns them (a tuple of positional "
                f"arguments, or (args, kwargs))") from None
        raise TargetError(f"the arguments from {maker_name}() in {path} do not fit {name}(): {e}") from None


def load_target(spec: str, run_name: str) -> ScriptTarget:
    """:func:`load` under the name the minifier's commands use."""
    return load(spec, run_name=run_name)
