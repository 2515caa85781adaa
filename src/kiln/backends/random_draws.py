"""Which recorded calls draw random numbers, and whether a backend's trace draws the same.

Found by watching, not by a list of names.  Every call Kiln records is run on fake
tensors (``graph.GraphBuilder.call``) under a :class:`DrawWatcher`, which notes
each ATen op reaching it that is tagged ``torch.Tag.nondeterministic_seeded`` (the tag
ATen gives every op that consumes a generator: ``bernoulli_``, ``native_dropout``,
``rrelu_with_noise``, ``randperm``...).  That run follows eager's own path: the C++
kernels of composite ops (``torch.lstm``, ``F.dropout2d``, ``F.alpha_dropout``) dispatch
their ATen ops as eager does, so the draws seen are eager's: ``node.meta["kiln_draws"]``,
one entry per draw, the number of elements it fills.  A call whose randomness a constant
argument switches off (``training=False``, ``p=0``) draws nothing and is not random.

Backends that trace through AOTAutograd (aot_eager, aten, inductor) do not run a
composite op's C++ kernel: AOTAutograd traces with the Python dispatcher on, so a
Python decomposition registered for the op (``py_impl``) is traced instead.  Where that
decomposition draws differently the compiled graph draws other numbers than eager.
(PyTorch's decomposition of multi-layer ``lstm``/``gru``/``rnn_*`` drops the dropout
between layers altogether: ``dropout if (train and num_layers < i - 1) else 0.0``.)
:func:`redrawn_by_trace` runs each random call once more on fakes the way AOTAutograd
traces it and compares the draws; a graph with a call whose draws differ (in number,
sizes or order) runs op by op (``compile_frame``), as eager does.  The draws of the
ATen ops a backend's graph then holds run eager's kernels in program order (inductor
with ``fallback_random``), so equal draws give eager's numbers.
"""
from __future__ import annotations

import contextlib
import warnings

import torch
import torch.fx
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_flatten, tree_map

_SEEDED = torch.Tag.nondeterministic_seeded


class DrawWatcher:
    """Notes the generator-consuming ATen ops dispatched to one fake mode while a
    :meth:`watching` block is open (one list per block; a nested block's draws are also
    the enclosing block's: a call that records others, a higher-order operator's, draws
    what they draw).

    Installed on the mode instance (its ``dispatch``), not by subclassing: torch finds a
    higher-order operator's fake rule by the mode's exact type."""

    def __init__(self, mode: FakeTensorMode):
        self.mode = mode
        self._draws = None
        self._depth = 0     # ops the mode runs while dispatching one (a decomposition's) are not draws of their own
        plain = mode.dispatch

        def dispatch(func, types, args=(), kwargs=None):
            self._depth += 1
            try:
                out = plain(func, types, args, kwargs)
            finally:
                self._depth -= 1
            if self._draws is not None and self._depth == 0 and _SEEDED in getattr(func, "tags", ()) \
                    and not _dropout_switched_off(func, args, kwargs):
                self._draws.append(_size_drawn(out))
            return out

        mode.dispatch = dispatch
        mode.kiln_draw_watcher = self

    @staticmethod
    def of(mode: FakeTensorMode) -> "DrawWatcher":
        """The watcher of ``mode``, installed on first use."""
        watcher = getattr(mode, "kiln_draw_watcher", None)
        return watcher if isinstance(watcher, DrawWatcher) else DrawWatcher(mode)

    @contextlib.contextmanager
    def watching(self):
        outer, self._draws = self._draws, []
        try:
            yield self._draws
        finally:
            if outer is not None:
                outer.extend(self._draws)
            self._draws = outer


def _dropout_switched_off(func, args, kwargs) -> bool:
    """The tag is the op's, not the call's: the fused attention kernels carry it for their
    dropout, and draw nothing when called with ``dropout_p=0`` (checked against eager's
    kernels: the generator does not move)."""
    for i, argument in enumerate(func._schema.arguments):
        if argument.name == "dropout_p":
            value = kwargs.get("dropout_p") if kwargs and "dropout_p" in kwargs else \
                (args[i] if i < len(args) else argument.default_value)
            return type(value) in (int, float) and value == 0
    return False


