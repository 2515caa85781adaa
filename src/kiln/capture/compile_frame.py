"""Capture one frame: trace it, hand the graph to the backend, and build the cache
entry (guard function + glue function) from generated source."""
from __future__ import annotations

import contextlib
import inspect
import linecache
import time
from dataclasses import dataclass, field

import torch
from torch._guards import TracingContext, tracing
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP, ShapeEnv

from .. import trace
from ..backends.contract import applies_input_mutations_last, caches_compiled_graphs, returned_as_is, runs_graph_as_is
from ..backends.policy import compile_graph
from ..backends.random_draws import draws_random_numbers, redrawn_by_trace
from ..config import config
from ..exc import ArgumentError, AutogradEngineCall, SpecializationError, Unsupported
from ..metrics import BreakRecord, metrics
from ..runtime.fallback import GraphCall, InputSnapshot, RngSnapshot, run_frame_as_python
from ..runtime.outputs import gradients_through_reached_outputs
from .codegen import Codegen, collect_tensors, render_call_args, render_params
from .dynamism import ShapePolicy
from .guards import GuardCodegen
from .graph_break import BreakPlan, FrameCompiler
from .graph_outputs import extra_outputs, mutated_inputs, output_reach, partial_backward_diverges, storage_key
from .interpreter import BreakHere, Tracer
from .resume import note_probed
from .sources import ClosureSource, FnSource, LocalSource
from .state import CaptureState
from .values.base import TracedException
from .values.builder import wrap
from .values.contexts import GradModeValue
from .values.tensor import TensorValue

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


def capture(fn, args, kwargs, compiler: FrameCompiler, fullgraph: bool, shapes: ShapePolicy | None = None) -> Entry:
    """Trace ``fn(*args, **kwargs)`` symbolically and build a cache entry for it.

    If tracing hits something unsupported (and fullgraph is off), the trace is run
    again from the start with a graph break planned before the root-frame instruction
    that was executing; tracing is deterministic, so the second run reaches it with
    clean state.
    """
    t0 = time.perf_counter()
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
        entry = _finish(state, fn, final_grad, compiler, tracer, result=outcome[1])
    else:
        plan = BreakPlan(tracer, outcome[1], reason, compiler)
        # a break inside a callee that is compiled as its own frame is recorded there,
        # where it happens; here it would be the same break counted once per caller
        counted = RECORD_NESTED_BREAKS or reason.depth == 0 or not plan.callee_compiled
        if counted:
            metrics.breaks.append(BreakRecord(reason.reason, reason.location, reason.source_line))
        trace.graph_break(reason, counted)
        entry = _finish(state, fn, final_grad, compiler, tracer, plan=plan)
    metrics.capture_seconds += time.perf_counter() - t0
    return entry


def _new_trace(fn, real_locals, break_at, shapes, compiler):
    code = fn.__code__
    state = CaptureState(fn, shapes)
    state.real_locals = real_locals
    # a backend that does not declare it runs graphs as they are may functionalize them
    # (backends/contract.py): the rules for AOTAutograd's graphs apply
    state.functional_backend = not runs_graph_as_is(compiler.backend)
    # defaults are bound from this function object; another one with the same code may differ
    for attr in ("__defaults__", "__kwdefaults__"):
        if getattr(fn, attr):
            state.guards.add("id", FnSource(), f"{{v}}.{attr} is {state.ns.ref(getattr(fn, attr))}",
                             f"the function's {attr} are the same objects")
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


