"""Capture one frame: trace it, hand the graph to the backend, and build the cache
entry (guard function + glue function) from generated source.

Compile time's orchestrator: ``capture`` calls each step in order and owns none of
their work.  Tracing is the interpreter's (``interpreter``), the plan at a break is
``graph_break``'s (the code objects ``resume``'s), the glue text ``codegen``'s and the
guard text ``guards``'s, executed once by ``codegen.GeneratedCode.load``; what is
decided here is which graph goes to the backend and how (``_compile``: the op-by-op
rules, the tracing context), and every event is reported with one ``kiln.events`` call.
"""
from __future__ import annotations

import contextlib
import inspect
import linecache
from dataclasses import dataclass, field

import torch
from torch._guards import TracingContext, tracing
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from ...backends import applies_input_mutations_last, caches_compiled_graphs, returned_as_is, runs_graph_as_is
from ...backends import compile_graph, draws_random_numbers, has_body_calls, redrawn_by_trace
from ...events import event, later
from ...exc import ArgumentError, AutogradEngineCall, SpecializationError, Unsupported
from .codegen import Codegen, GraphForGlue, collect_tensors, handoff_sources
from ..basics import ShapePolicy
from .graph_break import BreakPlan, FrameCompiler
from .graph_outputs import extra_outputs, mutated_inputs, partial_backward_diverges, storage_key
from ..interpreter import BreakHere, Tracer
from .resume import entry_base, note_probed
from ..basics import ClosureSource, FnSource, LocalSource
from ..semantics import CaptureState
from ..values import GradModeValue, TensorValue, TracedException, without_subclass_dispatch, wrap

_ENTRY_IDS = iter(range(1, 1 << 62))
RECORD_NESTED_BREAKS = False  # a nested break is recorded once, in the frame where it happens


@dataclass
class Entry:
    """One compiled version of a frame.

    ``guard(fn, *args, **kwargs)`` is False on a miss, else what the glue takes first:
    ``run(guard(...), fn, *args, **kwargs)``."""
    guard: object
    explain_guard: object
    run: object
    guard_source: str
    glue_source: str
    graph_module: object | None
    op_count: int
    name: str
    guard_count: int
    extra: dict = field(default_factory=dict)
    gather: object = None   # reads what the guard hands the glue, for a call that skips the guard
    line_map: dict = field(default_factory=dict)   # glue line -> the user's code (GeneratedCode.line_map)
    stored: "StoredForm | None" = None   # what the persistent cache writes of it (kiln.persistent)


@dataclass
class StoredForm:
    """What a new process needs to make this entry again without capturing
    (``kiln.persistent``): the generated code, the graph, the namespace name the glue
    calls it by and how it was compiled (``"backend"``, or ``"forward"``: the graph
    runs op by op), or ``not_cacheable``: why the entry cannot be written."""
    generated: object
    gm: object | None = None
    graph_ref: str | None = None
    graph_mode: str = "backend"
    mutations_last: bool = False
    not_cacheable: str | None = None


def _var_param_names(code) -> list:
    names, idx = [], code.co_argcount + code.co_kwonlyargcount
    if code.co_flags & inspect.CO_VARARGS:
        names.append(code.co_varnames[idx])
        idx += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        names.append(code.co_varnames[idx])
    return names


def _bind_real(fn, args, kwargs) -> dict:
    sig = inspect.Signature.from_callable(fn, follow_wrapped=False)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise ArgumentError(f"{fn.__qualname__}(): {e}") from None
    bound.apply_defaults()
    return dict(bound.arguments)


