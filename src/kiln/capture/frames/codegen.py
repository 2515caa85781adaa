"""Glue: the readable Python that runs a compiled frame.

The glue calls the compiled graph with the frame's tensors, rebuilds the return
value from graph outputs and sources, and replays pending Python side effects.
It is emitted as source text (printable with ``KILN_LOGS=code``).  ``Codegen.entry_code``
puts it together with the guard function and its twins (``guards.GuardCodegen``) into
one ``GeneratedCode``: the sources, the objects they refer to, which function is which
and a line map; ``GeneratedCode.load`` is the one place generated entry code is
compiled with ``exec``, into functions with the frame's own signature.
"""
from __future__ import annotations

import inspect
import itertools
import math
import types
from dataclasses import dataclass

import torch
from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP

from ...exc import Unsupported
from ...runtime import GraphCall, InputSnapshot, RngSnapshot, run_frame_as_python
from ...runtime import gradients_through_reached_outputs, named_like_eager, not_a_view, rebuild_view, view_of_detached
from .graph_outputs import mutated_inputs, output_reach, storage_key as storage
from ..basics import GuardCodegen, Namespace
from ..values import DELETED, GENERIC_SETATTRS, lookup_class_attr, slot_names, SymNodeValue, Value
from ..values import TensorValue
from ...runtime import make_guard
from .view_layout import LayoutRenderer, view_source_node

_LITERAL_TYPES = (int, str, bool, type(None), bytes)


@dataclass
class GraphForGlue:
    """What the glue needs of a frame's graph once it is built (``compile_frame``).

    ``needed``: the values the glue reads from the graph's outputs (``___o[i]``, in that
    order); ``bases`` and ``dead``: extra outputs after them (bases of views, outputs only
    so that their ops run: ``graph_outputs.extra_outputs``); ``live``: ``(placeholder,
    source, example)`` per graph input passed; ``gm``: None when there is no graph."""

    gm: object
    op_count: int
    needed: list
    bases: list
    dead: list
    live: list


@dataclass
class GeneratedCode:
    """One cache entry's functions as Python source, and all that the source refers to.

    ``names``: role (guard, explain, gather, glue) -> function name; ``line_map``: glue
    source line -> the user's code that line stands for (``file:line``: the frame for
    the graph call, the break's location for the step call); ``defaults``: the user
    function's ``(__defaults__, __kwdefaults__)``, which every generated function
    shares since they have the frame's own signature."""

    name: str
    guard_source: str
    twin_source: str          # the guard's explain and gather twins
    glue_source: str
    globals: dict
    names: dict
    line_map: dict
    defaults: tuple
    code: object = None           # the frame's code object (the guard's signature)
    guard_plan: object = None     # the guard as accelerator steps (guards.GuardCodegen.plan)
    compiled: tuple | None = None  # the sources' code objects, when loaded from disk (kiln.persistent)

    def code_objects(self) -> tuple:
        """The guards' and the glue's module code, compiled from the sources."""
        if self.compiled is not None:
            return self.compiled
        return (compile(self.guard_source + "\n" + self.twin_source, f"<kiln guards {self.name}>", "exec"),
                compile(self.glue_source, f"<kiln glue {self.name}>", "exec"))

    def load(self) -> dict:
        """The functions, by role: the one place generated entry code is executed.  The
        guard is the C accelerator's plan where it is built (``runtime.guard_plan``), else
        the generated Python function, which the plan falls back to and decides alike."""
        namespace = dict(self.globals)
        guards, glue = self.code_objects()
        exec(guards, namespace)
        exec(glue, namespace)
        functions = {role: namespace[name] for role, name in self.names.items()}
        for f in functions.values():
            f.__defaults__, f.__kwdefaults__ = self.defaults
        if self.code is not None:
            functions["guard"] = make_guard(self.guard_plan, functions["guard"], namespace, self.code, self.defaults)
        return functions


