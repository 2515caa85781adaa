"""Kiln fuzz repro: backend='aot_eager', aspect='aliasing', exception=-,
features=backward, break, detach, rng, seed=74477.  Run: python THIS_FILE (from the repo root).

Divergence on call 0:
#   eager ([('[0][0]', 0), ('[0][1]', 1), ('[0][3][0]', 2), ('[0][4].g', None)], (set(), {'#0[4].g'}))
#   compiled ([('[0][0]', 0), ('[0][1]', 1), ('[0][3][0]', 2), ('[0][4].g', None)], (set(), set()))
"""
import random, io, contextlib
import numpy as np
import torch
import kiln

SRC = '''\
import torch
class Plain:
    def __init__(self):
        self.w = 1.5

class Callme(Plain):
    def __call__(self, t):
        return t * 2


def prog(x, y, s, lst, obj):
    with torch.no_grad():
        t2 = y * 2
    torch.manual_seed(7)
    t3 = x + torch.rand(())
    t4 = t2 * t2.sum().item()
    g, = torch.autograd.grad(t3.sum(), [x], allow_unused=True)
    obj.g = g
    return ()
'''

CALLS = [
    {'dtype': 'float32', 'shape': (3, 4), 'rg_x': True, 'rg_y': False, 's': -1.5, 'lst': 1, 'obj': 'Plain'},
]
DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}


def inputs(spec, ns, call):
    g = torch.Generator().manual_seed(1000 * 74477 + call)
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
    ns_e, ns_c = {}, {}
    exec(SRC, ns_e); exec(SRC, ns_c)
    compiled = kiln.compile(ns_c["prog"], backend='aot_eager')
    for i, spec in enumerate(CALLS):
        for name, fn, ns in (("eager", ns_e["prog"], ns_e), ("kiln", compiled, ns_c)):
            out, args, printed, rng = run(fn, ns, i, spec)
            ts = [o for o in (out if isinstance(out, tuple) else ()) if isinstance(o, torch.Tensor)]
            print(f"call {i} {name:5} out={out!r}")
            print(f"           meta={[(t.dtype, tuple(t.shape), t.stride(), t.requires_grad) for t in ts]}")
            print(f"           inputs={args[:2]} grads={[a.grad for a in args[:2]]} printed={printed!r} rng={rng}")