def _size_drawn(out) -> object:
    """The number of elements a random op filled: that of its (first) result, which is the
    tensor filled in place for ``bernoulli_`` and the like.  A symbolic count is kept as
    its expression."""
    first = next((t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)), None)
    if first is None:
        return None
    numel = first.numel()
    return numel if isinstance(numel, int) else str(numel)


def is_random_op(node: torch.fx.Node) -> bool:
    """Whether ``node`` draws from a random generator: what its fake run saw when Kiln
    recorded it; for a node Kiln did not run (an ATen graph's), its op's tag."""
    draws = node.meta.get("kiln_draws")
    if draws is not None:
        return bool(draws)
    return node.op == "call_function" and _SEEDED in getattr(node.target, "tags", ())


def draws_random_numbers(gm: torch.fx.GraphModule) -> bool:
    """Whether running ``gm`` (or a subgraph it calls) may advance a random generator."""
    return any(is_random_op(node) for graph in _graphs(gm) for node in graph.nodes)


def _graphs(gm: torch.fx.GraphModule):
    for module in gm.modules():
        graph = getattr(module, "graph", None)
        if isinstance(graph, torch.fx.Graph):
            yield graph


def redrawn_by_trace(gm: torch.fx.GraphModule) -> torch.fx.Node | None:
    """The first random call of ``gm`` that AOTAutograd's trace (Python dispatcher on, so
    Python decompositions of composite ops apply) would record with other draws than
    eager's kernel makes, or None.  A call of one ATen op is what the trace records, so
    only other calls are run again (on fakes, in the fake mode that watched them)."""
    for graph in _graphs(gm):
        for node in graph.nodes:
            eager_draws = node.meta.get("kiln_draws")
            if not eager_draws or isinstance(node.target, torch._ops.OpOverload):
                continue
            if _traced_draws(node) != list(eager_draws):
                return node
    return None


def _traced_draws(node: torch.fx.Node):
    """The draws of ``node`` run on fresh fakes like its inputs, with the Python dispatcher
    on; None when it cannot be run so (then it counts as drawing differently)."""
    watcher = _watcher(node)
    if watcher is None:
        return None
    mode = watcher.mode
    args, kwargs = tree_map(lambda a: _fresh_input(mode, a), (node.args, node.kwargs))
    try:
        # the call warned (if it does) when it was recorded; eager warns once
        with mode, watcher.watching() as draws, enable_python_dispatcher(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if node.op == "call_method":
                self_arg, *rest = args
                getattr(self_arg, node.target)(*rest, **kwargs)
            else:
                node.target(*args, **kwargs)
    except Exception:
        return None
    return draws


def _watcher(node: torch.fx.Node) -> DrawWatcher | None:
    """The watcher of the fake mode the call was recorded in (that of its result or of an input)."""
    inputs = [a.meta.get("example_value") for a in node.all_input_nodes]
    for value in tree_flatten([node.meta.get("example_value"), inputs])[0]:
        watcher = getattr(getattr(value, "fake_mode", None), "kiln_draw_watcher", None)
        if isinstance(watcher, DrawWatcher):
            return watcher
    return None


def _fresh_input(mode: FakeTensorMode, arg):
    """A node argument as the trace would see it: for a tensor, a new fake with the
    metadata of the recorded one (so running the call again changes no recorded fake)."""
    if not isinstance(arg, torch.fx.Node):
        return arg
    fake = arg.meta.get("example_value")
    if not isinstance(fake, torch.Tensor):
        return fake
    with mode:
        with torch.no_grad():
            new = torch.empty_strided(fake.size(), fake.stride(), dtype=fake.dtype, device=fake.device)
        if not fake.requires_grad:
            return new
        new.requires_grad_(True)
        # a result of other ops stays one (an in-place op on a leaf that requires grad fails)
        return new if fake.grad_fn is None else new.clone()
