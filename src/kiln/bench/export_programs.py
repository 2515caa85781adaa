"""Programs exported three ways: torch.export strict, torch.export non-strict, kiln.export.

Each entry builds ``(f, args, kwargs, dynamic_shapes, others)``: the program, example
inputs, the ``dynamic_shapes`` spec and other inputs to compare with eager on.  The
list has the cases ``kiln.export`` is for (modules, dynamic sizes, buffer mutation,
HOPs, tiny Hugging Face models), programs torch.export's strict mode refuses or gets
wrong on torch 2.13 (``try``/``except`` reading the exception's message, deque and
bytes methods) that Kiln captures exactly, one non-strict mode gets wrong (it runs
the Python on stand-in tensors: ``type(x).__name__``), and a data-dependent branch that
none can export as it is.  ``tests/export/test_beyond_strict.py`` keeps the second group as
tests; ``compare`` measures every row for ``docs/results``.
"""
from __future__ import annotations

import collections
import copy
import json
import subprocess
import sys
import time

import torch
from torch.export import Dim
from torch.utils._pytree import tree_flatten, tree_map

from ..exporting import export as kiln_export


class Wrapped(torch.nn.Module):
    """A function as a module (torch.export takes modules only)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


# -- programs strict torch.export refuses or gets wrong ---------------------------------------

def exception_message(x):
    """The length of a KeyError's message decides a factor (3: ``'b'``)."""
    table = {"a": 1}
    try:
        v = table["b"]
    except KeyError as e:
        v = len(str(e))
    return x * v


def deque_window(x):
    """A bounded deque as a sliding window of configuration values."""
    d = collections.deque([1, 2, 3], maxlen=3)
    d.append(4)
    d.rotate(-1)
    return x * d[0] + d.maxlen


def bytes_key(x):
    """A factor from a bytes method (a checksum-like key)."""
    return x * len(b"abc".hex())


def tensor_type_name(x):
    """A factor from the input's type name (``Tensor``: 6): non-strict torch.export runs
    this on its stand-in tensors and keeps their type's name."""
    return x * len(type(x).__name__)


BEYOND_NON_STRICT = {"tensor type name": tensor_type_name}


def data_dependent_branch(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


BEYOND_STRICT = {"exception message": exception_message, "deque window": deque_window,
                 "bytes method": bytes_key}


# -- modules ----------------------------------------------------------------------------------

class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(16, 16) for _ in range(4)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class Mixer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        b, t, c = x.shape
        y = self.lin(x).view(b * t, c)
        if t > 4:
            y = y * 2
        return y.reshape(b, t, c).sum(1)


class Stateful(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(4)
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        self.register_buffer("ema", torch.zeros(4))
        self.register_buffer("last", torch.zeros(4))

    def forward(self, x):
        self.count += 1                                         # in place, then setattr of the same tensor
        y = self.bn(x)
        self.ema.mul_(0.9).add_(0.1 * y.detach().mean(0))       # in place
        self.last = y.detach().amax(0)                          # a new tensor assigned to a buffer
        return y


def branches(x, y):
    return torch.cond(x.sum() > 0, lambda x, y: x.sin() + y, lambda x, y: x.cos() - y, (x, y))


def _hf(kind):
    import transformers     # optional dependency, imported only for these rows

    if kind == "bert":
        cfg = transformers.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=128, max_position_embeddings=128, hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0)
        return transformers.BertModel(cfg).eval()
    cfg = transformers.GPT2Config(vocab_size=1000, n_embd=64, n_layer=2, n_head=2, n_positions=128, use_cache=False,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=2)
    return transformers.GPT2Model(cfg).eval()


def _ids(seq):
    return torch.randint(0, 1000, (2, seq))


def programs() -> dict:
    """name -> () -> (f, args, kwargs, dynamic_shapes, others)."""
    seq = Dim("seq", min=2, max=128)
    rows = {
        "MLP (module list)": lambda: (MLP(), (torch.randn(4, 16),), {}, None, [(torch.randn(4, 16),)]),
        "shape branch, dynamic B,T": lambda: (
            Mixer(), (torch.randn(3, 6, 8),), {}, {"x": {0: Dim("B", min=2, max=16), 1: Dim("T", min=5, max=32)}},
            [(torch.randn(5, 9, 8),)]),
        "BatchNorm train + counter + EMA": lambda: (Stateful().train(), (torch.randn(8, 4),), {}, None,
                                                    [(torch.randn(8, 4),)]),
        "torch.cond": lambda: (Wrapped(branches), (torch.ones(3), torch.randn(3)), {}, None,
                               [(-torch.ones(3), torch.randn(3))]),
        "BertModel, dynamic seq": lambda: (_hf("bert"), (_ids(16),), {}, {"input_ids": {1: seq}}, [(_ids(37),)]),
        "GPT2Model, dynamic seq": lambda: (_hf("gpt2"), (_ids(16),), {}, {"input_ids": {1: seq}}, [(_ids(37),)]),
    }
    for name, fn in {**BEYOND_STRICT, **BEYOND_NON_STRICT}.items():
        rows[name] = (lambda fn=fn: (Wrapped(fn), (torch.randn(3),), {}, None, [(torch.randn(3),)]))
    rows["data-dependent branch"] = lambda: (Wrapped(data_dependent_branch), (torch.ones(3),), {}, None,
                                             [(-torch.ones(3),)])
    return rows


# -- the comparison ---------------------------------------------------------------------------

def _export(mode: str, f, args, kwargs, dynamic_shapes):
    if mode == "kiln":
        return kiln_export(f.fn if isinstance(f, Wrapped) else f, args, kwargs, dynamic_shapes=dynamic_shapes)
    return torch.export.export(f, args, kwargs, dynamic_shapes=dynamic_shapes, strict=(mode == "strict"))


def _same(expected, got) -> bool:
    a, _ = tree_flatten(expected)
    b, _ = tree_flatten(got)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or x.shape != y.shape or not torch.allclose(x, y, atol=1e-5, rtol=1e-5):
                return False
        elif x != y:
            return False
    return True


def _clone(x):
    return tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, x)