class Codegen:
    def __init__(self, state, output_nodes_index: dict):
        self.state = state
        self.ns: Namespace = state.ns
        self.lines: list[str] = []
        self._memo: dict[int, str] = {}
        self._out_index = output_nodes_index   # id(TensorValue) -> index into ___o
        self._counter = 0
        self._marks: dict[int, str] = {}       # index into lines -> user location (the line map)

    # -- the glue of an entry, in order ------------------------------------------------------
    def mark(self, location: str | None) -> None:
        """The next line stands for the user's code at ``location`` (``GeneratedCode.line_map``)."""
        if location:
            self._marks[len(self.lines)] = location

    def graph_call(self, graph: GraphForGlue, compiled, handoff: list, *, mutations_last: bool, as_is: bool,
                   code, random: bool) -> None:
        """Call the compiled graph with its inputs (handed over by the guard where it read
        them) and fix its outputs up so that they behave as eager's.  ``mutations_last``:
        the backend changes inputs only after every op ran (nothing to watch if it raises);
        ``as_is``: it runs the graph as it is (not one autograd node); ``random``: the graph
        draws random numbers (the generator is put back before a re-run as Python)."""
        live = graph.live
        graph_ref = self.ref(compiled)
        input_expr = {s: f"___pre[{handoff.index(s)}]" if s in handoff else self.source_expr(s) for _, s, _ in live}
        inputs = ", ".join(input_expr[s] for _, s, _ in live)
        if handoff and handoff == [s for _, s, _ in live]:
            inputs = "*___pre"      # every input was handed over, in order
        assign = "___o = " if graph.needed or graph.bases or graph.dead else ""
        mutated = set() if mutations_last else mutated_inputs([n for n, _, _ in live])
        self.mark(f"{code.co_filename}:{code.co_firstlineno}")
        if mutated is None:             # an input without a version counter may change
            self.lines.append(f"{assign}{graph_ref}({inputs})")     # (a GraphCall re-runs the graph alone)
        else:
            watched = [input_expr[s] for n, s, _ in live if n in mutated]
            # a GraphCall's first call falls back through it, which also watches every input
            run, handler = (f"{graph_ref}.run", f"{graph_ref}.failed") if isinstance(compiled, GraphCall) else \
                (graph_ref, self.ref(run_frame_as_python))
            self._guarded_graph_call(f"{assign}{run}({inputs})", handler, code, self.state._initial_grad_mode,
                                     random, watched, snapshot=not self.state.side_effects.is_empty())
        self._output_fixups(graph, inputs, one_node=not as_is)

    def _guarded_graph_call(self, call: str, handler: str, code, grad_mode: bool, random: bool, watched: list,
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
            self.lines.append(f"___rng = {self.ref(RngSnapshot)}()")
        versions = "(" + "".join(f"{w}._version, " for w in watched) + ")"
        if watched:
            self.lines.append(f"___versions = {versions}")
            if snapshot:
                self.lines.append(f"___inputs = {self.ref(InputSnapshot)}({', '.join(watched)})")
        self.lines += ["try:", f"    {call}", "except Exception as ___graph_error:"]
        if watched:
            restored = " and not ___inputs.restore()" if snapshot else ""
            self.lines += [f"    if {versions} != ___versions{restored}:",
                           "        raise    # an input was already changed in place: not re-run"]
        self.lines += ["    # the graph raised: the frame runs as Python, with eager's side effects and error",
                       f"    return {handler}(___graph_error, {grad_mode}, "
                       f"{'___rng' if random else 'None'}, lambda: ___fn({render_call_args(code)}))"]

    def _output_fixups(self, graph: GraphForGlue, inputs: str, one_node: bool):
        """The glue after the graph call: outputs behave as eager's (``runtime.outputs``).
        ``one_node``: the backend may make the graph one autograd node (it is not known to
        run the graph as it is)."""
        needed, live = graph.needed, graph.live
        fakes = [v.fake if isinstance(v, TensorValue) else None for v in needed] + \
            [n.meta["example_value"] for n in graph.bases]
        if graph.dead:       # outputs only so that their ops run: freed now, as eager frees them
            self.lines.append(f"___o = ___o[:{len(fakes)}]")
        nodes = [v.node if isinstance(v, TensorValue) else None for v in needed] + list(graph.bases)
        input_fakes = [n.meta.get("example_value") for n, _, _ in live]
        listed = self.realias_outputs(fakes, self.non_view_outputs(fakes, input_fakes))
        listed = self.views_of_input_aliases(fakes, nodes, live, listed)
        reach = output_reach(fakes[:len(needed)], input_fakes)
        if one_node and reach is not None:
            self.lines.append(f"{self.ref(gradients_through_reached_outputs)}(___o, ({inputs}{',' if live else ''}), "
                              f"{self.ref(reach)})")
        self.name_grad_fns_like_eager(fakes, len(needed), input_fakes, listed)

    def return_value(self, result: Value) -> None:
        """The end of a frame that returns: its value, then the side effects, then return."""
        self.lines.append(f"___ret = {self.expr(result)}")
        self.side_effect_lines()
        self.lines.append("return ___ret")

    def entry_code(self, name: str, fn, handoff: list, dynamic: bool) -> GeneratedCode:
        """The glue written so far (ending in a return) with the guard function and its twins,
        as one ``GeneratedCode`` for entry ``name`` of ``fn``.  ``handoff``: what the guard
        hands the glue (``handoff_sources``); ``dynamic``: the guards may call sympy's
        functions (symbolic sizes)."""
        code = fn.__code__
        params = render_params(code)
        glue_source = f"def ___glue_{name}(___pre, {params}):\n" + "".join(f"    {l}\n" for l in self.lines)
        guard_gen = GuardCodegen(self.state.guards, params)
        guard_source = guard_gen.source(f"___guard_{name}", handoff)
        twin_source = (guard_gen.explain_source(f"___explain_{name}") + "\n"
                       + guard_gen.gather_source(f"___gather_{name}", handoff))
        namespace = dict(self.ns.values)
        if dynamic:
            namespace.update(SYMPY_INTERP)   # names the rendered shape guards may call
        names = {role: f"___{role}_{name}" for role in ("guard", "explain", "glue", "gather")}
        line_map = {index + 2: where for index, where in self._marks.items()}   # line 1 is the def
        return GeneratedCode(name, guard_source, twin_source, glue_source, namespace, names, line_map,
                             (fn.__defaults__, fn.__kwdefaults__), code, guard_gen.plan(code, handoff))

    # -- expressions ---------------------------------------------------------------------
    def ref(self, obj) -> str:
        return self.ns.ref(obj)

    def prefers_rebuild(self, value) -> bool:
        """Immutable values that came in from outside are passed through by source."""
        return False

    def source_expr(self, source) -> str:
        return source.expr(self.ns)

    def constant_expr(self, value) -> str:
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)) or \
                isinstance(value, tuple) and any(isinstance(v, (torch.SymInt, torch.SymFloat)) for v in value):
            raise Unsupported(f"internal: a symbolic size ({value}) would be baked into the glue as a constant")
        if type(value) in _LITERAL_TYPES:
            return repr(value)
        if type(value) is float and math.isfinite(value):
            return repr(value)
        if type(value) is tuple and all(type(v) in _LITERAL_TYPES for v in value):
            return repr(value)
        return self.ref(value)

    def expr(self, value: Value) -> str:
        key = id(value)
        if key in self._memo:
            return self._memo[key]
        text = value.reconstruct(self)
        return text

    def tensor_expr(self, v) -> str:
        """A TensorValue or SymNodeValue: its source if it is a graph input, else its output."""
        if v.node.op == "placeholder":
            return self.source_expr(v.source)
        idx = self._out_index.get(id(v))
        if idx is None:
            raise Unsupported(f"internal: tensor {v.describe()} is not a graph output")
        return f"___o[{idx}]"

    def _temp(self) -> str:
        name = f"___n{self._counter}"
        self._counter += 1
        return name

    def new_object(self, value: Value, text: str) -> str:
        key = id(value)
        if key in self._memo:
            return self._memo[key]
        name = self._temp()
        self._memo[key] = name
        self.lines.append(f"{name} = {text}")
        return name

    def new_user_object(self, obj) -> str:
        key = id(obj)
        if key in self._memo:
            return self._memo[key]
        name = self._temp()
        self._memo[key] = name
        cls = self.ref(obj.cls)
        self.lines.append(f"{name} = {cls}.__new__({cls})")
        if obj.attrs and not set(obj.attrs) & slot_names(obj.cls):
            items = ", ".join(f"{k!r}: {self.expr(v)}" for k, v in obj.attrs.items())
            self.lines.append(f"{name}.__dict__.update({{{items}}})")
        else:   # some attributes live in __slots__: stored one by one, as object stores them
            for k, v in obj.attrs.items():
                self.lines.append(f"{self.ref(object.__setattr__)}({name}, {k!r}, {self.expr(v)})")
        return name

    def replayed_object(self, v) -> str:
        key = id(v)
        if key in self._memo:
            return self._memo[key]
        parts = [self.expr(a) for a in v.args] + [f"{k}={self.expr(x)}" for k, x in v.kwargs.items()]
        text = f"{self.ref(v.cls)}({', '.join(parts)})"
        name = self._temp()
        self._memo[key] = name
        self.lines.append(f"{name} = {text}")
        for kind, key, value in v.writes:
            target = f"{self.ref(setattr)}({name}, {key!r}, " if kind == "attr" else f"{name}.__setitem__({key!r}, "
            self.lines.append(f"{target}{self.expr(value)})")
        return name

    def cell(self, cell) -> str:
        """A real cell for a symbolic one (made once per glue call, shared by all users)."""
        if cell is None:
            return f"{self.ref(types.CellType)}()"
        key = id(cell)
        if key in self._memo:
            return self._memo[key]
        if cell.real_cell is not None:
            if cell.source is None:
                raise Unsupported("a closure cell Kiln cannot locate at run time")
            text = self.source_expr(cell.source).rsplit(".cell_contents", 1)[0]
            self._memo[key] = text
            return text
        name = self._temp()
        self._memo[key] = name
        # made empty first: its contents may need the cell itself (a recursive inner function)
        self.lines.append(f"{name} = {self.ref(types.CellType)}()")
        if cell.value is not None:
            value = self.expr(cell.value)
            self.lines.append(f"{name}.cell_contents = {value}")
        return name

    def nested_function(self, v) -> str:
        """A function made in the frame that outlives it: rebuilt with the same cells."""
        key = id(v)
        if key in self._memo:
            return self._memo[key]
        closure = "(" + "".join(f"{self.cell(c)}, " for c in v.closure) + ")" if v.closure else "None"
        defaults = "(" + "".join(f"{self.expr(d)}, " for d in v.defaults) + ")" if v.defaults else "None"
        name = self._temp()
        self._memo[key] = name
        self.lines.append(f"{name} = {self.ref(types.FunctionType)}({self.ref(v.code)}, {self.ref(v.fn_globals)}, "
                          f"{v.code.co_name!r}, {defaults}, {closure})")
        if v.kwdefaults:
            items = ", ".join(f"{k!r}: {self.expr(x)}" for k, x in v.kwdefaults.items())
            self.lines.append(f"{name}.__kwdefaults__ = {{{items}}}")
        self.lines.append(f"{name}.__qualname__ = {v.qualname!r}")
        for attr, value in (v.special or {}).items():     # what the frame set on it, in order
            self.lines.append(f"{name}.{attr} = {self.expr(value)}")
        if v.attr_dict is not None and v.attr_dict.items:
            self.lines.append(f"{name}.__dict__.update({self.expr(v.attr_dict)})")
        return name

    def realias_outputs(self, fakes: list, listed: bool = False):
        """Outputs that are views of another output in the trace are views of it after the
        call too.  ``fakes``: the traced tensor of each graph output (None for other
        values).  A backend that returns such a view as a copy (a functionalized inference
        graph) gets it rebuilt from the base with the traced size/stride/offset relative to
        the base (symbolic sizes rendered over the inputs: ``view_layout``); the check is
        one ``_base`` comparison per such output, emitted only where the trace has one.
        Where the layout cannot be rendered, ``runtime.outputs.rebuild_view`` keeps what
        the backend returned unless it lies in the base's memory."""
        # the owner of a storage: an output that is not a view (dtype reinterpretations,
        # ``x.view(torch.int32)``, are not views to autograd but share the storage)
        owners = {}
        fakes = [f if isinstance(f, torch.Tensor) else None for f in fakes]
        for i, fake in enumerate(fakes):
            key = storage(fake)
            if key is not None and not fake._is_view() and key not in owners:
                owners[key] = i
        fixes = []
        for i, fake in enumerate(fakes):
            if fake is None:
                continue
            j = owners.get(storage(fake))
            if j is None or j == i:
                continue
            base = fakes[j]
            if base.element_size() != fake.element_size():
                continue
            cast = "" if base.dtype == fake.dtype else f".view({self.ref(fake.dtype)})"
            if not fake._is_view():
                # a dtype reinterpretation of the whole base (not a view to autograd)
                layout = (tuple(fake.shape), fake.stride(), fake.storage_offset())
                if not cast or layout != (tuple(base.shape), base.stride(), base.storage_offset()):
                    continue
                cond, text = (f"___o[{i}].untyped_storage().data_ptr() != ___o[{j}].untyped_storage().data_ptr()",
                              f"___o[{j}]{cast}")
            elif fake._base is not base:
                # a view of something else that shares the storage (an input, whose
                # detach() is the other output): rebuilding it from that output would
                # lose its autograd history
                continue
            else:
                # also when the storage is shared but the result is no autograd view (inductor);
                # eager's layout relative to the base (``view_layout``), else what came back
                layout = self.layouts().layout(fake, base, f"___o[{j}]")
                cond = f"___o[{i}]._base is not ___o[{j}]"
                text = f"{self.ref(rebuild_view)}(___o[{i}], ___o[{j}]{cast}{', ' + layout if layout else ''})"
            fixes.append((cond, i, text))
        if fixes and not listed:
            self.lines.append("___o = list(___o)")
        for cond, i, text in fixes:
            self.lines.append(f"if {cond}: ___o[{i}] = {text}")
        return listed or bool(fixes)

    def non_view_outputs(self, fakes: list, input_fakes: list) -> bool:
        """Outputs that eager computes as new tensors (not views, not on an input's memory)
        are not views after the call either (``runtime.outputs.not_a_view``); views of them
        are then rebuilt on them by ``realias_outputs``.  Returns whether ``___o`` is a list."""
        inputs = {storage(f) for f in input_fakes if isinstance(f, torch.Tensor)}
        fixes = [i for i, f in enumerate(fakes) if isinstance(f, torch.Tensor) and not f._is_view()
                 and storage(f) is not None and storage(f) not in inputs]
        if fixes:
            self.lines.append("___o = list(___o)")
        for i in fixes:
            self.lines.append(f"if ___o[{i}]._is_view(): ___o[{i}] = {self.ref(not_a_view)}(___o[{i}])")
        return bool(fixes)

    def views_of_input_aliases(self, fakes: list, nodes: list, live: list, listed: bool) -> bool:
        """An output that is a view of a detached alias of an input (``x.data[1:]``,
        ``x.detach()[0]``), or a view of an input that is itself a view, is such a view
        after the call too: AOTAutograd returns it on the input's memory but not as a
        view, a backend that copies outputs as a copy (``runtime.outputs.view_of_detached``).
        It is rebuilt on the input it views in the trace (``view_layout.view_source_node``)
        with the traced layout relative to that input.  Returns whether ``___o`` is a list."""
        inputs, by_node = {}, {}
        for n, s, _ in live:
            f = n.meta.get("example_value")
            if isinstance(f, torch.Tensor):
                inputs.setdefault(storage(f), (f, self.source_expr(s)))
                by_node[n] = (f, self.source_expr(s))
        for i, fake in enumerate(fakes):
            if not isinstance(fake, torch.Tensor) or not fake._is_view():
                continue
            base, source = fake._base, inputs.get(storage(fake))
            if source is None or base is source[0] or base.requires_grad or base.dtype != source[0].dtype:
                continue
            found = view_source_node(nodes[i], set(by_node)) if nodes[i] is not None else None
            layout = None
            if found is not None:
                source = by_node[found]
                layout = self.layouts().layout(fake, source[0], source[1])
            if not listed:
                self.lines.append("___o = list(___o)")
                listed = True
            self.lines.append(f"if not ___o[{i}]._is_view(): ___o[{i}] = "
                              f"{self.ref(view_of_detached)}({source[1]}, ___o[{i}]{', ' + layout if layout else ''})")
        return listed

    def layouts(self) -> LayoutRenderer:
        return LayoutRenderer(self.state.builder, self.source_expr)

    def name_grad_fns_like_eager(self, fakes: list, used: int, input_fakes: list, listed: bool):
        """Each of the first ``used`` outputs that the graph computes fresh (not a view, not
        on an input's memory, not the base of a view output) shows eager's ``grad_fn`` name
        (``runtime.outputs.named_like_eager``).  ``listed``: ``___o`` is a list already."""
        # a base of a view output must stay the object the view hangs from
        bases = {id(f._base) for f in fakes if isinstance(f, torch.Tensor) and f._is_view()}
        inputs = {storage(f) for f in input_fakes if isinstance(f, torch.Tensor)}
        for i, fake in enumerate(fakes[:used]):
            if not isinstance(fake, torch.Tensor) or fake.grad_fn is None or fake._is_view():
                continue
            key = storage(fake)
            if key is None or key in inputs or id(fake) in bases:
                continue
            if not listed:
                self.lines.append("___o = list(___o)")
                listed = True
            name = type(fake.grad_fn).__name__
            self.lines.append(f"___o[{i}] = {self.ref(named_like_eager)}(___o[{i}], {name!r})")

    # -- side effects --------------------------------------------------------------------------
    def side_effect_lines(self):
        """Replay Python side effects: every value is evaluated first (against the state
        the frame started from, which is what the traced values describe), then all the
        writes happen, in order."""
        se = self.state.side_effects
        writes: list[str] = []

        def hold(text: str) -> str:
            if text.isidentifier() or text.replace("_", "").isalnum():
                return text
            t = self._temp()
            self.lines.append(f"{t} = {text}")
            return t

        for container in se.mutated_containers.values():
            target = hold(self.source_expr(container.source))
            consumed = getattr(container, "consumed", None)
            if consumed is not None:
                # an iterator from outside the frame: advanced by the items the trace took
                if consumed:
                    writes.append(f"next({self.ref(itertools.islice)}({target}, {consumed}, {consumed}), None)")
                continue
            if hasattr(container, "replay_writes"):
                writes += container.replay_writes(self, target, hold)
                continue
            contents = hold(container.rebuild_contents(self))
            if hasattr(container, "write_back"):
                writes += container.write_back(target, contents)
            elif isinstance(container.items, list):
                writes.append(f"{target}[:] = {contents}")
            else:
                writes += [f"{target}.clear()", f"{target}.update({contents})"]
        for obj_value, name, value in se.replayed_attr_writes():
            target = hold(self.expr(obj_value))
            if value is DELETED:
                writes.append(f"del {target}.{name}")
            elif _traced_setattr(obj_value):
                # the class's own __setattr__ already ran in the trace: store like object does
                writes.append(f"{self.ref(object.__setattr__)}({target}, {name!r}, {hold(self.expr(value))})")
            else:
                writes.append(f"{target}.{name} = {hold(self.expr(value))}")
        for gdict, name, value in se.global_writes.values():
            # the module's dict, however the trace wrote it (STORE_GLOBAL or mod.name = v)
            writes.append(f"{self.ns.ref(gdict, '___g')}[{name!r}] = {hold(self.expr(value))}")
        for cell, value in se.cell_writes.values():
            if cell.source is None:
                raise Unsupported("writing a closure variable of a function Kiln cannot locate")
            target = hold(self.source_expr(cell.source).rsplit(".cell_contents", 1)[0])
            writes.append(f"{target}.cell_contents = {hold(self.expr(value))}")
        for fn, args in se.calls:
            writes.append(f"{hold(self.expr(fn))}({', '.join(hold(self.expr(a)) for a in args)})")
        self.lines.extend(writes)


