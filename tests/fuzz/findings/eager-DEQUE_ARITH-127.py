"""Kiln fuzz repro: backend='eager', aspect='return.structure', exception=-,
features=deque, seed=127.  Run: python THIS_FILE (from the repo root).

Divergence on call 0:
#   eager [('return', ('<type>', 'tuple')), ('return.len', 'int'), ('return[0]', ('<type>', 'tuple')), ('return[0].len', 'int'), ('return[0][0]', 'str'), ('return[0][1]', 'NoneType'), ('return[0][2]', ('<type>', 'list')), ('return[0][2].len', 'int'), ('return[0][2][0]', 'Tensor'), ('return[0][2][1]', 'Tensor'), ('return[0][2][2]', 'Tensor'), ('return[0][2][3]', 'Tensor')]
#   compiled [('return', ('<type>', 'tuple')), ('return.len', 'int'), ('return[0]', ('<type>', 'list')), ('return[0].len', 'int'), ('return[0][0]', 'Tensor'), ('return[0][1]', 'Tensor'), ('return[0][2]', 'Tensor'), ('return[0][3]', 'Tensor')]
"""
import random, io, contextlib, os, sys, tempfile, types
import numpy as np
import torch
import kiln

SRC = '''\
import torch
import collections
class Plain:
    def __init__(self):
        self.w = 1.5

class Callme(Plain):
    def __call__(self, t):
        return t * 2


def prog(x, y, s, lst, obj):
    dq = collections.deque([x, x])
    dq2 = dq + dq
    t1 = dq2[2] * len(dq2)
    r2 = dq2
    return (r2, )
'''
HM_SRC = None  # the helper module `hm`: written as a real module, one fresh copy per run

CALLS = [
    {'dtype': 'float32', 'shape': (3, 4), 'rg_x': False, 'rg_y': False, 's': -1.5, 'lst': 2, 'obj': 'Plain'},
]
DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}


def inputs(spec, ns, call):
    g = torch.Generator().manual_seed(1000 * 127 + call)
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
            with open(os.path.join(hm_dir, f"fuzz_hm_{tag}.py"), "w") as f:
                f.write(HM_SRC)
        exec(SRC.replace("HM_NAME", f"fuzz_hm_{tag}"), ns)
    kiln.config.suppress_errors = False   # as the oracle: a capture error is a failure, not a fallback
    compiled = kiln.compile(ns_c["prog"], backend='eager')
    for i, spec in enumerate(CALLS):
        for name, fn, ns in (("eager", ns_e["prog"], ns_e), ("kiln", compiled, ns_c)):
            out, args, printed, rng = run(fn, ns, i, spec)
            ts = [o for o in (out if isinstance(out, tuple) else ()) if isinstance(o, torch.Tensor)]
            print(f"call {i} {name:5} out={out!r}")
            print(f"           meta={[(t.dtype, tuple(t.shape), t.stride(), t.requires_grad) for t in ts]}")
            print(f"           inputs={args[:2]} grads={[a.grad for a in args[:2]]} printed={printed!r} rng={rng}")
            hm = ns.get("hm")
            cls = {k: {a: b for a, b in vars(v).items() if not a.startswith("_") and not callable(b)}
                   for k, v in ns.items() if isinstance(v, type) and v.__module__ == ns["__name__"]}
            print(f"           globals={ {k: v for k, v in ns.items() if k.isupper()} } class attrs={cls} "
                  f"hm={ {k: v for k, v in vars(hm).items() if k.isupper()} if hm else None }")
