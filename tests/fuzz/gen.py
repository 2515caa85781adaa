"""Random program generator: a ``Program`` is Python source for ``prog(x, y, s, lst, obj)``.

Why source text: a failing program must be printable, exec-able twice into fresh module
namespaces (so global/attribute/closure mutations of the eager run cannot leak into the
compiled run) and shrinkable statement by statement.  Each statement is one line of the
body (or a small indented block), tagged with the generator features it exercises and the
module-level helpers it needs, so a minimized program keeps only the helpers it uses.

Tensor variables are tracked by *shape kind* so generated binary ops are broadcast-valid
for every input shape the calls use: ``full`` (x's shape, (R, C)), ``row`` ((C,)),
``scalar`` (0-d).  ``other`` tensors (flattened, transposed, sliced) are only used by
unary/in-place ops and returned.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from .pygrammar import HM_NAME, HM_SOURCE, PY_HELPERS, PyStatements

# Module-level pieces a statement may need; rendered only when some statement uses them.
HELPERS = {
    "G": "G = 0.5\n",
    "K": "K = 3\n",
    "STORE": "STORE = []\n",
    "COUNT": "COUNT = 0\n",
    "cfg": ("class Cfg:\n    def __init__(self):\n        self.coef = 0.25\n        self.n = 0\n        self.last = None\n\n"
            "cfg = Cfg()\n"),
    "view_of": "def view_of(t):\n    return t.view(-1)\n",
    "detached": "def detached(t):\n    return t.detach()\n",
    "counter": ("def make_counter():\n    n = 0\n    def bump(t):\n        nonlocal n\n        n += 1\n"
                "        return t * n\n    return bump\n\nbump = make_counter()\n"),
    "scaler": ("def make_scaler(c):\n    box = [c]\n    def scale(t):\n        box[0] = box[0] * 2\n"
               "        return t * box[0]\n    return scale\n\nscale = make_scaler(0.5)\n"),
    "random": "import random\n",
    "numpy": "import numpy as np\n",
    "kiln": "import kiln\n",
    "Pair": "import collections\nPair = collections.namedtuple('Pair', 'a b')\n",
    **PY_HELPERS,
}
GLOBAL_NAMES = ("G", "K", "STORE", "COUNT")
# The classes of the ``obj`` argument; a call may switch between them (a guard on callable()).
OBJ_CLASSES = ("class Plain:\n    def __init__(self):\n        self.w = 1.5\n\n"
               "class Callme(Plain):\n    def __call__(self, t):\n        return t * 2\n")


@dataclass
class Stmt:
    text: str                     # one or more lines, unindented (the renderer indents)
    features: tuple[str, ...]
    needs: tuple[str, ...] = ()


@dataclass
class Program:
    body: list[Stmt]
    returns: list[str]            # expressions returned as a tuple
    seed: int
    calls: list[dict] = field(default_factory=list)   # input specs, one per call

    @property
    def features(self) -> tuple[str, ...]:
        return tuple(sorted({f for s in self.body for f in s.features}))

    @property
    def uses_hm(self) -> bool:
        """Whether the program imports the helper module ``hm`` (see :mod:`tests.fuzz.pygrammar`)."""
        return any("hm" in s.needs for s in self.body)

    def hm_source(self) -> str:
        return HM_SOURCE

    def source(self, hm_name: str = "fuzz_hm") -> str:
        """The program module's source; ``hm_name`` is the helper module's importable name."""
        needs = [n for n in HELPERS if any(n in s.needs for s in self.body)]
        head = "import torch\n" + "".join(HELPERS[n] for n in needs) + OBJ_CLASSES
        gl = [n for n in GLOBAL_NAMES if n in needs]
        lines = ["def prog(x, y, s, lst, obj):"]
        if gl:
            lines.append("    global " + ", ".join(gl))
        for st in self.body:
            lines += ["    " + ln for ln in st.text.splitlines()]
        lines.append("    return (" + "".join(r + ", " for r in self.returns) + ")")
        return (head + "\n\n" + "\n".join(lines) + "\n").replace(HM_NAME, hm_name)


UNARY = ["torch.sin({a})", "torch.relu({a})", "{a}.exp()", "{a}.abs()", "torch.tanh({a})", "-{a}",
         "{a} * 2", "{a}.float()", "{a}.double()", "{a}.clone()", "{a}.sigmoid()", "{a} // 2"]
BINARY = ["{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / {b}", "torch.maximum({a}, {b})",
          "torch.where({a} > 0, {a}, {b})", "{a} ** 2 + {b}"]
SCALAR = ["{a} * s", "{a} + s", "{a}.mean() + s * {a}.sum()", "{a} * 0.5", "{a} + 1", "{a} * G",
          "{a}.mean() + G * {a}.sum()", "{a} * cfg.coef", "{a}.sum() * cfg.coef + {a}.mean()",
          "{a} * K", "2.5 * {a}", "{a} / 3", "{a} * True", "s * {a}.sum()"]
INPLACE = ["{a}.mul_(2)", "{a}.add_(1.5)", "{a}.clamp_(min=0)", "{a}.zero_()", "{a}[0] = 7.0",
           "{a}.add_(s)", "{a}.neg_()", "{a}.fill_(G)"]


class Gen(PyStatements):
    """Builds one program; ``pool[kind]`` lists tensor variable names of each shape kind."""

    def __init__(self, seed: int):
        self.r = random.Random(seed)
        self.seed = seed
        self.pool = {"full": ["x", "y"], "row": [], "scalar": [], "other": []}
        self.n = 0
        self.body: list[Stmt] = []
        # data-dependent statements (``s_datadep``) are drawn from a stream of their own and
        # inserted between the others, so every seed still makes the statements it made
        # before the grammar had them (the seeds in test_fuzz.py keep their programs)
        self.rd = random.Random(seed * 7919 + 104729)
        self.nd = 0

    def new(self) -> str:
        self.n += 1
        return f"t{self.n}"

    def pick(self, *kinds) -> str:
        names = [v for k in kinds for v in self.pool[k]]
        return self.r.choice(names)

    def kind_of(self, v):
        return next(k for k, vs in self.pool.items() if v in vs)

    def emit(self, text, features, needs=(), out=None, kind=None):
        self.body.append(Stmt(text, tuple(features), tuple(needs)))
        if out is not None:
            self.pool[kind].append(out)

    def stmt(self):
        if self.rd.random() < 0.2:
            self.s_datadep()
        r = self.r
        kinds = {"unary": 8, "binary": 8, "scalar": 8, "view": 7, "inplace": 6, "reduce": 4, "container": 4,
                 "global": 3, "attr": 3, "closure": 2, "print": 3, "rng": 3, "break": 3, "backward": 3, "leaf": 2,
                 "detach": 3, "control": 4, "callable": 2, "construct": 2, **self.PY_CHOICES}
        choice = r.choices(list(kinds), weights=list(kinds.values()))[0]
        getattr(self, "s_" + choice)()

    def s_unary(self):
        a = self.pick("full", "row", "scalar", "other")
        v = self.new()
        self.emit(f"{v} = " + self.r.choice(UNARY).format(a=a), ["op"], out=v, kind=self.kind_of(a))

    def s_binary(self):
        a, b = self.pick("full", "row", "scalar"), self.pick("full", "row", "scalar")
        kinds = {self.kind_of(a), self.kind_of(b)}
        kind = "full" if "full" in kinds else "row" if "row" in kinds else "scalar"
        v = self.new()
        self.emit(f"{v} = " + self.r.choice(BINARY).format(a=a, b=b), ["op"], out=v, kind=kind)

    def s_scalar(self):
        a = self.pick("full", "row", "scalar")
        tpl = self.r.choice(SCALAR)
        needs = [n for n in ("G", "K", "cfg") if n in tpl.replace("{a}", "")]
        kind = "scalar" if ".sum()" in tpl and "{a} *" not in tpl and "{a} +" not in tpl else self.kind_of(a)
        v = self.new()
        self.emit(f"{v} = " + tpl.format(a=a), ["promotion"], needs, out=v, kind=kind)

    def s_view(self):
        a = self.pick("full")
        v = self.new()
        tpl, kind = self.r.choice([("{a}[0]", "row"), ("{a}.view(-1)", "other"), ("{a}.t()", "other"),
                                   ("{a}[:, 1:]", "other"), ("{a}.unsqueeze(0)", "other"),
                                   ("{a}.expand(2, *{a}.shape)", "other"), ("{a}[1:]", "other"),
                                   ("{a}.transpose(0, 1).contiguous()", "other"), ("view_of({a})", "other"),
                                   ("{a}.reshape(-1)", "other"), ("{a}[..., 0]", "other")])
        self.emit(f"{v} = " + tpl.format(a=a), ["view"], ["view_of"] if "view_of" in tpl else (), out=v, kind=kind)

    def s_inplace(self):
        a = self.pick("full", "row", "other")
        tpl = self.r.choice(INPLACE)
        self.emit(tpl.format(a=a), ["inplace"] + (["input-mutation"] if a in ("x", "y") else []),
                  ["G"] if "G" in tpl else ())

    def s_reduce(self):
        a = self.pick("full")
        v = self.new()
        tpl, kind = self.r.choice([("{a}.sum()", "scalar"), ("{a}.mean(0)", "row"), ("{a}.amax()", "scalar"),
                                   ("{a}.sum(1, keepdim=True)", "other"), ("{a}.norm()", "scalar"),
                                   ("{a}.softmax(-1)", "full"), ("{a}.cumsum(0)", "full")])
        self.emit(f"{v} = " + tpl.format(a=a), ["reduce"], out=v, kind=kind)

    def s_container(self):
        a, b = self.pick("full", "row", "scalar"), self.pick("full", "row", "scalar")
        v = self.new()
        opts = [(f"lst.append({a})\n{v} = lst[0] + {b}", "full"),
                (f"d = {{'a': {a}, 'b': {b}}}\nd['c'] = d['a'] * 2\n{v} = d['c'] - d['b']", "full"),
                (f"acc = [{a}, {b}]\n{v} = acc[-1] + acc.pop(0)", "full"),
                (f"{v} = sum([{a}, {b}, {a}])", "full"),
                (f"if len(lst) > 1:\n    lst.pop()\n{v} = lst[-1] * 1.5", "full"),
                (f"tp = ({a}, {b})\n{v} = tp[0] * len(tp)", "full")]
        text, kind = self.r.choice(opts)
        self.emit(text, ["container"], out=v, kind="full")

    def s_global(self):
        a = self.pick("full", "row", "scalar")
        text, needs = self.r.choice([("COUNT += 1", ["COUNT"]), (f"STORE.append({a}.detach())", ["STORE"]),
                                     ("G = G + 0.25", ["G"]), (f"STORE.append({a})", ["STORE"]),
                                     ("K = K + 1", ["K"])])
        self.emit(text, ["global"], needs)

    def s_attr(self):
        a = self.pick("full", "row", "scalar")
        text = self.r.choice(["cfg.n += 1", f"cfg.last = {a}", "cfg.coef = cfg.coef * 2",
                              f"obj.w = obj.w + 1", f"obj.t = {a}"])
        self.emit(text, ["attr"], ["cfg"] if "cfg" in text else ())

    def s_closure(self):
        a = self.pick("full", "row", "scalar")
        v = self.new()
        if self.r.random() < 0.5:
            self.emit(f"{v} = bump({a})", ["closure"], ["counter"], out=v, kind=self.kind_of(a))
        else:
            self.emit(f"{v} = scale({a})", ["closure"], ["scaler"], out=v, kind=self.kind_of(a))

    def s_print(self):
        a = self.pick("full", "row", "scalar", "other")
        text = self.r.choice([f"print('p', tuple({a}.shape), {a}.dtype, {a}.requires_grad)",
                              f"print('v', {a})", f"print('s', s, len(lst))",
                              f"print('sum', float({a}.detach().sum()))"])
        self.emit(text, ["print"])

    def s_rng(self):
        a = self.pick("full", "row", "scalar")
        v = self.new()
        text, needs = self.r.choice([(f"{v} = {a} + torch.rand_like({a})", ()),
                                     (f"{v} = {a} * torch.randn(()).item()", ()),
                                     (f"{v} = {a} + random.random()", ["random"]),
                                     (f"{v} = {a} * float(np.random.rand())", ["numpy"]),
                                     (f"torch.manual_seed(7)\n{v} = {a} + torch.rand(())", ()),
                                     (f"{v} = torch.nn.functional.dropout({a}, 0.5)", ())])
        self.emit(text, ["rng"], needs, out=v, kind=self.kind_of(a))

    def s_break(self):
        a = self.pick("full", "row", "scalar")
        v = self.new()
        text, needs = self.r.choice([(f"kiln.graph_break()\n{v} = {a} + 1", ["kiln"]),
                                     (f"{v} = {a} * {a}.sum().item()", ()),
                                     (f"if {a}.sum() > 0:\n    {v} = {a} + 1\nelse:\n    {v} = {a} - 1", ()),
                                     (f"{v} = torch.tensor({a}.tolist()) * 2", ()),
                                     (f"{v} = torch.from_numpy({a}.detach().numpy().copy())", ())])
        self.emit(text, ["break"], needs, out=v, kind=self.kind_of(a))

    def s_datadep(self):
        """Values that depend on tensor data: numbers read with item()/int()/bool(), sizes
        from boolean masks, nonzero and one-argument where (kept in the graph as unbacked
        symbols), and a branch on one (a break).  Drawn from ``self.rd`` only; the result
        is returned, not added to the pool (see ``__init__``)."""
        rd = self.rd
        a = rd.choice([v for k in ("full", "row", "scalar") for v in self.pool[k]])
        self.nd += 1
        v, n = f"dd{self.nd}", f"nd{self.nd}"
        text = rd.choice([
            f"{v} = {a}[{a} > 0]",
            f"{v} = {a}[{a} > 0].sum() + {a}",
            f"{v} = {a} * torch.nonzero({a} > 0).shape[0]",
            f"{v} = torch.nonzero({a} > 0.5).float()",
            f"{v} = {a} * int(({a} > 0).sum())",
            f"{v} = {a} * ({a}.detach().amax().item() + 1)",
            f"{v} = {a} * bool({a}.sum() > 0)",
            f"{v} = torch.where({a}.flatten() > 0)[0] * 2",
            f"{v} = torch.tensor([{a}.sum().item(), 1.0]) * 2",
            f"{n} = int(({a} > 0).sum())\nif {n} > 1:\n    {v} = {a} + {n}\nelse:\n    {v} = {a} - 1",
        ])
        self.emit(text, ["data-dependent"])
        self.returns_extra.append(v)

    def s_backward(self):
        a = self.pick("full", "row", "scalar")
        text = self.r.choice([f"{a}.sum().backward()", f"{a}.sum().backward(retain_graph=True)",
                              f"g, = torch.autograd.grad({a}.sum(), [x], allow_unused=True)\nobj.g = g"])
        self.emit(text, ["backward"])

    def s_leaf(self):
        a = self.pick("full", "row", "scalar")
        v = self.new()
        text = self.r.choice([
            f"leaf = {a}.detach().clone().requires_grad_()\n(leaf * 2).sum().backward()\n{v} = leaf.grad",
            f"leaf = torch.ones(3, requires_grad=True)\n(leaf * {a}.detach().sum()).sum().backward()\n{v} = leaf.grad + leaf",
            f"w = torch.zeros((), requires_grad=True)\n{v} = {a} * w"])
        self.emit(text, ["leaf"], out=v, kind="other" if "ones(3" in text else self.kind_of(a))

    def s_detach(self):
        a = self.pick("full", "row", "scalar", "other")
        v = self.new()
        text = self.r.choice([f"{v} = {a}.detach()", f"{v} = detached({a})", f"{v} = {a}.detach().requires_grad_()",
                              f"with torch.no_grad():\n    {v} = {a} * 2", f"{v} = {a}.data"])
        self.emit(text, ["detach"], ["detached"] if "detached(" in text else (), out=v, kind=self.kind_of(a))

    def s_control(self):
        a = self.pick("full", "row", "scalar")
        v = self.new()
        cond = self.r.choice(["s > 0", "isinstance(s, float)", f"{a}.dtype == torch.float32", f"{a}.requires_grad",
                              f"{a}.shape[0] > 2", "len(lst) > 1", f"{a}.dim() == 2", "type(s) is int",
                              f"{a}.is_leaf", "torch.is_grad_enabled()"])
        self.emit(f"if {cond}:\n    {v} = {a} + 1\nelse:\n    {v} = {a} * 3", ["guard"], out=v, kind=self.kind_of(a))

    def s_callable(self):
        a = self.pick("full", "row", "scalar")
        v = self.new()
        text = self.r.choice([f"{v} = {a} * (2 if callable(obj) else 3)", f"{v} = {a} * obj.w",
                              f"{v} = obj({a}) if callable(obj) else {a}", f"{v} = {a} * len(type(obj).__name__)"])
        self.emit(text, ["callable"], out=v, kind=self.kind_of(a))

    def s_construct(self):
        a, b = self.pick("full", "row", "scalar"), self.pick("full", "row", "scalar")
        v = self.new()
        text, needs = self.r.choice([(f"{v} = Pair({a}, {b})", ["Pair"]), (f"{v} = map(torch.sin, [{a}, {b}])", ()),
                                     (f"{v} = zip([{a}], [{b}])", ()), (f"{v} = frozenset([1, 2]) | {{3}}", ()),
                                     (f"{v} = {{'k': {a}, 'n': s}}", ()), (f"{v} = [{a}, [{b}, s]]", ())])
        self.emit(text, ["construct"], needs)
        self.returns_extra.append(v)


def call_specs(r: random.Random) -> list[dict]:
    """Two calls with the same types (a cache hit), then one that changes one fact."""
    base = dict(dtype="float32", shape=(3, 4), rg_x=r.random() < 0.4, rg_y=False, s=r.choice([0.5, 2, -1.5, 3]),
                lst=r.choice([1, 2]), obj=r.choice(["Plain", "Callme"]))
    change = r.choice(["dtype", "shape", "rg", "s_type", "s_value", "obj", "lst", "int"])
    third = dict(base)
    if change == "dtype":
        third["dtype"] = "float64"
    elif change == "int":
        third["dtype"] = "int64"
    elif change == "shape":
        third["shape"] = r.choice([(2, 4), (4, 5), (3, 3)])
    elif change == "rg":
        third["rg_x"], third["rg_y"] = not base["rg_x"], r.random() < 0.5
    elif change == "s_type":
        third["s"] = int(base["s"]) if isinstance(base["s"], float) else float(base["s"]) + 0.5
    elif change == "s_value":
        third["s"] = -base["s"] if base["s"] else 1
    elif change == "obj":
        third["obj"] = "Callme" if base["obj"] == "Plain" else "Plain"
    else:
        third["lst"] = 3 - base["lst"]
    return [base, dict(base), third]


def generate(seed: int) -> Program:
    g = Gen(seed)
    g.returns_extra = []
    for _ in range(g.r.randint(2, 8)):
        g.stmt()
    pool = [v for k in ("full", "row", "scalar", "other") for v in g.pool[k]]
    rets = g.r.sample(pool, min(len(pool), g.r.randint(1, 4))) + g.returns_extra
    if g.r.random() < 0.2:
        rets.append(g.r.choice(["x.detach()", "x[0]", "x", "lst", "s", "y.view(-1)"]))
    return Program(g.body, rets, seed, call_specs(g.r))