def measure(name: str, mode: str, build) -> dict:
    """One cell: exported?, equal to eager on the example and the other inputs?, seconds."""
    torch.manual_seed(0)
    f, args, kwargs, spec, others = build()
    pristine = copy.deepcopy(f)
    start = time.perf_counter()
    try:
        ep = _export(mode, f, args, kwargs, spec)
    except Exception as e:   # a refusal is a result here
        return {"program": name, "mode": mode, "exported": False, "equal": None,
                "seconds": time.perf_counter() - start, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
    seconds = time.perf_counter() - start
    prog, eager = ep.module(), copy.deepcopy(pristine)
    equal = True
    for inputs in [args, *[o for o in others]]:
        try:
            equal &= _same(eager(*_clone(inputs), **_clone(kwargs)), prog(*_clone(inputs), **_clone(kwargs)))
        except Exception:
            equal = False
    return {"program": name, "mode": mode, "exported": True, "equal": equal, "seconds": seconds, "error": ""}


def compare(modes=("strict", "non-strict", "kiln"), only=None, repeat: int = 3) -> list:
    """Every program under every mode; seconds are the median of ``repeat`` exports, after
    one export per mode of a small program (so no mode pays the process's first-use
    costs, Dynamo's imports or Kiln's, inside a row)."""
    table = programs()
    for mode in modes:
        measure("warm-up", mode, table["MLP (module list)"])
    rows = []
    for name, build in table.items():
        if only and name not in only:
            continue
        for mode in modes:
            runs = [measure(name, mode, build) for _ in range(repeat)]
            runs.sort(key=lambda r: r["seconds"])
            rows.append(runs[len(runs) // 2])
    return rows


def markdown(rows: list) -> str:
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    head = "| program | " + " | ".join(f"{m}: exported / == eager / s" for m in modes) + " |"
    lines = [head, "|---|" + "---|" * len(modes)]
    for name in dict.fromkeys(r["program"] for r in rows):
        cells = []
        for m in modes:
            r = next(r for r in rows if r["program"] == name and r["mode"] == m)
            if not r["exported"]:
                cells.append(f"no ({r['error'].split(':')[0]}) / - / {r['seconds']:.2f}")
            else:
                cells.append(f"yes / {'yes' if r['equal'] else '**NO**'} / {r['seconds']:.2f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compare_cold(modes=("strict", "non-strict", "kiln"), only=None) -> list:
    """Every cell in a fresh process (``--cell``): what one export costs a program that
    exports once, first-use costs of each frontend included."""
    rows = []
    for name in programs():
        if only and name not in only:
            continue
        for mode in modes:
            done = subprocess.run([sys.executable, "-m", "kiln.bench.export_programs", "--cell", name, mode],
                                  capture_output=True, text=True, timeout=600)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            rows.append(json.loads(lines[-1]) if lines else
                        {"program": name, "mode": mode, "exported": False, "equal": None, "seconds": 0.0,
                         "error": f"worker failed: {done.stderr.strip().splitlines()[-1:]}"})
    return rows


def main(argv: list) -> None:
    """``--cell NAME MODE``: one cell, as JSON; ``--cold``: every cell in its own process;
    else every cell in this process (median of 3 after a warm-up); names select rows."""
    if argv[:1] == ["--cell"]:
        print(json.dumps(measure(argv[1], argv[2], programs()[argv[1]])))
        return
    cold = argv[:1] == ["--cold"]
    only = argv[1:] if cold else argv
    table = compare_cold(only=only or None) if cold else compare(only=only or None)
    print(markdown(table))
    for r in table:
        if r["error"]:
            print(f"- {r['program']} / {r['mode']}: {r['error']}")


if __name__ == "__main__":   # pragma: no cover - python -m kiln.bench.export_programs
    main(sys.argv[1:])