def _finish(state, fn, final_grad, compiler, tracer, result=None, plan=None) -> Entry:
    code = fn.__code__
    builder = state.builder
    _check_marked_dims(builder)
    for sources, check, description in builder.shape_guards():
        state.guards.shape(sources, check, description)
    outgoing = [result] if plan is None else plan.values()
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
    extra = bases + dead
    builder.output(outputs + extra)
    entry_id = next(_ENTRY_IDS)
    # a valid identifier even for <lambda>, <genexpr> and other non-identifier code names
    name = f"{''.join(c if c.isalnum() else '_' for c in code.co_name)}_{entry_id}"
    cg = Codegen(state, out_index)
    gm = None
    handoff = []
    op_count = builder.count_ops()
    if op_count or needed:
        gm = torch.fx.GraphModule(builder.attrs, builder.graph, class_name=f"GraphModule_{name}")
        builder.insert_runtime_asserts(gm)   # what the trace assumed about data-dependent values
        # which rules apply follows from what the backend declares (backends/contract.py)
        as_is = runs_graph_as_is(compiler.backend)
        mutations_last = applies_input_mutations_last(compiler.backend)
        if not as_is and (_backward_diverges(plan, needed) or _mutates_input_eagerly_only(live)
                       or _redraws(gm)):
            # one autograd node would not give eager's backward from the break after the
            # graph, AOTAutograd would not apply an in-place change of an input as eager
            # does, or its trace would draw other random numbers (see the functions): the
            # graph runs op by op, as eager does
            compiled, as_is = gm.forward, True
        else:
            own_forward = gm.forward
            compiled = _compile_graph(gm, [r for _, _, r in live], compiler, name, tracer, builder, mutations_last)
            as_is = as_is or returned_as_is(compiled, own_forward)   # gm.forward, or the eager fallback
        mutations_last = mutations_last and not as_is
        graph_ref = cg.ref(compiled)
        handoff = _handoff(live, state.guards)
        input_expr = {s: f"___pre[{handoff.index(s)}]" if s in handoff else cg.source_expr(s) for _, s, _ in live}
        inputs = ", ".join(input_expr[s] for _, s, _ in live)
        if handoff and handoff == [s for _, s, _ in live]:
            inputs = "*___pre"      # every input was handed over, in order
        assign = "___o = " if needed or extra else ""
        mutated = set() if mutations_last else mutated_inputs([n for n, _, _ in live])
        if mutated is None:             # an input without a version counter may change
            cg.lines.append(f"{assign}{graph_ref}({inputs})")     # (a GraphCall re-runs the graph alone)
        else:
            watched = [input_expr[s] for n, s, _ in live if n in mutated]
            # a GraphCall's first call falls back through it, which also watches every input
            run, handler = (f"{graph_ref}.run", f"{graph_ref}.failed") if isinstance(compiled, GraphCall) else \
                (graph_ref, cg.ref(run_frame_as_python))
            _guarded_graph_call(cg, f"{assign}{run}({inputs})", handler, code, state._initial_grad_mode,
                                draws_random_numbers(gm), watched, snapshot=not state.side_effects.is_empty())
        _output_lines(cg, needed, bases, dead, live, inputs, one_node=not as_is)
        metrics.graphs += 1
        metrics.ops += op_count
    if plan is not None and tracer.context_stack:
        # with-blocks that span the break are entered again by the glue (see WithExit);
        # outside them the mode is what it was before the outermost one was entered
        final_grad = next((c.prior for c in tracer.context_stack if isinstance(c, GradModeValue)), final_grad)
    if final_grad != state._initial_grad_mode:
        cg.lines.append(f"{cg.ref(torch._C._set_grad_enabled)}({final_grad})")
    if plan is None:
        cg.lines.append(f"___ret = {cg.expr(result)}")
        cg.side_effect_lines()
        tail = ["return ___ret"]
    else:
        args = [cg.expr(v) for v in plan.values()]
        cg.lines.append(f"___args = ({''.join(a + ', ' for a in args)})")
        cg.side_effect_lines()
        args = ["*___args"]
        step = cg.ref(plan.step_factory(fn))
        closure = "___fn.__closure__"
        if plan.cells:
            cells = ", ".join(cg.cell(c) for c in plan.cells)
            closure = f"(___fn.__closure__ or ()) + ({cells},)"
        where = plan.reason.location or "?"
        reason = " ".join(plan.reason.reason.split())   # one comment line, whatever the message holds
        tail = [f"# graph break at {where}: {reason}",
                f"# {plan.ins.opname} runs as Python, then the frame resumes compiled",
                f"return {step}({closure})({', '.join(args)})"]
    params = render_params(code)
    body = cg.lines + tail
    glue_source = f"def ___glue_{name}(___pre, {params}):\n" + "".join(f"    {l}\n" for l in body)
    guard_gen = GuardCodegen(state.guards, params)
    guard_source = guard_gen.source(f"___guard_{name}", handoff)
    explain_source = (guard_gen.explain_source(f"___explain_{name}") + "\n"
                      + guard_gen.gather_source(f"___gather_{name}", handoff))
    namespace = dict(state.ns.values)
    if builder.is_dynamic:
        namespace.update(SYMPY_INTERP)   # names the rendered shape guards may call
    exec(compile(guard_source + "\n" + explain_source, f"<kiln guards {name}>", "exec"), namespace)
    exec(compile(glue_source, f"<kiln glue {name}>", "exec"), namespace)
    fns = [namespace[f"___guard_{name}"], namespace[f"___explain_{name}"], namespace[f"___glue_{name}"],
           namespace[f"___gather_{name}"]]
    for f in fns:
        f.__defaults__ = fn.__defaults__
        f.__kwdefaults__ = fn.__kwdefaults__
    _log(name, gm, guard_source, glue_source)
    if gm is not None:
        trace.graph(name, gm, lambda: [(cg.source_expr(s), r) for _, s, r in live], op_count)
    trace.entry(name, guard_source, glue_source, len(state.guards))
    metrics.frames_captured += 1
    return Entry(fns[0], fns[1], fns[2], guard_source, glue_source, gm, op_count, name, len(state.guards),
                 {"break": plan}, fns[3])


