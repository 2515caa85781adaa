"""One settings object for Kiln.

``kiln.config`` is an instance of :class:`Config`.  Assignments are type-checked so a
typo or a wrong type is a clear error, not a silently ignored setting.  Environment
variables named ``KILN_<FIELD>`` (upper case) set the initial values (``KILN_TRACE_DIR=dir``
turns the structured trace on), and
``KILN_LOGS=graph,guards,code,breaks,recompiles`` turns on the printed logs.
``KILN_REPRO=capture|aot`` (``repro_after``) and ``KILN_REPRO_LEVEL=error|accuracy``
(``repro_level``) make Kiln write a minified repro script when a backend fails.
"""
from __future__ import annotations

import difflib
import os
import warnings
from dataclasses import dataclass, field, fields

LOG_KINDS = ("graph", "guards", "code", "breaks", "recompiles", "bytecode", "cache")
#: the allowed values of the string settings
STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")
CHOICES = {"repro_after": ("", "capture", "aot"), "repro_level": ("error", "accuracy"), "stance": STANCES}
#: environment variables with names other than KILN_<FIELD>
ENV_ALIASES = {"repro_after": "KILN_REPRO"}


_WATCHERS: dict = {}     # setting name -> callbacks (Config.watch); not a cache: kept by reset


@dataclass
class Config:
    #: compiled entries allowed per code object before it runs eagerly with a warning
    recompile_limit: int = 8
    #: re-raise backend failures instead of falling back to eager for that graph
    raise_on_backend_error: bool = False
    #: raise instead of warning when the recompile limit is reached
    error_on_recompile_limit: bool = False
    #: what compiled functions do (kiln.set_stance, torch.compiler.set_stance's meaning):
    #: "default"; "force_eager" (run as Python, compile nothing); "eager_on_recompile" (use
    #: the entries there are, run as Python where a new one would be compiled);
    #: "fail_on_recompile" (raise kiln.RecompileError where a new one would be compiled)
    stance: str = "default"
    #: maximum depth of inlined user calls before Kiln refuses
    inline_depth_limit: int = 64
    #: the log kinds that are printed (see LOG_KINDS)
    logs: frozenset = field(default_factory=frozenset)
    #: an internal error in Kiln falls back to eager with a warning instead of raising
    suppress_errors: bool = True
    #: print a warning when a frame falls back to eager (fullgraph=False)
    warn_on_fallback: bool = True
    #: with dynamic=None, a size or int argument that changed between captures becomes symbolic
    automatic_dynamic_shapes: bool = True
    #: write the structured trace (kiln.trace, read by ``kiln report``) into this directory; "" is off
    trace_dir: str = ""
    #: note each captured fx node's user call stack as its ``stack_trace`` even with the
    #: trace off (``kiln.export`` sets it while capturing: the exported program's nodes
    #: then name the user's lines)
    record_stack_traces: bool = False
    #: write a minified repro when a backend fails: "" (never), "capture" (on the graphs
    #: Kiln captures) or "aot" (on the forward/backward graphs AOT backends compile)
    repro_after: str = ""
    #: what counts as failing for repro_after: "error" (the backend raises) or "accuracy"
    #: (also a graph whose values differ from eager by more than eager's own noise)
    repro_level: str = "error"
    #: where automatic repros are written ("" means ./kiln_repros)
    repro_dir: str = ""
    #: split graphs compiled inside a DistributedDataParallel forward at gradient-bucket
    #: boundaries, so that DDP's all-reduces overlap the backward (backends/ddp_split.py);
    #: read when a graph is compiled (kiln.reset() to recompile after changing it)
    ddp_split_graphs: bool = True
    #: the persistent cache's directory (``kiln.persistent``; ``KILN_CACHE_DIR``): compiled
    #: entries are written there and a new process loads them instead of capturing; ""
    #: (the default) is off: a cache on disk outlives the source it was made from, so a
    #: user opts in knowing where it is (``kiln cache ls|clear``)
    cache_dir: str = ""
    #: never use the C accelerator (runtime/native.py): entries made from now on run their
    #: generated Python guards, which take the same decisions (``KILN_NO_C=1``)
    no_c: bool = False
    #: trace a repeated layer (a user module class called from an nn.ModuleList/Sequential
    #: with siblings of its class) once and call that one body per layer, where the body
    #: is a pure function of its inputs and every layer passes its checks; False inlines
    #: every layer (capture/hops/layers.py; ``KILN_REUSE_LAYER_BODIES=1``).  Off by default
    #: until the aten backend (make_fx cannot functionalize invoke_subgraph), the minifier
    #: (it does not look inside bodies) and T5's aot_eager training step work with bodies
    reuse_layer_bodies: bool = False
    #: run both guard paths on every call of entries made from now on and raise
    #: GuardPlanMismatch where they decide differently (fuzz campaigns, tests; slow)
    guard_crosscheck: bool = False

    def __setattr__(self, name, value):
        known = {f.name: f for f in fields(Config)}
        if name not in known:
            raise AttributeError(f"kiln.config has no setting {name!r}; known settings: {', '.join(sorted(known))}")
        if name == "logs":
            value = _parse_logs(value)
        else:
            expected = type(getattr(Config, name, None)) if hasattr(Config, name) else None
            if expected is bool and not isinstance(value, bool):
                raise TypeError(f"kiln.config.{name} must be a bool, got {type(value).__name__}")
            if expected is int and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"kiln.config.{name} must be an int, got {type(value).__name__}")
            if expected is str:
                if not isinstance(value, (str, os.PathLike)):
                    raise TypeError(f"kiln.config.{name} must be a str or path, got {type(value).__name__}")
                value = os.fspath(value)
            if expected is int and value < 0:
                raise ValueError(f"kiln.config.{name} must be >= 0, got {value}")
            if expected is str and not isinstance(value, str):
                raise TypeError(f"kiln.config.{name} must be a str, got {type(value).__name__}")
            if name in CHOICES and value not in CHOICES[name]:
                raise ValueError(f"kiln.config.{name} must be one of {CHOICES[name]}, got {value!r}")
        object.__setattr__(self, name, value)
        for callback in _WATCHERS.get(name, ()):
            callback(value)

    def watch(self, name: str, callback) -> None:
        """Call ``callback(value)`` after each assignment to setting ``name``: for a setting
        whose effect is baked into what was compiled (``raise_on_backend_error`` and the
        entries that fell back), so it takes effect on the next call without a reset."""
        _WATCHERS.setdefault(name, []).append(callback)

    def log_enabled(self, kind: str) -> bool:
        return kind in self.logs