def handoff_sources(live: list, guards) -> list:
    """Graph inputs whose values the guard function reads anyway (every tensor input has
    a tensor guard): the guard returns them and the glue passes them on, instead of
    walking each ``self._modules[...]._parameters[...]`` chain a second time per call."""
    guarded = guards.sources()
    return list(dict.fromkeys(s for _, s, _ in live if s in guarded))


def _traced_setattr(obj_value) -> bool:
    """An object (not an nn.Module) whose class defines ``__setattr__``: it was traced."""
    obj = getattr(obj_value, "obj", None)
    if obj is None or isinstance(obj, torch.nn.Module):
        return False
    return lookup_class_attr(type(obj), "__setattr__")[1] not in GENERIC_SETATTRS


def collect_tensors(values: list) -> list:
    """Every non-placeholder value the graph computes (tensors, symbolic sizes) reachable
    from ``values`` (first-seen order): the graph's outputs."""
    seen: set[int] = set()
    out: list = []
    stack = list(reversed(values))
    visited: set[int] = set()
    while stack:
        v = stack.pop()
        if v is None or id(v) in visited:
            continue
        visited.add(id(v))
        if isinstance(v, (TensorValue, SymNodeValue)):
            if v.node.op != "placeholder" and id(v) not in seen:
                seen.add(id(v))
                out.append(v)
            continue
        stack.extend(reversed(v.contents()))
    return out