def _handoff(live, guards) -> list:
    """Graph inputs whose values the guard function reads anyway (every tensor input has
    a tensor guard): the guard returns them and the glue passes them on, instead of
    walking each ``self._modules[...]._parameters[...]`` chain a second time per call."""
    guarded = guards.sources()
    return list(dict.fromkeys(s for _, s, _ in live if s in guarded))


def _guarded_graph_call(cg, call: str, handler: str, code, grad_mode: bool, random: bool, watched: list,
                        snapshot: bool):
    """The graph call inside ``try``: if the graph raises, ``handler`` runs the frame as
    Python from its start (``runtime.fallback``), so eager's side effects before the
    failing op happen.
    ``watched``: inputs the graph changes in place as it runs (a backend that runs it op by
    op); their versions are read before the call, and if one moved before the error the
    frame cannot be re-run (the change would apply twice): they are put back from copies
    when ``snapshot`` (the frame has Python side effects the error would otherwise lose)
    and they do not require grad; else the error is raised."""
    if random:
        cg.lines.append(f"___rng = {cg.ref(RngSnapshot)}()")
    versions = "(" + "".join(f"{w}._version, " for w in watched) + ")"
    if watched:
        cg.lines.append(f"___versions = {versions}")
        if snapshot:
            cg.lines.append(f"___inputs = {cg.ref(InputSnapshot)}({', '.join(watched)})")
    cg.lines += ["try:", f"    {call}", "except Exception as ___graph_error:"]
    if watched:
        restored = " and not ___inputs.restore()" if snapshot else ""
        cg.lines += [f"    if {versions} != ___versions{restored}:",
                     "        raise    # an input was already changed in place: not re-run"]
    cg.lines += ["    # the graph raised: the frame runs as Python, with eager's side effects and error",
                 f"    return {handler}(___graph_error, {grad_mode}, "
                 f"{'___rng' if random else 'None'}, lambda: ___fn({render_call_args(code)}))"]


def _output_lines(cg, needed: list, bases: list, dead: list, live: list, inputs: str, one_node: bool):
    """The glue after the graph call: outputs behave as eager's (``runtime.outputs``).
    ``one_node``: the backend may make the graph one autograd node (it is not known to
    run the graph as it is)."""
    fakes = [v.fake if isinstance(v, TensorValue) else None for v in needed] + \
        [n.meta["example_value"] for n in bases]
    if dead:       # outputs only so that their ops run: freed now, as eager frees them
        cg.lines.append(f"___o = ___o[:{len(fakes)}]")
    input_fakes = [n.meta.get("example_value") for n, _, _ in live]
    listed = cg.realias_outputs(fakes, cg.non_view_outputs(fakes, input_fakes))
    listed = cg.views_of_input_aliases(fakes, input_fakes, [cg.source_expr(s) for _, s, _ in live], listed)
    reach = output_reach(fakes[:len(needed)], input_fakes)
    if one_node and reach is not None:
        cg.lines.append(f"{cg.ref(gradients_through_reached_outputs)}(___o, ({inputs}{',' if live else ''}), "
                        f"{cg.ref(reach)})")
    cg.name_grad_fns_like_eager(fakes, len(needed), input_fakes, listed)


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
    trace.emit("op_by_op", reason=f"{node.format_node()} draws other random numbers when traced "
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
    elif caches_compiled_graphs(compiler.backend):
        context = tracing(TracingContext(static_fake_mode(example_inputs)))
    with context:
        # the failure policy counts its own time in metrics.backend_seconds
        out = compile_graph(gm, example_inputs, compiler.graph_backend, backend_name=compiler.backend_name,
                            graph_name=name, user_location=loc,
                            inputs_change_last=mutations_last)
    if not callable(out):
        raise TypeError(f"backend {compiler.backend_name!r} returned {type(out).__name__}, not a callable")
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


def _log(name, gm, guard_source, glue_source):
    if config.log_enabled("graph") and gm is not None:
        print(f"[kiln] graph {name}:\n{gm.code}")
        for sub_name, sub in gm.named_modules():   # bodies of higher-order operators, nested
            if sub_name and hasattr(sub, "code"):
                print(f"[kiln] graph {name}.{sub_name}:\n{sub.code}")
    if config.log_enabled("guards"):
        print(f"[kiln] guards {name}:\n{guard_source}")
    if config.log_enabled("code"):
        print(f"[kiln] glue {name}:\n{glue_source}")