def capture(fn, args, kwargs, compiler: FrameCompiler, shapes: ShapePolicy | None = None) -> Entry:
    """Trace ``fn(*args, **kwargs)`` symbolically and build a cache entry for it.

    This function only orchestrates: the trace (``_trace``: restarted with a break
    planned where it could not go on), the break's plan (``graph_break``), the graph
    handed to the backend (``_compile``), the generated code (``codegen``), executed in
    one place (``GeneratedCode.load``), and one event per thing done (``kiln.events``).
    """
    result, plan, state, tracer, final_grad = _trace(fn, args, kwargs, compiler, shapes)
    code = fn.__code__
    builder = state.builder
    _check_marked_dims(builder)
    for sources, check, description in builder.shape_guards():
        state.guards.shape(sources, check, description)
    name = _entry_name(fn)
    graph, out_index = _seal_graph(state, [result] if plan is None else plan.values(), name)
    cg = Codegen(state, out_index)
    handoff, compiled, mutations_last, graph_mode = [], None, False, "backend"
    if graph.gm is not None:
        compiled, as_is, mutations_last = _compile(graph, compiler, name, tracer, plan, builder)
        if getattr(builder, "subclass_inputs", False):   # their overrides ran at trace time
            compiled = without_subclass_dispatch(compiled)
        graph_mode = "forward" if graph.gm.meta.get("kiln_op_by_op") else "backend"
        handoff = handoff_sources(graph.live, state.guards)
        cg.graph_call(graph, compiled, handoff, mutations_last=mutations_last, as_is=as_is, code=code,
                      random=draws_random_numbers(graph.gm))
    if plan is not None and tracer.context_stack:
        # with-blocks that span the break are entered again by the glue (see WithExit);
        # outside them the mode is what it was before the outermost one was entered
        final_grad = next((c.prior for c in tracer.context_stack if isinstance(c, GradModeValue)), final_grad)
    if final_grad != state._initial_grad_mode:
        cg.lines.append(f"{cg.ref(torch._C._set_grad_enabled)}({final_grad})")
    if plan is None:
        cg.return_value(result)
    else:
        plan.write_glue_end(cg, fn)
    generated = cg.entry_code(name, fn, handoff, dynamic=builder.is_dynamic)
    functions = generated.load()
    if graph.gm is not None:
        event("graph", name=name, gm=graph.gm, op_count=graph.op_count,
              inputs=later(lambda: [(cg.source_expr(s), r) for _, s, r in graph.live]))
    event("entry", name=name, guard_source=generated.guard_source, glue_source=generated.glue_source,
          guard_count=len(state.guards))
    stored = StoredForm(generated, graph.gm, None if compiled is None else cg.ref(compiled), graph_mode,
                        mutations_last, _not_cacheable(plan, builder, graph))
    return Entry(functions["guard"], functions["explain"], functions["glue"], generated.guard_source,
                 generated.glue_source, graph.gm, graph.op_count, name, len(state.guards), {"break": plan},
                 functions["gather"], generated.line_map, stored)


def _not_cacheable(plan, builder, graph) -> str | None:
    """Why an entry cannot go to the persistent cache, by what its capture made: the
    continuations of a graph break are functions made at run time; symbolic sizes,
    higher-order operator bodies held by the graph and data-dependent values are state of this
    capture's fake mode that the stored graph does not carry."""
    if plan is not None:
        return "the frame has a graph break (its continuations are made at run time)"
    if builder.is_dynamic:
        return "the graph has symbolic sizes"
    if builder.attrs:
        return "the graph holds higher-order operator bodies"
    if builder.data_dependent:
        return "the graph has data-dependent values"
    if any(not isinstance(r, torch.Tensor) for _, _, r in graph.live):
        return "a graph input is not a tensor"
    if getattr(builder, "subclass_inputs", False) or \
            any(type(r) not in (torch.Tensor, torch.nn.Parameter) for _, _, r in graph.live):
        return "a graph input is a tensor subclass (its graph runs wrapped)"
    if graph.gm is not None and has_body_calls(graph.gm):
        return "the graph calls layer bodies"
    return None


def compile_stored_graph(gm, example_inputs: list, compiler: FrameCompiler, name: str, mutations_last: bool):
    """Compile a graph loaded from the persistent cache as ``_compile_graph`` compiles a
    static one (the entries written have no symbols, constants or data-dependent values)."""
    context = contextlib.nullcontext()
    if caches_compiled_graphs(compiler.settings.backend):
        context = tracing(TracingContext(static_fake_mode(example_inputs)))
    with context:
        out = compile_graph(gm, example_inputs, compiler.graph_backend, backend_name=compiler.settings.backend_name,
                            graph_name=name, user_location=None, inputs_change_last=mutations_last)
    if not callable(out):
        raise TypeError(f"backend {compiler.settings.backend_name!r} returned {type(out).__name__}, not a callable")
    return out


