"""A frame captured whole, for a program that leaves Python (``kiln.export``).

``compile_frame.capture`` builds a cache entry: a guard, a graph handed to a backend,
and glue that keeps eager's behaviour around the graph (re-running the frame as Python
when the graph raises, output fix-ups, Python side effects replayed).  A program that
is exported has none of that around it: it is one graph, run by someone else.  So this
module traces the frame with ``fullgraph`` (every problem is an ``Unsupported`` naming
the user's line), refuses what an exported graph could not carry (Python side effects
on objects outside the frame), and writes one plain function with the frame's own
signature: it reads the graph's inputs through Kiln's sources, checks what the trace
assumed about symbolic sizes (``torch._check``, so a tracer running the function records
them as constraints), calls the graph once and rebuilds the return value as the glue
would.  Running that function is running the captured graph and nothing else, which is
what makes tracing it again with torch.export's non-strict mode sound.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.fx import traceback as fx_traceback

from ...config import config
from ...exc import Unsupported
from .codegen import Codegen
from .compile_frame import _check_marked_dims, _entry_name, _seal_graph, _trace
from .graph_break import FrameCompiler
from ..values import ConstantValue
from ..basics import AttrSource, ShapePolicy


@dataclass
class WholeFrame:
    """One frame as one graph: ``function(fn, *args, **kwargs)`` runs it (``fn`` is the
    function traced; a method's ``self`` comes first among ``args``); ``gm`` the graph
    (None when the frame computes nothing), ``source`` the function's text,
    ``shape_checks`` the descriptions of what it checks of symbolic sizes."""
    function: object
    gm: object
    source: str
    shape_checks: list
    op_count: int


def capture_whole(fn, args, kwargs, compiler: FrameCompiler, shapes: ShapePolicy) -> WholeFrame:
    """Trace ``fn(*args, **kwargs)`` as one graph (``compiler.settings.fullgraph`` must
    be set) and write the function that runs it.  Nothing is run on the real inputs."""
    if not compiler.settings.fullgraph:
        raise ValueError("capture_whole needs fullgraph settings")
    recording, config.record_stack_traces = config.record_stack_traces, True
    try:
        result, _plan, state, tracer, final_grad = _trace(fn, args, kwargs, compiler, shapes)
    finally:
        config.record_stack_traces = recording
    builder = state.builder
    _check_marked_dims(builder)
    _drop_restoring_writes(state.side_effects)
    buffer_writes = _take_buffer_writes(state.side_effects)
    if not state.side_effects.is_empty():
        what, where = _describe_effects(state.side_effects)
        raise Unsupported(f"the program changes Python state outside it ({what}); an exported program holds "
                          f"tensor computation only: keep such state in a buffer (register_buffer) and change "
                          f"it in place").with_location(*(where or tracer.location()))
    if final_grad != state._initial_grad_mode:
        raise Unsupported("the program leaves grad mode switched (torch.set_grad_enabled without restoring it)")
    name = _entry_name(fn)
    graph, out_index = _seal_graph(state, [result, *(v for _, _, v in buffer_writes)], name)
    cg = Codegen(state, out_index)
    checks = []
    for sources, check, description in builder.shape_guards():
        text = check.replace("{v}", cg.source_expr(sources[0]))
        for j, src in enumerate(sources[1:], 1):
            text = text.replace(f"{{v{j}}}", cg.source_expr(src))
        cg.lines.append(f"{cg.ref(torch._check)}({text})")
        checks.append(description)
    for node, source, _ in graph.live:
        # a size the capture kept static is a constant of the graph and of the Python
        # decided on it: a tracer that makes it symbolic must be told (a named Dim that
        # Kiln did not make symbolic is then torch.export's error, never a program that
        # took the example's branch for every size)
        fake = node.meta.get("example_value")
        if isinstance(fake, torch.Tensor):
            if _user_input(source):
                # what the tensor guards checked and shape constraints cannot say (dtype,
                # device, layout) as an op the program keeps; not the sizes: torch 2.13's
                # fake kernel of this op compares a Size with a list and always fails
                cg.lines.append(f"{cg.ref(torch.ops.aten._assert_tensor_metadata.default)}({cg.source_expr(source)}, "
                                f"dtype={cg.ref(fake.dtype)}, device={cg.ref(fake.device)}, "
                                f"layout={cg.ref(fake.layout)})")
            for i, size in enumerate(fake.shape):
                if isinstance(size, int):
                    cg.lines.append(f"{cg.ref(torch._check)}({cg.source_expr(source)}.size()[{i}] == {size})")
    if graph.gm is not None:
        inputs = ", ".join(cg.source_expr(s) for _, s, _ in graph.live)
        cg.lines.append(f"___o = {cg.ref(_keeping_stack_traces(graph.gm))}({inputs})")
    for module, attr, value in buffer_writes:
        cg.lines.append(f"{cg.expr(module)}._buffers[{attr!r}].copy_({cg.expr(value)})")
    cg.return_value(result)
    generated = cg.entry_code(name, fn, [], dynamic=builder.is_dynamic)
    glue = generated.load()["glue"]

    def function(*a, **kw):
        return glue(None, *a, **kw)

    return WholeFrame(function, graph.gm, generated.glue_source, checks, graph.op_count)


def _user_input(source) -> bool:
    """A tensor the caller passes (an argument, or an item of one), not one read through
    attributes (parameters, buffers: the program's own state, lifted by torch.export)."""
    while source is not None:
        if isinstance(source, AttrSource):
            return False
        source = source.base
    return True


def _keeping_stack_traces(gm):
    """The graph, run node by node with each node's meta current (``torch.fx.Interpreter``
    under ``preserve_node_meta``), so a tracer that runs it (torch.export) gives the
    nodes it records the user's stack traces rather than the graph's generated code."""
    def run(*args):
        with fx_traceback.preserve_node_meta():
            return torch.fx.Interpreter(gm).run(*args)
    return run


def _drop_restoring_writes(se) -> None:
    """Attribute writes that leave the attribute as the frame found it (a flag set and
    reset again, transformers' ``CompileableContextVar`` around every forward) change
    nothing a later call sees: the glue replays them, an exported program has nothing
    to replay.  A write of a number, string, bool or None equal to (and of the same type
    as) the value in the object's ``__dict__`` now, or of the very object held there."""
    for key, (target, attr, value) in list(se.attr_writes.items()):
        real = getattr(target, "obj", None)
        held = getattr(real, "__dict__", {})
        if key[0] in se.trace_local_ids or not isinstance(value, ConstantValue) or attr not in held:
            continue
        now, new = held[attr], value.peek()
        if now is new or (type(now) is type(new) and type(new) in (int, float, str, bool) and now == new):
            del se.attr_writes[key]


def _take_buffer_writes(se) -> list:
    """Attribute writes that set a module's buffer to a tensor (``self.count += 1``,
    ``self.ema = 0.9 * self.ema + ...``), taken out of the side effects: for a program
    that leaves Python, a buffer is state it changes in place (the ExportedProgram's
    buffer mutations), so each becomes a ``copy_`` into the buffer after the graph, or
    nothing where the written tensor is the buffer itself (an in-place operator).  A write
    that would change the buffer's shape or dtype stays a side effect (refused)."""
    taken = []
    for key, (target, attr, value) in list(se.attr_writes.items()):
        module = getattr(target, "obj", None)
        if not isinstance(module, torch.nn.Module) or key[0] in se.trace_local_ids:
            continue
        current = module.__dict__.get("_buffers", {}).get(attr)
        fake = getattr(value, "fake", None)
        if not isinstance(current, torch.Tensor) or not isinstance(fake, torch.Tensor):
            continue
        if fake.shape != current.shape or fake.dtype != current.dtype or fake.device != current.device:
            continue
        del se.attr_writes[key]
        node = getattr(value, "node", None)
        source = getattr(value, "source", None)
        if node is not None and node.op == "placeholder" and source is not None \
                and source.describe() == f"{target.source.describe()}._buffers[{attr!r}]":
            continue        # the buffer itself, changed in place by the graph
        taken.append((target, attr, value))
    return taken


def _describe_effects(se) -> tuple:
    """What the side effects write, in the user's terms (a few of them), and where the
    first of them was made (None if unknown)."""
    what, where = [], []
    for key, (target, name, _) in se.attr_writes.items():
        if key[0] not in se.trace_local_ids:
            what.append(f"attribute {name!r} of {getattr(target, 'describe', lambda: '?')()}")
            where.append(se.locations.get(("attr", key)))
    for key, (_, name, _) in se.global_writes.items():
        what.append(f"global {name!r}")
        where.append(se.locations.get(("global", key)))
    for key in se.cell_writes:
        what.append("a closure variable")
        where.append(se.locations.get(("cell", key)))
    for key, c in se.mutated_containers.items():
        what.append(f"the {type(getattr(c, 'real', None) or []).__name__} {c.source.describe() if c.source else ''}".rstrip())
        where.append(se.locations.get(("container", key)))
    what += [f"a call to {fn.describe()}" for fn, _ in se.calls]
    first = next((w for w in where if w is not None), None)
    return ", ".join(what[:4]) + (", ..." if len(what) > 4 else ""), first
