"""Which input sizes and Python ints a capture makes symbolic: ``kiln.compile(dynamic=)``.

One ShapePolicy belongs to each compiled frame's cache and outlives its captures:

* ``dynamic=False``: nothing is symbolic; every new size is a new entry.
* ``dynamic=True``: every dimension of every input tensor is symbolic from the first
  capture (sizes 0 and 1 still specialise, as broadcasting depends on them).
* ``dynamic=None`` (automatic, the default): the first capture is static.  The policy
  remembers the sizes (and int values) each input had when it was captured; when a
  later capture sees an input whose dimension (or int) differs from what it remembered,
  exactly that dimension (or int) is symbolic from then on.  So a size that keeps
  changing costs one more entry, not one per value.

Numbers read from objects, globals or cells that meet tensors in arithmetic follow the
same "static until seen to change" rule in every mode, as 0-d tensor inputs rather than
symbols (``number_varies``).

Parameters and buffers of modules stay static in every mode (their sizes do not vary,
and keeping them static keeps their guards cheap).  ``kiln.mark_dynamic`` /
``maybe_mark_dynamic`` / ``mark_static`` on a tensor (``markers.py``) override the
policy for its dimensions; a dimension marked with ``mark_dynamic`` that the trace
specialises anyway is an error naming the user line that forced it.
"""
from __future__ import annotations

import torch

from ...config import config
from ...markers import dynamic_marks


class ShapePolicy:
    #: numbers given to the frame that meet tensors enter the graph as 0-d tensor inputs
    #: (``values.tensor._scalar_input``), so a new value is not a recompile; a policy for a
    #: program whose number inputs are constants anyway (``kiln.export``: torch.export
    #: bakes them in and checks them) says False, and they are baked in like numbers read
    #: from objects
    frame_numbers_are_inputs = True

    def __init__(self, mode: bool | None = None):
        if mode not in (None, True, False):
            raise TypeError(f"dynamic must be None, True or False, got {mode!r}")
        self.mode = mode
        self._sizes: dict[str, tuple] = {}        # input -> sizes when it was last captured
        self._dynamic_dims: dict[str, set] = {}   # input -> dimensions found to vary
        self._ints: dict[str, int] = {}
        self._dynamic_ints: set[str] = set()
        self._numbers: dict[str, tuple] = {}      # number read -> (type, value) when last captured
        self._varying_numbers: set[str] = set()

    @property
    def automatic(self) -> bool:
        return self.mode is None and config.automatic_dynamic_shapes

    def tensor_dims(self, key: str, t: torch.Tensor) -> tuple[set, dict]:
        """(dimensions to make symbolic, dimensions the user required to be symbolic ->
        their (min, max))."""
        shape = tuple(t.shape)
        marked, maybe, static = dynamic_marks(t)
        if self.mode is False or isinstance(t, torch.nn.Parameter) or isinstance(t, torch.nn.parameter.Buffer):
            dims: set = set()
        elif self.mode is True:
            dims = set(range(len(shape)))
        else:
            dims = set(self._dynamic_dims.get(key, ()))
            seen = self._sizes.get(key)
            if self.automatic and seen is not None and len(seen) == len(shape):
                changed = {i for i, (a, b) in enumerate(zip(seen, shape)) if a != b}
                if changed:
                    dims |= changed
                    self._dynamic_dims.setdefault(key, set()).update(changed)
            self._sizes[key] = shape
        if self.mode is not False:
            dims |= set(marked) | set(maybe)
        dims -= set(static)
        return dims, marked

    def int_is_dynamic(self, key: str, value: int) -> bool:
        """Whether an int argument of the frame (``key``) is a symbolic graph input this time.
        (Ints read from attributes stay constants: module configuration does not vary.)"""
        if self.mode is False or (self.mode is None and not self.automatic):
            return False
        return _seen_to_vary(self._ints, self._dynamic_ints, key, value)

    def number_varies(self, key: str, value) -> bool:
        """Whether a number read from an object, a global or a cell (``key``), met in
        tensor arithmetic, has been seen with another value: then it enters the graph as
        a 0-d tensor input, else it is baked in and guarded by value.

        Such numbers are mostly hyperparameters (a norm's ``eps``, an attention scale)
        that never change: an input would cost a tensor made per call and keep backends
        from folding it.  A counter kept in an attribute changes: its second value costs
        one more entry, after which it is an input (in every ``dynamic`` mode: an input
        is not a symbol)."""
        return _seen_to_vary(self._numbers, self._varying_numbers, key, (type(value), value))


def _seen_to_vary(last: dict, varying: set, key: str, value) -> bool:
    """Whether ``key`` varies: it did before, or ``value`` differs from the one ``last``
    remembers (which becomes ``value``)."""
    if key in varying:
        return True
    seen = last.get(key)
    last[key] = value
    if seen is not None and seen != value:
        varying.add(key)
        return True
    return False