def _trace(fn, args, kwargs, compiler: FrameCompiler, shapes):
    """Run the trace to its end: ``(result, None, ...)`` for a frame that returns, or
    ``(None, BreakPlan, ...)`` for one that breaks, with the state, the tracer and the
    grad mode at the end.

    If tracing hits something unsupported (and fullgraph is off), the trace is run
    again from the start with a graph break planned before the root-frame instruction
    that was executing; tracing is deterministic, so the second run reaches it with
    clean state.
    """
    fullgraph = compiler.settings.fullgraph
    real_locals = _bind_real(fn, args, kwargs)
    note_probed(fn.__code__, ())   # captured, even if it fails: a loop's picker stops here
    break_at, reason = None, None
    while True:
        state, tracer = _new_trace(fn, real_locals, break_at, shapes, compiler)
        grad_before = torch.is_grad_enabled()
        try:
            try:
                result = tracer.run()
                outcome = ("return", result)
            except BreakHere as b:
                outcome = ("break", b.ins)
            except TracedException as e:
                raise Unsupported(f"the frame raises {e.describe()} (eager will raise it)") \
                    .with_location(*tracer.location()) from None
            if tracer.yields is not None:
                code = fn.__code__
                raise Unsupported(f"{code.co_name} is a generator function; Kiln compiles ordinary "
                                  f"functions only").with_location(
                    f"{code.co_filename}:{code.co_firstlineno}",
                    linecache.getline(code.co_filename, code.co_firstlineno).rstrip() or None)
            final_grad = torch.is_grad_enabled()
            state.restore_global_state()
        except Unsupported as e:
            index = e.root_index
            # fatal: a higher-order operator's rule is broken; Python could not run it either
            if fullgraph or index is None or index == break_at or e.fatal:
                raise
            break_at, reason = index, e
            continue
        finally:
            state.close_autocast(record=False)
            torch._C._set_grad_enabled(grad_before)
        break
    # which carried iterators the entry depends on (runtime.steps.LoopExitPicker)
    note_probed(fn.__code__, [n for n, v in real_locals.items() if id(v) in state.probed_iterators])
    if outcome[0] == "return":
        return outcome[1], None, state, tracer, final_grad
    plan = BreakPlan(tracer, outcome[1], reason, compiler)
    # a break inside a callee that is compiled as its own frame is recorded there,
    # where it happens; here it would be the same break counted once per caller
    event("break", error=reason, counted=RECORD_NESTED_BREAKS or reason.depth == 0 or not plan.callee_compiled)
    return None, plan, state, tracer, final_grad


def _new_trace(fn, real_locals, break_at, shapes, compiler):
    code = fn.__code__
    state = CaptureState(fn, shapes)
    state.real_locals = real_locals
    # a backend that does not declare it runs graphs as they are may functionalize them
    # (backends/contract.py): the rules for AOTAutograd's graphs apply
    state.functional_backend = not runs_graph_as_is(compiler.settings.backend)
    # defaults are bound from this function object; another one with the same code may differ
    for attr in ("__defaults__", "__kwdefaults__"):
        if getattr(fn, attr):
            state.guards.add("id", FnSource(), f"{{v}}.{attr} is {state.ns.ref(getattr(fn, attr))}",
                             f"the function's {attr} are the same objects", plan=(("attr_is", attr, getattr(fn, attr)),))
    cells = {}
    for i, name in enumerate(code.co_freevars):
        cells[name] = state.cell_for(fn.__closure__[i], ClosureSource(FnSource(), i))
    tracer = Tracer(state, code, fn.__globals__, {}, cells)
    tracer.break_at = break_at
    tracer.locals = {name: wrap(tracer, value, LocalSource(name)) for name, value in real_locals.items()}
    # *args / **kwargs are fresh containers made by the call: nobody outside sees them
    for name in _var_param_names(code):
        if name in tracer.locals:
            tracer.locals[name].source = None
    return state, tracer


def _entry_name(fn) -> str:
    """A fresh name for an entry of ``fn``'s frame (``resume.entry_base``: a wrapper's is
    the wrapped function's, ``BertModel_forward_3``): a valid identifier even for
    <lambda>, <genexpr> and other non-identifier code names."""
    return f"{''.join(c if c.isalnum() else '_' for c in entry_base(fn))}_{next(_ENTRY_IDS)}"


