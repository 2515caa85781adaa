"""Shrink a failing program while it keeps failing the same way, and write it as a script.

Why: a random program is mostly noise; the report needs the few statements that matter.
"The same way" is the same (aspect, exception type) of :class:`~tests.fuzz.oracle.Divergence`.
Greedy passes drop calls (keeping the last, which usually holds the changed fact, plus
enough before it), return expressions and body statements until nothing more can go.
"""
from __future__ import annotations

import copy
import textwrap

from .gen import Program
from .oracle import Divergence, check_program


def _fails(prog: Program, backend: str, key) -> bool:
    try:
        d = check_program(prog, backend)
    except Exception:  # noqa: BLE001 - a harness crash is not the same failure
        return False
    return d is not None and d.key() == key


def minimize(prog: Program, backend: str, div: Divergence, budget: int = 200) -> Program:
    key = div.key()
    best = copy.deepcopy(prog)
    best.calls = best.calls[: div.call + 1]
    tries = 0
    changed = True
    while changed and tries < budget:
        changed = False
        for field in ("calls", "returns", "body"):
            i = 0
            while i < len(getattr(best, field)) and tries < budget:
                seq = getattr(best, field)
                if field == "calls" and len(seq) == 1:
                    break
                cand = copy.deepcopy(best)
                setattr(cand, field, seq[:i] + seq[i + 1:])
                tries += 1
                if _fails(cand, backend, key):
                    best, changed = cand, True
                else:
                    i += 1
    return best


def _literal(src: str) -> str:
    if "'''" in src or "\\" in src:
        return repr(src)
    return "'''\\\n" + src + "'''"


def _backend_def(backend: str) -> str:
    if backend == "aot_wrapper":   # a user's wrapper around aot_eager that declares nothing
        return ("from kiln.backends.aot_eager import aot_eager\n\n\n"
                "def BACKEND(gm, example_inputs):\n    return aot_eager(gm, example_inputs)\n")
    return f"BACKEND = {backend!r}\n"


def repro_script(prog: Program, backend: str, div: Divergence) -> str:
    """A standalone script: the program, its inputs, eager vs compiled, and the difference."""
    calls = "\n".join(f"    {c!r}," for c in prog.calls)
    hm = _literal(prog.hm_source()) if prog.uses_hm else "None"
    detail = textwrap.indent(div.detail, "#   ")
    return f'''"""Kiln fuzz repro: backend={backend!r}, aspect={div.aspect!r}, exception={div.exc or '-'},
features={', '.join(prog.features)}, seed={prog.seed}.  Run: python THIS_FILE (from the repo root).

Divergence on call {div.call}:
{detail}
"""
import random, io, contextlib, os, sys, tempfile, types
import numpy as np
import torch
import kiln

SRC = {_literal(prog.source("HM_NAME"))}
HM_SRC = {hm}  # the helper module `hm`: written as a real module, one fresh copy per run
{_backend_def(backend)}

CALLS = [
{calls}
]
DTYPES = {{"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}}


def inputs(spec, ns, call):
    g = torch.Generator().manual_seed(1000 * {prog.seed} + call)
    dt, shape = DTYPES[spec["dtype"]], spec["shape"]
    def t(rg):
        if dt == torch.int64:
            return torch.randint(-3, 4, shape, generator=g)
        return torch.randn(shape, generator=g, dtype=dt).requires_grad_(rg)
    x, y = t(spec["rg_x"]), t(spec["rg_y"])
    return [x, y, spec["s"], [t(False) for _ in range(spec["lst"])], ns[spec["obj"]]()]


def run(fn, ns, call, spec):
    torch.manual_seed(100 + call); random.seed(call); np.random.seed(call)
    args, buf = inputs(spec, ns, call), io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            out = fn(*args)
    except Exception as e:
        out = e
    return out, args, buf.getvalue(), torch.rand(3)


if __name__ == "__main__":
    hm_dir = tempfile.mkdtemp()
    sys.path.insert(0, hm_dir)
    mods = [types.ModuleType("fuzz_e"), types.ModuleType("fuzz_c")]
    sys.modules.update((m.__name__, m) for m in mods)   # dataclasses look their module up there
    ns_e, ns_c = (m.__dict__ for m in mods)
    for tag, ns in (("e", ns_e), ("c", ns_c)):
        if HM_SRC is not None:
            with open(os.path.join(hm_dir, f"fuzz_hm_{{tag}}.py"), "w") as f:
                f.write(HM_SRC)
        exec(SRC.replace("HM_NAME", f"fuzz_hm_{{tag}}"), ns)
    kiln.config.suppress_errors = False   # as the oracle: a capture error is a failure, not a fallback
    compiled = kiln.compile(ns_c["prog"], backend=BACKEND)
    for i, spec in enumerate(CALLS):
        for name, fn, ns in (("eager", ns_e["prog"], ns_e), ("kiln", compiled, ns_c)):
            out, args, printed, rng = run(fn, ns, i, spec)
            ts = [o for o in (out if isinstance(out, tuple) else ()) if isinstance(o, torch.Tensor)]
            print(f"call {{i}} {{name:5}} out={{out!r}}")
            print(f"           meta={{[(t.dtype, tuple(t.shape), t.stride(), t.requires_grad) for t in ts]}}")
            print(f"           inputs={{args[:2]}} grads={{[a.grad for a in args[:2]]}} printed={{printed!r}} rng={{rng}}")
            hm = ns.get("hm")
            cls = {{k: {{a: b for a, b in vars(v).items() if not a.startswith("_") and not callable(b)}}
                   for k, v in ns.items() if isinstance(v, type) and v.__module__ == ns["__name__"]}}
            print(f"           globals={{ {{k: v for k, v in ns.items() if k.isupper()}} }} class attrs={{cls}} "
                  f"hm={{ {{k: v for k, v in vars(hm).items() if k.isupper()}} if hm else None }}")
'''
