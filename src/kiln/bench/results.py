"""The two records that cross the process boundary: what to run, and what happened.

Why plain dataclasses with JSON round-trips: the driver hands :class:`RunOptions`
to a worker subprocess on its command line and reads a :class:`Result` back from
one line of its stdout.  Keeping both flat (numbers and strings only) means the
CSV columns, the JSON line and the table all come from the same field list.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

# Row statuses, from best to worst.  ``skipped`` rows never ran (skip list).
PASS = "pass"
FAIL_ACCURACY = "fail_accuracy"
FAIL_COMPILE = "fail_compile"
FAIL_RUN = "fail_run"
EAGER_FAIL = "eager_fail"
TIMEOUT = "timeout"
SKIPPED = "skipped"
STATUSES = (PASS, FAIL_ACCURACY, FAIL_COMPILE, FAIL_RUN, EAGER_FAIL, TIMEOUT, SKIPPED)

FRONTENDS = ("kiln", "torch")
MODES = ("inference", "training")
PRECISIONS = ("float32", "bfloat16")
DEVICES = ("cpu", "cuda")


@dataclass
class RunOptions:
    """Everything a worker needs to run one model, besides the model's name."""

    backend: str = "eager"
    mode: str = "inference"
    precision: str = "float32"
    device: str = "cpu"
    accuracy: bool = True
    performance: bool = True
    repeat: int = 20
    warmup: int = 2
    threads: int = 1     # torch intra-op threads in the worker (see runner.run_model)
    trace_dir: str = ""  # kiln frontend: write the model's trace under here (kiln bench --report)
    dynamic: bool = False  # kiln bench --dynamic: one compile, a series of input sizes (see bench.dynamic)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "RunOptions":
        return cls(**json.loads(text))


@dataclass
class RowKey:
    """What names a row of either report: the model, the frontend and how it was run."""

    model: str
    frontend: str
    backend: str
    mode: str
    precision: str
    device: str
    status: str = ""


@dataclass
class Result(RowKey):
    """One row of the report: one model under one frontend, mode, precision, device."""

    reason: str = ""            # error message, skip reason or accuracy detail
    graphs: int | None = None
    breaks: int | None = None
    top_breaks: str = ""        # "reason (count); ..." most frequent first
    recompiles: int | None = None
    accuracy: str = ""          # ok | fail | unavailable | "" (not checked)
    eager_ms: float | None = None      # median steady-state eager call
    compiled_ms: float | None = None   # median steady-state compiled call
    speedup: float | None = None       # eager_ms / compiled_ms
    first_call_s: float | None = None  # first compiled call, capture + backend compile included
    capture_s: float | None = None     # first_call_s minus one steady eager call
    overhead_us: float | None = None   # this model's compiled call minus its graphs' time (inference)
    eager_spread: float | None = None     # interquartile range / median of the timed eager calls
    compiled_spread: float | None = None  # the same for the compiled calls
    import_s: float | None = None      # worker start-up: interpreter start and imports, before any model
    first_compile_s: float | None = None  # the frontend's first compile in the process (x + 1), not a model's
    wall_s: float | None = None        # the whole worker subprocess, start-up included

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, data: dict) -> "Result":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


#: CSV header, in the order the fields are declared above.
COLUMNS = [f.name for f in fields(Result)]


@dataclass
class DynamicResult(RowKey):
    """One row of ``kiln bench --dynamic``: one model called over a series of input sizes.

    The model is compiled once and called at every size of the series (see
    ``bench.dynamic``); the counts are totals over the whole series.
    """

    reason: str = ""            # error message, skip reason, or the first call whose accuracy failed
    varies: str = ""            # what the series varies: "seq,batch" or "batch"
    calls: int | None = None    # compiled calls made (the series' length when all ran)
    shapes: int | None = None   # distinct input shapes among those calls
    graphs: int | None = None
    breaks: int | None = None
    top_breaks: str = ""
    recompiles: int | None = None
    limit_hits: int | None = None      # frames that reached the recompile limit (then ran eagerly)
    series_s: float | None = None      # wall time of the compiled series, captures included
    eager_series_s: float | None = None  # wall time of the same series run eagerly
    accuracy: str = ""          # ok | fail | unavailable | "" (not checked), over every call
    accuracy_fails: int | None = None  # calls whose outputs failed the accuracy check
    import_s: float | None = None      # worker start-up: interpreter start and imports, before any model
    wall_s: float | None = None        # the whole worker subprocess, start-up included

    to_json = Result.to_json

    @classmethod
    def from_dict(cls, data: dict) -> "DynamicResult":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


#: CSV header of ``--dynamic`` runs.
DYNAMIC_COLUMNS = [f.name for f in fields(DynamicResult)]


def row_class(opts: RunOptions):
    """The row type a run with ``opts`` produces."""
    return DynamicResult if opts.dynamic else Result