def _seal_graph(state, outgoing: list, name: str) -> tuple:
    """The graph's outputs (what the glue reads from ``outgoing`` and the side effects,
    then the extra outputs of ``graph_outputs.extra_outputs``) and the inputs it is
    passed, as a ``GraphForGlue`` (``gm`` None when the frame computes nothing), and the
    index of each output value."""
    builder = state.builder
    needed = collect_tensors([*outgoing, *state.side_effects.values()])
    out_index = {id(v): i for i, v in enumerate(needed)}
    # placeholders nobody uses are not passed to the graph (their guards stay)
    live = []
    for (node, src), real in zip(builder.placeholders, builder.example_inputs):
        if node.users:
            live.append((node, src, real))
        else:
            builder.graph.erase_node(node)
    outputs = [v.node for v in needed]
    bases, dead = extra_outputs(builder.graph, outputs)
    builder.output(outputs + bases + dead)
    op_count = builder.count_ops()
    gm = None
    if op_count or needed:
        gm = torch.fx.GraphModule(builder.attrs, builder.graph, class_name=f"GraphModule_{name}")
        builder.insert_runtime_asserts(gm)   # what the trace assumed about data-dependent values
    return GraphForGlue(gm, op_count, needed, bases, dead, live), out_index


def _compile(graph: GraphForGlue, compiler: FrameCompiler, name: str, tracer, plan, builder) -> tuple:
    """What the glue calls for the graph: the backend's compiled graph, or the graph's own
    forward where the backend would not give eager's behaviour (see the functions), and
    ``(compiled, as_is, mutations_last)``: whether it runs the graph as it is, and whether
    inputs change only after every op ran.  Which rules apply follows from what the
    backend declares (``backends/contract.py``)."""
    gm, live = graph.gm, graph.live
    backend = compiler.settings.backend
    as_is = runs_graph_as_is(backend)
    mutations_last = applies_input_mutations_last(backend)
    if not as_is and (_backward_diverges(plan, graph.needed) or _mutates_input_eagerly_only(live)
                      or _redraws(gm)):
        # one autograd node would not give eager's backward from the break after the
        # graph, AOTAutograd would not apply an in-place change of an input as eager
        # does, or its trace would draw other random numbers (see the functions): the
        # graph runs op by op, as eager does
        compiled, as_is = gm.forward, True
        gm.meta["kiln_op_by_op"] = True      # not the backend's: a loaded entry runs it so too
    else:
        own_forward = gm.forward
        compiled = _compile_graph(gm, [r for _, _, r in live], compiler, name, tracer, builder, mutations_last)
        as_is = as_is or returned_as_is(compiled, own_forward)   # gm.forward, or the eager fallback
    return compiled, as_is, mutations_last and not as_is


def _mutates_input_eagerly_only(live: list) -> bool:
    """The graph changes in place an input in a way only eager's ops get right:

    * one that shares memory with another input (``x`` and ``x.detach()`` carried over a
      break): AOTAutograd applies the change twice;
    * one whose change autograd records (an input with autograd history, changed under
      grad mode): AOTAutograd copies the new value in, so the input's ``grad_fn`` is
      ``CopyBackwards`` instead of the op's own (``ZeroBackward0``), and its one node for
      the graph keeps an edge to the input's old history even where the new value does
      not depend on it (``fill_``, ``zero_``), so a later backward runs the nodes behind
      it, which eager never reaches and an earlier backward may have freed (fuzz seeds
      83978, 84173).  Changes under ``no_grad`` (an optimizer's step on parameters,
      running statistics) are not recorded and still go to the backend."""
    mutated = mutated_inputs([n for n, _, _ in live])
    if not mutated:
        return False
    fakes = [n.meta.get("example_value") for n, _, _ in live]
    storages = [storage_key(f) for f in fakes]
    for i, (n, _, _) in enumerate(live):
        if n not in mutated:
            continue
        if storages[i] is not None and storages.count(storages[i]) > 1:
            return True
        if fakes[i].requires_grad and fakes[i].grad_fn is not None:
            return True
    return False


