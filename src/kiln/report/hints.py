"""One-sentence hints for a graph break, shown when the user clicks it in the report.

Why a table of patterns: break reasons are Kiln's own sentences, so a few substrings
identify the common families; anything else gets the general explanation.  The hint
also says whether the break is in library code, where the user usually cannot (and
need not) change anything.
"""
from __future__ import annotations

import os
import sysconfig

#: (substring of the reason, hint); the first match wins
_PATTERNS: tuple = (
    ("print()", "Printing is a Python side effect: it runs as Python at the break. Move it out of the "
                "compiled function or behind a flag if the extra graph matters."),
    ("depends on tensor data", "The result's shape or value depends on tensor contents (e.g. .item(), "
                               "nonzero(), data-dependent control flow), which a graph cannot express; "
                               "the code after it resumes in a new graph."),
    ("numpy.random", "np.random draws run as Python, on numpy's own stream; the array they return enters "
                     "the next graph as an input. torch's generators draw inside graphs."),
    ("torch._numpy computes", "numpy calls are traced through torch._numpy, and this one would give another "
                              "dtype than numpy does, so it runs as Python; an explicit .astype() before it "
                              "(or torch ops) keeps it in the graph."),
    ("numpy", "Kiln traces numpy calls on arrays from tensors as tensor ops (torch._numpy); this one runs as "
              "Python (the reason says why) and its result enters the next graph as an input."),
    ("backward()", "loss.backward() runs as Python (autograd); the forward graphs before it are compiled, "
                   "and AOTAutograd-based backends (aot_eager, aten, inductor) compile their backward too."),
    ("Tensor.grad", "Setting .grad (zero_grad, clearing gradients) runs as Python; doing it before the "
                    "compiled call keeps it out of the compiled region."),
    ("ndarray", "A NumPy array Kiln cannot view as a tensor (object dtype, read-only or byte-swapped memory) "
                "stays a Python object; the numpy calls on it run as Python."),
    ("for-loop over", "The loop's iterator was carried across an earlier break, so each next() runs as "
                      "Python; the loop body is still compiled (one cached continuation for every iteration)."),
    ("does not model", "Kiln cannot look inside this C function, so the call runs as Python; its result "
                       "enters the next graph as an input."),
    ("generator", "Generator functions are not compiled: their frame runs eagerly. Compile the code that "
                  "consumes the generator, or turn it into a function returning a list."),
    ("side effect", "A Python side effect Kiln does not replay runs as Python at the break."),
    ("global state", "Calls that read or set process state (seeding, RNG state, autocast switches) must "
                     "really run, so they run as Python at the break."),
    ("is not supported yet", "Kiln does not trace this construct yet; it runs as Python and the frame "
                             "resumes compiled afterwards. Please report it if it matters."),
    ("internal error", "This is a bug in Kiln: the frame ran eagerly. Please report it with this trace."),
    ("recompile limit", "Values the guards depend on keep changing; see the recompile history of the frame."),
    ("raises", "The code raises an exception at this point; eager raises it, and the frame before it "
               "is compiled."),
)

GENERAL = ("This step runs as plain Python; the code before it is one graph and the code after it "
           "resumes compiled in another.")


def _library_roots() -> tuple:
    paths = sysconfig.get_paths()
    roots = {paths.get("purelib"), paths.get("platlib"), paths.get("stdlib")}
    return tuple(os.path.realpath(r) for r in roots if r)


_LIBRARY_ROOTS = _library_roots()


def is_library(path: str | None) -> bool:
    """Whether ``path`` belongs to an installed package or the standard library."""
    if not path:
        return False
    real = os.path.realpath(path)
    return "site-packages" in real.split(os.sep) or any(real.startswith(r + os.sep) for r in _LIBRARY_ROOTS)


def hint_for(reason: str, file: str | None = None) -> str:
    """The hint for a break with ``reason`` at ``file``."""
    text = next((hint for pattern, hint in _PATTERNS if pattern in reason), GENERAL)
    if is_library(file):
        text += (" The break is inside library code: only the graphs around it change, and you need not "
                 "change the library.")
    return text
