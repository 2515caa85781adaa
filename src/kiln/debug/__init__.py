"""Tools for finding out whether compiled code behaves like eager.

* :mod:`~kiln.debug.accuracy`: ``compare`` values against a float64 reference, with a
  tolerance measured from eager's own rounding noise; ``fp64_copy`` makes that reference.
* :mod:`~kiln.debug.aliasing`: ``record_call`` / ``compare_aliasing`` for which outputs
  alias which inputs and which inputs a call mutated.
* :mod:`~kiln.debug.behaviour`: ``check_same_behaviour`` does all of it for one function.
* ``minify(fn, args, backend=...)`` (:mod:`kiln.debug.minify`): the first graph a backend
  gets wrong, shrunk to a few ops, written as a standalone repro script.
* ``bisect(fn, args, backend=...)`` (:mod:`kiln.debug.bisect`): the graph and node that
  first break the end-to-end result, and for inductor the stage.
"""
from __future__ import annotations

from . import auto_repro
from .accuracy import AccuracyReport, TensorError, compare, fp64_copy
from .aliasing import CallRecord, aliasing_of, compare_aliasing, record_call
from .behaviour import BehaviourReport, check_same_behaviour
from .bisect import bisect as _bisect_fn, BisectResult
from .minify import minify as _minify_fn, MinifyResult

__all__ = [
    "AccuracyReport", "TensorError", "compare", "fp64_copy",
    "CallRecord", "aliasing_of", "compare_aliasing", "record_call",
    "BehaviourReport", "check_same_behaviour",
    "MinifyResult", "minify", "BisectResult", "bisect",
]

# KILN_REPRO / kiln.config.repro_after: the backend layer calls these wrappers
auto_repro.install()

# the function, not the submodule of the same name (``kiln.debug.minify(fn, args, ...)``)
minify = _minify_fn
bisect = _bisect_fn
