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

A second, optional part in C++ (``_tensor_facts.cpp``) reads a tensor's metadata from
the at::Tensor instead of through its Python attributes; it is built the same way
against torch's headers (its cache key adds torch's version and place), takes ~10 s of
CPU once, and where it cannot be built the plans read the attributes (same decisions,
slower).

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

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
_SOURCE = os.path.join(_HERE, "_guard_plan.c")
_FACTS_SOURCE = os.path.join(_HERE, "_tensor_facts.cpp")
_HEADER = os.path.join(_HERE, "_tensor_facts.h")
# the parts _guard_plan.c includes: the cache key hashes them with it
_PLAN_PARTS = [os.path.join(_HERE, name) for name in ("_guard_reads.h", "_guard_tensors.h")]
# not a cache of Kiln's state (kiln.reset() must not unload an extension module): the
# loaded module, or the reason it is not there; computed once per process
_STATE: dict = {}


def _cache_dir() -> str:
    root = os.environ.get("KILN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "kiln")
    return os.path.join(root, "native")


def _compiler(names) -> str | None:
    for name in names:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _build(path: str, compiler: str, flags: list) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
    os.close(fd)
    try:
        cmd = [compiler, "-O2", "-shared", "-fPIC", *flags, "-o", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr.strip()[-2000:]}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _cached_extension(name: str, sources: list, key: str, compiler_names, flags: list):
    """Extension ``name`` built from ``sources`` (the first is compiled) with ``flags``,
    cached under the sources' hash, ``key`` and the interpreter's tag; loaded."""
    digest = hashlib.sha256(key.encode())
    for src in sources:
        with open(src, "rb") as f:
            digest.update(f.read())
    tag = sys.implementation.cache_tag + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")
    path = os.path.join(_cache_dir(), f"{name}-{digest.hexdigest()[:16]}.{tag}")
    if not os.path.exists(path):
        compiler = _compiler(compiler_names)
        if compiler is None:
            raise RuntimeError(f"no compiler ({', '.join(n for n in compiler_names if n)}) on PATH")
        include = sysconfig.get_paths()["include"]
        if not os.path.exists(os.path.join(include, "Python.h")):
            raise RuntimeError(f"no Python.h in {include}")
        _build(path, compiler, ["-I", include, "-I", _HERE, sources[0], *flags])
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _load_facts(module) -> str | None:
    """Build and plug in the C++ tensor-facts part; why not, if it could not be."""
    if os.environ.get("KILN_NO_TENSOR_FACTS"):
        return "KILN_NO_TENSOR_FACTS is set"
    root = os.path.dirname(torch.__file__)
    include, lib = os.path.join(root, "include"), os.path.join(root, "lib")
    flags = ["-std=c++17", "-w", "-I", include, "-I", os.path.join(include, "torch", "csrc", "api", "include"),
             "-L", lib, "-ltorch_python", "-ltorch", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{lib}",
             f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    try:
        facts = _cached_extension("_tensor_facts", [_FACTS_SOURCE, _HEADER], f"{torch.__version__} {root}",
                                  (os.environ.get("CXX"), "g++", "c++"), flags)
        module.use_tensor_facts(facts.api, torch._C.TensorBase)
    except Exception as e:   # optional: tensor checks read the attributes instead
        return f"{type(e).__name__}: {e}"
    return None


def _state():
    if not _STATE:
        try:
            module = _cached_extension("_guard_plan", [_SOURCE, _HEADER, *_PLAN_PARTS], "",
                                       (os.environ.get("CC"), "gcc", "cc"), [])
            _STATE["module"], _STATE["reason"] = module, None
            _STATE["facts_reason"] = _load_facts(module)
        except Exception as e:   # any failure to build or load: run the Python guards
            _STATE["module"], _STATE["reason"], _STATE["facts_reason"] = None, f"{type(e).__name__}: {e}", None
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


def tensor_facts_reason() -> str | None:
    """Why tensor checks read attributes instead of the C++ facts (None when they do not)."""
    if guard_plan_module() is None:
        return unavailable_reason()
    return _state()["facts_reason"]


def active_path() -> str:
    """``"C"`` or ``"Python"``: which guards new entries get (``kiln bench`` prints it)."""
    return "C" if guard_plan_module() is not None else "Python"
