"""The benchmark model registry: one short entry per model.

Why a registry instead of a list of scripts: the driver, the worker subprocess and
the tests all need to agree on what a model name means, which suites it belongs to,
and how to build it and its inputs.  Keeping that in one table makes "add a model"
a single call to :func:`register`.

A :class:`ModelSpec` is deliberately small:

* ``build(training)`` returns a freshly built ``nn.Module`` with random weights and
  dropout disabled (training variants include a head that computes a loss);
* ``inputs(training, gen)`` returns the keyword arguments for one call, drawn from
  the given ``torch.Generator`` (training inputs include the labels);
* ``loss`` reduces an output to a scalar for training runs; the default picks
  ``output.loss`` (Hugging Face heads) or sums the output;
* ``sized_inputs(seq, batch)`` (optional, for ``kiln bench --dynamic``) returns an
  ``inputs`` function making inputs at that sequence length and batch size.  A model
  whose inputs have no sequence dimension ignores ``seq``.  ``register`` takes it from
  the ``inputs`` function's ``at`` attribute when not given explicitly.

The model zoo lives in ``models_local``, ``models_hf``, ``models_hf_more`` and
``models_hops`` and ``models_programs``; they are imported lazily the first time the registry is consulted.  Extra modules named in the environment
variable ``KILN_BENCH_PLUGINS`` (comma separated module names) are imported too,
which is how the tests add models that crash or hang on purpose.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

PLUGIN_ENV = "KILN_BENCH_PLUGINS"
_BUILTIN_MODULES = ("kiln.bench.models_local", "kiln.bench.models_hf", "kiln.bench.models_hf_more",
                    "kiln.bench.models_hops", "kiln.bench.models_programs")

#: The suites the CLI offers; ``all`` is every registered model.
SUITES = ("quick", "hf", "local", "all")


def default_loss(output: Any) -> torch.Tensor:
    """Reduce a model output to a scalar: ``.loss`` when the model computed one."""
    loss = getattr(output, "loss", None)
    if loss is None and isinstance(output, dict):
        loss = output.get("loss")
    if loss is not None:
        return loss
    if isinstance(output, torch.Tensor):
        return output.float().sum() if output.dtype.is_floating_point else output.sum()
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0].sum()
    raise TypeError(f"cannot reduce a {type(output).__name__} to a loss; give the model spec a loss=")


@dataclass(frozen=True)
class ModelSpec:
    name: str
    build: Callable[[bool], torch.nn.Module]
    inputs: Callable[[bool, torch.Generator], dict]
    suites: tuple[str, ...] = ()
    loss: Callable[[Any], torch.Tensor] = default_loss
    description: str = ""
    #: models whose ops need numpy randomness (BigBird) still work: the worker
    #: seeds numpy and torch alike before every call, this is documentation only
    tags: tuple[str, ...] = field(default_factory=tuple)
    #: ``sized_inputs(seq, batch) -> inputs``; None: the model cannot run ``--dynamic``
    sized_inputs: Callable[[int, int], Callable[[bool, torch.Generator], dict]] | None = None


_MODELS: dict[str, ModelSpec] = {}
_loaded = False


def register(name: str, build, inputs, *, suites=(), loss=default_loss, description="", tags=(),
             sized_inputs=None) -> ModelSpec:
    """Add a model.  Names are unique; registering one twice is a mistake we report.

    ``sized_inputs`` defaults to ``inputs.at`` when the inputs function has one.
    """
    if name in _MODELS:
        raise ValueError(f"benchmark model {name!r} is registered twice")
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"benchmark model names are short identifiers, got {name!r}")
    if sized_inputs is None:
        sized_inputs = getattr(inputs, "at", None)
    spec = ModelSpec(name, build, inputs, tuple(suites), loss, description, tuple(tags), sized_inputs)
    _MODELS[name] = spec
    return spec


def _load() -> None:
    """Import the model zoo and any plugins once (imports register the entries)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    modules = list(_BUILTIN_MODULES)
    modules += [m.strip() for m in os.environ.get(PLUGIN_ENV, "").split(",") if m.strip()]
    for mod in modules:
        importlib.import_module(mod)
    # the zoo's order, whichever of its modules something imported first
    rank = {m: i for i, m in enumerate(modules)}
    ordered = sorted(_MODELS.values(), key=lambda s: rank.get(getattr(s.build, "__module__", None), len(rank)))
    _MODELS.clear()
    _MODELS.update((s.name, s) for s in ordered)


def names() -> list[str]:
    """Every registered model name, in registration order."""
    _load()
    return list(_MODELS)


def get(name: str) -> ModelSpec:
    """Look up one model; an unknown name lists the known ones."""
    _load()
    try:
        return _MODELS[name]
    except KeyError:
        raise KeyError(f"unknown benchmark model {name!r}; known models: {', '.join(_MODELS)}") from None


def suites() -> list[str]:
    """The suite names: the standard ones plus any a plugin introduced."""
    _load()
    extra = sorted({s for spec in _MODELS.values() for s in spec.suites} - set(SUITES))
    return list(SUITES) + extra


def select(suite: str = "quick", only: list[str] | None = None, pattern: list[str] | None = None) -> list[ModelSpec]:
    """The models a run covers.

    ``only`` names models exactly (and overrides ``suite``); ``pattern`` keeps the
    models whose name contains any of the substrings, like pytest's ``-k``.
    """
    _load()
    if only:
        chosen = [get(n) for n in only]
    else:
        if suite not in suites():
            raise KeyError(f"unknown suite {suite!r}; known suites: {', '.join(suites())}")
        chosen = [s for s in _MODELS.values() if suite == "all" or suite in s.suites]
    if pattern:
        chosen = [s for s in chosen if any(p in s.name for p in pattern)]
    return chosen