def _parse_logs(value) -> frozenset:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    value = frozenset(value)
    unknown = value - set(LOG_KINDS)
    if unknown:
        raise ValueError(f"unknown log kind(s) {sorted(unknown)}; known: {', '.join(LOG_KINDS)}")
    return value


def _known_logs(raw: str) -> frozenset:
    """The log kinds of ``KILN_LOGS`` that exist.  A misspelt one is a one-line warning
    and is left out: a typo in the environment must not stop ``import kiln`` (assigning
    ``kiln.config.logs`` in code still raises)."""
    kinds = [v.strip() for v in raw.split(",") if v.strip()]
    for kind in kinds:
        if kind not in LOG_KINDS:
            close = difflib.get_close_matches(kind, LOG_KINDS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            # no source line to show: the mistake is in the environment, not in a file
            warnings.warn_explicit(f"unknown log kind {kind!r} ignored; {hint}valid kinds: {', '.join(LOG_KINDS)}",
                                   UserWarning, filename="KILN_LOGS", lineno=0)
    return frozenset(k for k in kinds if k in LOG_KINDS)


def _from_environment(cfg: Config) -> Config:
    for f in fields(Config):
        raw = os.environ.get(f"KILN_{f.name.upper()}")
        if raw is None and f.name in ENV_ALIASES:
            raw = os.environ.get(ENV_ALIASES[f.name])
        if raw is None:
            continue
        if f.name == "logs":
            cfg.logs = _known_logs(raw)
        elif isinstance(getattr(cfg, f.name), bool):
            cfg.__setattr__(f.name, raw.strip().lower() in ("1", "true", "yes", "on"))
        elif isinstance(getattr(cfg, f.name), int):
            cfg.__setattr__(f.name, int(raw))
        elif isinstance(getattr(cfg, f.name), str):
            cfg.__setattr__(f.name, raw.strip())
    return cfg


config = _from_environment(Config())