def render_call_args(code) -> str:
    """The arguments of a call that passes ``code``'s parameters on as they were bound
    (``a, b, *args, k=k, **kwargs``)."""
    names = code.co_varnames
    nargs, nkwonly = code.co_argcount, code.co_kwonlyargcount
    parts = list(names[:nargs])
    idx = nargs + nkwonly
    if code.co_flags & inspect.CO_VARARGS:
        parts.append("*" + names[idx])
        idx += 1
    parts += [f"{n}={n}" for n in names[nargs:nargs + nkwonly]]
    if code.co_flags & inspect.CO_VARKEYWORDS:
        parts.append("**" + names[idx])
    return ", ".join(parts)


def render_params(code, with_fn: bool = True) -> str:
    """The parameter list of ``code`` as source text (defaults are attached separately)."""
    names = code.co_varnames
    nargs, nposonly, nkwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    parts = ["___fn"] if with_fn else []
    for i in range(nargs):
        parts.append(names[i])
        if nposonly and i == nposonly - 1:
            parts.append("/")
    idx = nargs + nkwonly
    if code.co_flags & inspect.CO_VARARGS:
        parts.append("*" + names[idx])
        idx += 1
    elif nkwonly:
        parts.append("*")
    parts.extend(names[nargs:nargs + nkwonly])
    if code.co_flags & inspect.CO_VARKEYWORDS:
        parts.append("**" + names[idx])
    return ", ".join(parts)


_ = torch
