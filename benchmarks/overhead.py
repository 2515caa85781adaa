"""Per-call overhead and first-call time: Kiln beside torch.compile, same process.

    .venv/bin/python benchmarks/overhead.py [--backends eager aot_eager] [--calls N]

Overhead = one compiled call minus calling the compiled graphs directly with the
example inputs they were compiled with (``kiln.bench.overhead``): the frontend's guard
checks, glue (gathering parameters, rebuilding outputs) and resumed frames.  Both
frontends get the same backend, wrapped to record its graphs.  Rows:

* small programs (``x + 1``, an MLP step, 8 arguments, a module of 8 Linear layers);
* real models from transformers at tiny sizes (hidden 8, 2 layers, 4 tokens, so that
  the graphs take little time and the overhead is visible), inference under no_grad.

One thread, interleaved timing (``interleaved_medians``).  Also prints the guards per
Kiln entry and the first call's time of both (capture and backend compile included).

Kiln is measured on both guard paths (``--guards both``, the default): ``C``, the
accelerator's guard plans (``kiln/runtime/native.py``), and ``py``, the generated
Python guards (``KILN_NO_C=1``); each ratio is Kiln's overhead over torch.compile's.
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import torch

import kiln
from kiln.bench.overhead import GraphRecorder, model_overhead_us
from kiln.runtime import native


def add_one(x):
    return x + 1


def mlp_step(x, w1, w2):
    return torch.relu(x @ w1) @ w2


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(8))
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.norm(x)


def many_args(a, b, c, d, e, f, g, h):
    return a + b + c + d + e + f + g + h


def programs():
    x = torch.randn(4, 16)
    yield "x + 1", add_one, (torch.randn(8),), {}
    yield "mlp (3 tensors)", mlp_step, (x, torch.randn(16, 16), torch.randn(16, 16)), {}
    yield "8 args", many_args, tuple(torch.randn(4) for _ in range(8)), {}
    yield "module (8 Linear + LayerNorm)", Block().eval(), (x,), {}


def real_models():
    try:
        import transformers as T
    except ImportError:
        return
    T.logging.set_verbosity_error()
    kw = dict(hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16, vocab_size=64)
    ids = torch.randint(0, 64, (1, 4), generator=torch.Generator().manual_seed(0))
    yield "BertModel", T.BertModel(T.BertConfig(**kw)).eval(), (ids,), {}
    yield "GPT2Model", T.GPT2Model(T.GPT2Config(n_embd=8, n_layer=2, n_head=2, vocab_size=64,
                                                bos_token_id=0, eos_token_id=0)).eval(), (ids,), {}
    yield "T5Model", T.T5Model(T.T5Config(d_model=8, d_ff=16, num_layers=2, num_heads=2, d_kv=4,
                                          vocab_size=64)).eval(), (ids,), {"decoder_input_ids": ids}
    yield "LlamaModel", T.LlamaModel(T.LlamaConfig(num_key_value_heads=2, **kw)).eval(), (ids,), {}
    yield "MistralModel", T.MistralModel(T.MistralConfig(num_key_value_heads=2, **kw)).eval(), (ids,), {}


def _backend(frontend: str, name: str):
    if frontend == "kiln":
        return kiln.backends.lookup(name)
    return torch._dynamo.lookup_backend(name)


def measure(frontend: str, fn, args, kwargs, backend: str, calls: int, captures: int = 1, now=time.perf_counter,
            c_guards: bool = True):
    """Overhead, first call (the fastest of ``captures`` fresh captures), graphs, guards;
    both timed with the clock ``now``.  ``c_guards``: Kiln's guards run as C plans (else
    as the generated Python)."""
    kiln.config.no_c = not c_guards
    first_call = float("inf")
    for _ in range(max(captures, 1)):
        recorder = GraphRecorder(_backend(frontend, backend), backend)
        if frontend == "kiln":
            kiln.reset()
            compiled = kiln.compile(fn, backend=recorder)
        else:
            torch._dynamo.reset()
            compiled = torch.compile(fn, backend=recorder)
        t0 = now()
        compiled(*args, **kwargs)
        first_call = min(first_call, now() - t0)
    for _ in range(5):
        compiled(*args, **kwargs)
    overhead = model_overhead_us(lambda: compiled(*args, **kwargs), recorder, calls=calls, now=now)
    guards = "-"
    if frontend == "kiln":
        target = compiled.forward if isinstance(compiled, torch.nn.Module) else compiled
        guards = "+".join(str(e.guard_count) for e in target.entries)
    return overhead, first_call, len(recorder.graphs), guards


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", default=["eager", "aot_eager"])
    parser.add_argument("--calls", type=int, default=200, help="calls per timing round (7 rounds)")
    parser.add_argument("--only", nargs="*", help="row names to run (default: all)")
    parser.add_argument("--captures", type=int, default=1,
                        help="fresh captures per row; the first call reported is the fastest")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="wall: time.perf_counter; cpu: the thread's CPU time (time.thread_time), "
                             "which other jobs on a shared machine do not inflate")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON (benchmarks/versions.py)")
    parser.add_argument("--guards", choices=["both", "C", "py"], default="both",
                        help="Kiln's guard path(s): the C accelerator's plans, the generated Python, or both")
    args = parser.parse_args(argv)
    rows = []
    now = time.thread_time if args.clock == "cpu" else time.perf_counter
    torch.set_num_threads(1)
    __import__("torch._dynamo")          # torch.compile's frontend, for its reset and backends
    paths = {"both": ["C", "py"], "C": ["C"], "py": ["py"]}[args.guards]
    if "C" in paths and native.guard_plan_module() is None:
        print(f"# the C accelerator is not available ({native.unavailable_reason()}): its columns show Python guards")
    print(f"# clock: {args.clock}; guard paths: {', '.join(paths)}")
    header = (f"{'program':32} {'backend':9} " + "".join(f"{'kiln ' + p + ' us':>11} " for p in paths)
              + f"{'torch ovh us':>12} " + "".join(f"{p + ' ratio':>8} " for p in paths)
              + f"{'kiln graphs':>11} {'torch graphs':>12} {'kiln guards':>11} {'kiln 1st s':>10} "
              f"{'torch 1st s':>11} {'1st ratio':>9}")
    print(header)
    for name, fn, inputs, kwargs in [*programs(), *real_models()]:
        if args.only and name not in args.only:
            continue
        for backend in args.backends:
            kiln_ovh = {}
            saved = kiln.config.no_c
            try:
                with torch.no_grad():
                    for p in paths:
                        kiln_ovh[p], k_cap, k_graphs, guards = measure("kiln", fn, inputs, kwargs, backend, args.calls,
                                                                       args.captures, now, c_guards=p == "C")
                    t_ovh, t_cap, t_graphs, _ = measure("torch", fn, inputs, kwargs, backend, args.calls,
                                                        args.captures, now)
            finally:
                kiln.config.no_c = saved
            show = lambda v: "-" if v is None else f"{v:.1f}"   # noqa: E731
            ratios = "".join((f"{kiln_ovh[p] / t_ovh:8.2f} " if kiln_ovh[p] is not None and t_ovh else f"{'-':>8} ")
                             for p in paths)
            print(f"{name:32} {backend:9} " + "".join(f"{show(kiln_ovh[p]):>11} " for p in paths)
                  + f"{show(t_ovh):>12} {ratios}{k_graphs:>11} {t_graphs:>12} {guards:>11} {k_cap:10.3f} "
                  f"{t_cap:11.3f} {k_cap / t_cap:9.2f}", flush=True)
            row = dict(program=name, backend=backend, kiln_overhead_us=kiln_ovh[paths[0]], torch_overhead_us=t_ovh,
                       kiln_graphs=k_graphs, torch_graphs=t_graphs, kiln_guards=guards,
                       kiln_first_call_s=k_cap, torch_first_call_s=t_cap)
            row.update({f"kiln_{p}_overhead_us": kiln_ovh[p] for p in paths})
            rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"python": platform.python_version(), "torch": torch.__version__, "clock": args.clock,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
