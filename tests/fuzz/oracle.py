"""Eager is the oracle: run a generated program eagerly and compiled, list the first difference.

Why separate namespaces: the program's source is exec'd twice, so each run owns its
globals, ``cfg`` object and closures; after every call both namespaces must be in the same
state.  Inputs are rebuilt from the same seed for each run of each call.

Compared after every call, in this order (the first differing *aspect* names the failure):
``exception`` (one side raised, or different exception types), ``return.structure`` (types
and container shapes, e.g. namedtuple vs tuple), ``return.dtype|shape|stride|requires_grad|
value``, ``aliasing`` (which returned tensors are input objects, share storage with inputs or
each other, are views), ``inputs`` (mutation of the input tensors and the list/obj passed in),
``grad`` (``.grad`` of input tensors), ``state`` (globals, ``cfg``, closure cells), ``stdout``,
``rng`` (torch, ``random`` and numpy streams after the call).  The state includes the globals of
the helper module ``hm`` (a real module written to a temporary directory under a fresh name for
each run, so the eager run's writes cannot reach the compiled run), the data attributes of the
classes the program defines (class attributes the program changes), and the ``.grad`` of module
parameters.  Values compared by name or type alone (dtypes, devices, enums, modules) are made
comparable tuples by :func:`plain` first; the comparison itself is ``kiln.comparison``'s
(``_RULES``).

Tolerance: under ``eager`` values must be bitwise equal (NaN equals NaN).  Under ``aot_eager``
floating-point values may differ by fp32 noise (``rtol=1.3e-6, atol=1e-5``, torch's float32
defaults; the same for printed numbers): AOTAutograd may decompose ops and reorder sums.
"""
from __future__ import annotations

import collections
import contextlib
import enum
import importlib
import io
import itertools
import linecache
import os
import random
import re
import sys
import tempfile
import types
import warnings
from dataclasses import dataclass

import logging

import numpy as np
import torch

import kiln
from kiln.comparison import Rules, differences, roots_aliasing_differences, tensor_leaves

from .gen import GLOBAL_NAMES, Program

RTOL, ATOL = 1.3e-6, 1e-5
_DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}


@dataclass
class Divergence:
    call: int
    aspect: str
    detail: str
    exc: str = ""            # exception type involved, if any

    def key(self):
        return (self.aspect, self.exc)


_HM_DIR: list = []
_HM_IDS = itertools.count()


def make_hm(prog: Program, tag: str) -> str | None:
    """Write the helper module of ``prog`` as a fresh importable module; its name (None if unused)."""
    if not prog.uses_hm:
        return None
    if not _HM_DIR:
        _HM_DIR.append(tempfile.mkdtemp(prefix="kiln-fuzz-hm-"))
        sys.path.insert(0, _HM_DIR[0])
    name = f"fuzz_hm_{os.getpid()}_{tag}_{next(_HM_IDS)}"
    with open(os.path.join(_HM_DIR[0], name + ".py"), "w") as f:
        f.write(prog.hm_source())
    importlib.invalidate_caches()
    return name


def drop_hm(name: str | None) -> None:
    if name:
        sys.modules.pop(name, None)
        with contextlib.suppress(OSError):
            os.remove(os.path.join(_HM_DIR[0], name + ".py"))


def plain(obj):
    """``obj`` with the values :func:`leaves` compares only by type turned into comparable tuples."""
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, collections.deque):
        return ("<deque>", obj.maxlen, [plain(v) for v in obj])
    if isinstance(obj, (type({}.keys()), type({}.values()), type({}.items()))):
        return (f"<{type(obj).__name__}>", [plain(v) for v in obj])
    if isinstance(obj, range):
        return ("<range>", obj.start, obj.stop, obj.step)
    if isinstance(obj, enum.Enum):
        return ("<enum>", type(obj).__name__, obj.name)
    if isinstance(obj, (torch.dtype, torch.device, torch.layout)):
        return (f"<{type(obj).__name__}>", str(obj))
    if isinstance(obj, types.ModuleType):
        return ("<module>",)
    if type(obj) in (list, tuple):
        return type(obj)(plain(v) for v in obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[plain(v) for v in obj])
    if type(obj) is dict:
        return {k: plain(v) for k, v in obj.items()}
    return obj