def _redraws(gm) -> bool:
    """AOTAutograd's trace of a random call in the graph (a composite op traced through a
    Python decomposition) draws other random numbers than eager's kernel
    (``random_draws.redrawn_by_trace``)."""
    node = redrawn_by_trace(gm)
    if node is None:
        return False
    event("op_by_op", reason=f"{node.format_node()} draws other random numbers when traced "
                             f"through AOTAutograd than eager's kernel")
    return True


def _backward_diverges(plan, needed: list) -> bool:
    """The break after the graph runs a backward from some of the graph's outputs that one
    autograd node for the graph would not give eager's result
    (``graph_outputs.partial_backward_diverges``)."""
    if plan is None or not isinstance(plan.reason, AutogradEngineCall):
        return False
    roots = [v.fake for v in collect_tensors(plan.stack_values[plan.untouched:]) if isinstance(v, TensorValue)]
    return partial_backward_diverges(roots, [v.fake for v in needed if isinstance(v, TensorValue)],
                                     raw_gradients=plan.reason.raw_gradients)


def _compile_graph(gm, example_inputs, compiler, name, tracer, builder, mutations_last):
    loc = tracer.location()[0] if tracer.current is not None else None
    # a graph with symbolic sizes is compiled as torch.compile hands one over: the example
    # inputs hold SymInts for int inputs, and the tracing context carries the fake mode, so
    # AOTAutograd and inductor see the same symbols (real tensors map to their symbolic fakes).
    # A graph holding higher-order operator bodies needs the same: torch's fake rule for
    # while_loop makes unbacked symbols, and inductor lowers map and scan to a while_loop
    # whose body reads its counter with .item(); so does a graph that computes floats from
    # tensor data (float ``item()`` in torch's optimizers): the backend's retrace needs a
    # fake mode that makes them unbacked symbols, as the capture did.  The capture is over,
    # so its fake mode may now give scalar outputs.  For a backend with on-disk caches
    # (inductor: AOTAutograd's and the FX graph cache), other graphs get a fresh fake mode
    # holding static fakes of their inputs: the caches are bypassed without a shape
    # environment ("No shape env"), and the capture's own fakes may have been changed in
    # place by the trace.  Other backends keep AOTAutograd's own fake mode.
    context = contextlib.nullcontext()
    if builder.is_dynamic or builder.attrs or builder.data_dependent:
        builder.fake_mode.allow_scalar_outputs = True
        context = tracing(TracingContext(builder.fake_mode))
    elif caches_compiled_graphs(compiler.settings.backend):
        context = tracing(TracingContext(static_fake_mode(example_inputs)))
    with context:
        # the failure policy counts its own time in metrics.backend_seconds
        out = compile_graph(gm, example_inputs, compiler.graph_backend, backend_name=compiler.settings.backend_name,
                            graph_name=name, user_location=loc,
                            inputs_change_last=mutations_last)
    if not callable(out):
        raise TypeError(f"backend {compiler.settings.backend_name!r} returned {type(out).__name__}, not a callable")
    return out


def static_fake_mode(example_inputs) -> FakeTensorMode:
    """A fake mode with a shape environment and no symbols, already holding a static fake
    of every tensor input (so backends that fake the real inputs again get these)."""
    mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv())
    # the mode's memo (real tensor -> fake) holds its fakes weakly: unless something keeps
    # them alive they are gone at once, and the backend's own faking of the real inputs
    # (AOTAutograd's) makes every size a new symbol, compiling the graph as dynamic
    mode.kiln_static_fakes = [mode.from_tensor(x, static_shapes=True)
                              for x in example_inputs if isinstance(x, torch.Tensor)]
    return mode


def _check_marked_dims(builder) -> None:
    """A dimension the user marked with ``kiln.mark_dynamic`` must stay symbolic."""
    for what, dim, where in builder.specialised_marks():
        at = f" at {where[0]}" + (f": {where[1].strip()}" if where[1] else "") if where else ""
        raise SpecializationError(
            f"dimension {dim} of {what} was marked dynamic (kiln.mark_dynamic) but the traced code made it "
            f"a constant{at}; use kiln.maybe_mark_dynamic to allow that, or remove the code that depends on "
            f"its exact value")
