"""Kiln fuzz repro: backend='aot_eager', aspect='grad.value', exception=-,
features=backward, op, promotion, rng, seed=70276.  Run: python THIS_FILE (from the repo root).

Divergence on call 0:
#   grad[0]: values differ
#   eager    tensor([[0.3333, 0.3333, 0.3333, 0.3333],
#           [0.3333, 0.3333, 0.3333, 0.3333],
#           [0.3333, 0.3333, 0.3333, 0.3333]])
#   compiled tensor([[   nan, 0.3333, 0.3333, 0.3333],
#           [   nan,    nan,    nan, 0.3333],
#           [   nan,    nan, 0.3333, 0.3333]])
"""
import random, io, contextlib
import numpy as np
import torch
import kiln

SRC = '''\
import torch
class Cfg:
    def __init__(self):
        self.coef = 0.25
        self.n = 0
        self.last = None

cfg = Cfg()
import random
class Plain:
    def __init__(self):
        self.w = 1.5

class Callme(Plain):
    def __call__(self, t):
        return t * 2


def prog(x, y, s, lst, obj):
    t2 = torch.nn.functional.dropout(x, 0.5)
    t3 = y / t2
    t4 = x.sum() * cfg.coef + x.mean()
    t5 = t3 + random.random()
    t4.sum().backward(retain_graph=True)
    return ()
'''

CALLS = [
    {'dtype': 'float32', 'shape': (3, 4), 'rg_x': True, 'rg_y': False, 's': 3, 'lst': 1, 'obj': 'Callme'},
]
DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}


def inputs(spec, ns, call):
    g = torch.Generator().manual_seed(1000 * 70276 + call)
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