def _class_attrs(cls) -> dict:
    return {k: plain(v) for k, v in vars(cls).items()
            if not k.startswith("_") and not callable(v)
            and not isinstance(v, (property, staticmethod, classmethod, types.MemberDescriptorType))}


def load(source: str, name: str) -> dict:
    """Exec ``source`` into a fresh module registered in ``sys.modules`` (as an imported module is:
    dataclasses and pickling look their class's module up there) and in linecache (tracebacks);
    :func:`unload` removes it."""
    fname = f"<fuzz {name}>"
    linecache.cache[fname] = (len(source), None, source.splitlines(True), fname)
    mod = types.ModuleType(f"fuzzprog_{name}")
    sys.modules[mod.__name__] = mod
    exec(compile(source, fname, "exec"), mod.__dict__)
    return mod.__dict__


def unload(ns: dict | None) -> None:
    if ns is not None:
        sys.modules.pop(ns["__name__"], None)


def make_inputs(spec: dict, ns: dict, seed: int, call: int) -> list:
    g = torch.Generator().manual_seed(1000 * seed + call)
    dtype, shape = _DTYPES[spec["dtype"]], spec["shape"]

    def t(rg):
        if dtype == torch.int64:
            return torch.randint(-3, 4, shape, generator=g)
        return torch.randn(shape, generator=g, dtype=dtype).requires_grad_(rg)

    x, y = t(spec["rg_x"]), t(spec["rg_y"])
    lst = [t(False) for _ in range(spec["lst"])]
    return [x, y, spec["s"], lst, ns[spec["obj"]]()]


def _state(ns: dict):
    st = {n: ns[n] for n in GLOBAL_NAMES if n in ns}
    for n in ("cfg", "cnt"):
        if n in ns:
            st[n] = ns[n]
    for n, v in ns.items():
        if isinstance(v, type) and v.__module__ == ns["__name__"]:
            st[f"class {n}"] = _class_attrs(v)
    if "smod" in ns:
        st["smod.grad"] = [p.grad for p in ns["smod"].parameters()]
    hm = ns.get("hm")
    if isinstance(hm, types.ModuleType):
        for n, v in sorted(vars(hm).items()):
            if isinstance(v, type):
                st[f"hm class {n}"] = _class_attrs(v)
            elif not n.startswith("__") and not isinstance(v, (types.ModuleType, types.FunctionType)):
                st[f"hm.{n}"] = v
    for n in ("bump", "scale"):
        if n in ns:
            st[n] = [c.cell_contents for c in ns[n].__closure__]
    return st


def _call(fn, args, ns, call):
    torch.manual_seed(100 + call)
    random.seed(call)
    np.random.seed(call)
    buf = io.StringIO()
    grad = torch.is_grad_enabled()
    before = [t for _, t in tensor_leaves(args, "inputs")]
    try:
        with contextlib.redirect_stdout(buf), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out, exc = fn(*args), None
    except Exception as e:  # the program raising is behaviour to compare
        out, exc = None, e
    finally:
        torch.set_grad_enabled(grad)
    rng = (torch.rand(3), random.random(), float(np.random.rand()))
    return dict(out=out, exc=exc, stdout=buf.getvalue(), rng=rng, before=before, args=args, state=_state(ns))


def _close(a, b, tol):
    if isinstance(a, float) and isinstance(b, float):
        if a != a and b != b:
            return True
        return a == b or (tol and abs(a - b) <= ATOL + RTOL * abs(b))
    return a == b


#: by tolerance: bitwise (NaN equals NaN) or within fp32 noise; strides too; the two runs
#: exec'd separate copies of the program, so classes and functions agree by name
_RULES = {tol: Rules(exact=not tol, rtol=RTOL if tol else None, atol=ATOL if tol else None,
                     float_rtol=RTOL if tol else 0.0, float_atol=ATOL if tol else 0.0, strides=True,
                     names_only=True)
          for tol in (False, True)}


def compare_tree(what, e, c, tol):
    """(aspect, detail) of the first difference (``kiln.comparison``), or None."""
    found = differences(plain(e), plain(c), _RULES[bool(tol)], what)
    if not found:
        return None
    first = found[0]
    return f"{what}.{'structure' if first.aspect == 'type' else first.aspect}", str(first)


