"""Kiln's C accelerator: built on first use with the machine's C compiler, then cached.

Why on first use and not at install: ``make test`` on a fresh clone installs with
``pip install -e .``, which builds nothing, and an extension built at install time
would tie the checkout to one interpreter while ``.venv``, ``.venv-3.12`` and
``.venv-3.13`` share it.  So the extension (``_guard_plan.c``, next to this file) is
compiled the first time it is asked for, into a cache directory keyed by the
interpreter's version and ABI and the source's hash (``$KILN_CACHE_DIR``, else
``$XDG_CACHE_HOME/kiln`` or ``~/.cache/kiln``), with gcc/cc against the interpreter's
own headers; later processes load the cached file.  Builds write to a temporary name
and rename it into place, so concurrent processes (pytest-xdist workers) never load a
half-written file.

When it cannot be built (no compiler, no Python headers) or ``KILN_NO_C=1``
(``kiln.config.no_c``), ``guard_plan_module()`` is None and Kiln runs the generated
Python guards, which are the specification anyway: nothing changes but the speed.
The reason is kept (``unavailable_reason``) for ``kiln bench`` and the tests.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from ..config import config

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_guard_plan.c")
# not a cache of Kiln's state (kiln.reset() must not unload an extension module): the
# loaded module, or the reason it is not there; computed once per process
_STATE: dict = {}


def _cache_dir() -> str:
    root = os.environ.get("KILN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "kiln")
    return os.path.join(root, "native")


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "gcc", "cc"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _build(path: str) -> None:
    cc = _compiler()
    if cc is None:
        raise RuntimeError("no C compiler (gcc or cc) on PATH")
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise RuntimeError(f"no Python.h in {include}")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
    os.close(fd)
    try:
        cmd = [cc, "-O2", "-shared", "-fPIC", "-I", include, _SOURCE, "-o", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr.strip()[-2000:]}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _load():
    with open(_SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    tag = sys.implementation.cache_tag + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")
    path = os.path.join(_cache_dir(), f"_guard_plan-{digest}.{tag}")
    if not os.path.exists(path):
        _build(path)
    loader = importlib.machinery.ExtensionFileLoader("_guard_plan", path)
    spec = importlib.util.spec_from_file_location("_guard_plan", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _state():
    if not _STATE:
        try:
            _STATE["module"], _STATE["reason"] = _load(), None
        except Exception as e:   # any failure to build or load: run the Python guards
            _STATE["module"], _STATE["reason"] = None, f"{type(e).__name__}: {e}"
    return _STATE


def guard_plan_module():
    """The built ``_guard_plan`` extension, or None (``config.no_c``, or it cannot be built)."""
    if config.no_c:
        return None
    return _state()["module"]


def unavailable_reason() -> str | None:
    """Why the accelerator is not in use (None when it is)."""
    if config.no_c:
        return "KILN_NO_C / kiln.config.no_c is set"
    return _state()["reason"]


def active_path() -> str:
    """``"C"`` or ``"Python"``: which guards new entries get (``kiln bench`` prints it)."""
    return "C" if guard_plan_module() is not None else "Python"