_NUM = re.compile(r"-?\d+\.\d*(?:e[-+]?\d+)?")


def _same_stdout(a: str, b: str, tol: bool) -> bool:
    if a == b or not tol:
        return a == b
    if _NUM.sub("#", a) != _NUM.sub("#", b):
        return False
    return all(_close(float(u), float(v), True) for u, v in zip(_NUM.findall(a), _NUM.findall(b)))


def compare_call(i, e, c, tol) -> Divergence | None:
    ee, ce = e["exc"], c["exc"]
    if (ee is None) != (ce is None) or (ee is not None and type(ee) is not type(ce)):
        name = type(ce or ee).__name__
        return Divergence(i, "exception", f"eager: {ee!r}\ncompiled: {ce!r}", name)
    if ee is None:
        d = compare_tree("return", e["out"], c["out"], tol)
        if d:
            return Divergence(i, *d)
        found = roots_aliasing_differences(("inputs", "return"), (e["args"], e["out"]), (c["args"], c["out"]),
                                           e["before"], c["before"])
        if found:
            return Divergence(i, "aliasing", "\n".join(found))
    d = compare_tree("inputs", e["args"], c["args"], tol)
    if d:
        return Divergence(i, *d)
    ge = [t.grad for t in e["before"]]
    gc = [t.grad for t in c["before"]]
    d = compare_tree("grad", ge, gc, tol)
    if d:
        return Divergence(i, *d)
    d = compare_tree("state", e["state"], c["state"], tol)
    if d:
        return Divergence(i, *d)
    if not _same_stdout(e["stdout"], c["stdout"], tol):
        return Divergence(i, "stdout", f"eager {e['stdout']!r}\ncompiled {c['stdout']!r}")
    re_, rc = e["rng"], c["rng"]
    if not (torch.equal(re_[0], rc[0]) and re_[1:] == rc[1:]):
        return Divergence(i, "rng", f"eager {re_}\ncompiled {rc}")
    return None


def aot_wrapper(gm, example_inputs):
    """A user's backend around AOTAutograd that declares nothing about itself (``--backend
    aot_wrapper``): Kiln cannot tell it functionalizes graphs (class
    AOT_UNDECLARED_FUNCTIONAL_BACKEND, tests/fuzz/test_aot_divergences.py)."""
    from kiln.backends.aot_eager import aot_eager  # imported on use: only this backend needs it

    return aot_eager(gm, example_inputs)


BACKENDS = {"aot_wrapper": aot_wrapper}


def check_program(prog: Program, backend: str, calls=None) -> Divergence | None:
    """Run ``prog`` eagerly and compiled under ``backend``; the first divergence or None."""
    hm_e, hm_c = make_hm(prog, f"{prog.seed}e"), make_hm(prog, f"{prog.seed}c")
    saved = kiln.config.suppress_errors
    ns_e = ns_c = None
    try:
        ns_e = load(prog.source(hm_e or "fuzz_hm"), f"{prog.seed}e")
        ns_c = load(prog.source(hm_c or "fuzz_hm"), f"{prog.seed}c")
        kiln.reset()
        kiln.config.suppress_errors = False
        compiled = kiln.compile(ns_c["prog"], backend=BACKENDS.get(backend, backend))
        for i, spec in enumerate(calls or prog.calls):
            e = _call(ns_e["prog"], make_inputs(spec, ns_e, prog.seed, i), ns_e, i)
            c = _call(compiled, make_inputs(spec, ns_c, prog.seed, i), ns_c, i)
            d = compare_call(i, e, c, tol=backend != "eager")
            if d:
                return d
        return None
    finally:
        kiln.config.suppress_errors = saved
        kiln.reset()
        drop_hm(hm_e)
        drop_hm(hm_c)
        unload(ns_e)
        unload(ns_c)


def quiet_fake_tensor_logs() -> None:
    """FakeTensor logs a traceback for every op whose meta raises (e.g. ``mean()`` on int64, which
    eager rejects too): expected behaviour in a fuzz campaign, so silence it there."""
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
