"""Repeated layers traced once: one body per distinct layer, called once per layer.

A deep model calls the same module class again and again (the decoder layers of an
``nn.ModuleList``, the blocks of an ``nn.Sequential``).  Inlining traces every layer
again and gives backends one long graph in which the same ops repeat.  Here the first
layer of a kind is traced as a body in its own fx graph (``trace_subgraph``, a nested
scope in which outer state is read-only), and each layer, the first included, becomes
one ``call_body(body, identifier, *operands)`` node of the frame's graph
(``backends/body_calls.py``; AOTAutograd backends see torch's ``invoke_subgraph``).

Which calls: a module whose class is not one of ``torch.nn``'s own, read from an
``nn.ModuleList`` / ``nn.Sequential`` / ``nn.ModuleDict`` that holds two or more modules
of exactly that class, called with plain data (tensors, constants, tuples/lists/dicts
of them), outside any other body, with no Python-level write pending in the capture.

Why the body is right for another layer:

* its tensor inputs: the call's tensors are explicit arguments; every tensor the body
  read from outside it (parameters, buffers, globals) is a graph input with a source.
  One under the first layer's source is read again under the other layer's (the same
  path below it), the rest are read again as they are; each must have the metadata the
  body was traced with, and the same aliasing among them;
* everything else it read: every guard asked for while the body was traced (the guard
  set records them, ``GuardSet.recording``) is kept relative to the layer; one generated
  function checks them all on the other layer (its class, submodule tree, hook dicts,
  the non-tensor attributes the body read: a ``layer_idx`` the body never reads does
  not matter, one it reads must be equal), and the layer's copies join the frame's guards;
* what it did: a body that writes outer state, breaks the graph, draws random numbers,
  switches grad mode or returns anything but tensors (or one aliasing an input) is not
  kept: that layer and the later ones like it are inlined, as without this rule.

``kiln.config.reuse_layer_bodies`` turns it off (every layer inlined).
"""
from __future__ import annotations

import dataclasses

import torch
import torch.fx

from ...backends import call_body
from ...config import config
from ...exc import Unsupported
from ...runtime import autocast_state
from ..basics import AttrSource, ConstSource, GuardCodegen, GuardSet, ItemSource, LocalSource, has_unbacked
from ..values import ConstantValue, DictValue, ListValue, ModuleValue, TensorValue, TracedException, TupleValue, Value
from .subgraph import lower, outer_outputs

#: the layer's own source inside a body's relative guards and paths
LAYER = LocalSource("___layer")
#: bodies kept per kind of call (layers that differ in what the body reads get their own)
MAX_BODIES = 4
_CONTAINERS = (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict)
_IMMUTABLE = (type(None), bool, int, float, str, torch.dtype, torch.device)


class LayerBodies:
    """The bodies of one capture (``CaptureState.layer_bodies``)."""

    def __init__(self):
        self.by_key: dict = {}          # call key -> [LayerBody]
        self.refused: dict = {}         # call key -> why its layers are inlined
        self.repeated: dict = {}        # (container source, class) -> bool
        self.depth = 0                  # > 0 while a body is being traced
        self.attr_nodes: dict = {}      # id(body) -> its get_attr node in the root graph


def call_repeated_layer(tx, module_value, args: list, kwargs: dict):
    """One call of a body for this layer call, or None to inline it (module docstring)."""
    if not config.reuse_layer_bodies:
        return None
    state = tx.state
    mod, source = module_value.obj, module_value.source
    cls = type(mod)
    if source is None or cls.__module__.startswith("torch.nn.") or state.side_effects.in_hop:
        return None
    bodies = state.layer_bodies
    if bodies is None:
        bodies = state.layer_bodies = LayerBodies()
    if bodies.depth or not _is_repeated(state, bodies, source, cls):
        return None
    return _through_body(tx, bodies, (cls,), module_value, module_value, [], args, kwargs)


def call_region(tx, fn_value, args: list, kwargs: dict):
    """``torch.compiler.nested_compile_region``'s call of ``fn`` (a function, or a method
    whose first argument is a module): one call of a body traced once per kind of call,
    as for a layer; the module argument, if any, plays the layer.  Inlined where no body
    serves, or with ``reuse_layer_bodies`` off (in eager the region is a plain call)."""
    state = tx.state
    layer = args[0] if args and isinstance(args[0], ModuleValue) and args[0].source is not None else None
    if config.reuse_layer_bodies and not state.side_effects.in_hop:
        bodies = state.layer_bodies
        if bodies is None:
            bodies = state.layer_bodies = LayerBodies()
        if not bodies.depth:
            rest = args[1:] if layer is not None else list(args)
            prefix = [layer] if layer is not None else []
            key_base = ("region", id(fn_value), type(layer.obj) if layer is not None else None)
            out = _through_body(tx, bodies, key_base, layer, fn_value, prefix, rest, kwargs, pin=True)
            if out is not None:
                return out
    return fn_value.call(tx, list(args), kwargs)


class NestedRegionValue(Value):
    """``invoke_subgraph_placeholder(fn, *args, **kwargs)``, what a function marked with
    ``torch.compiler.nested_compile_region`` calls."""

    def __init__(self, fn):
        self.fn = fn

    def real_object(self):
        return self.fn

    def describe(self):
        return "torch.compiler.nested_compile_region call"

    def call(self, tx, args, kwargs):
        if not args:
            raise Unsupported("invoke_subgraph_placeholder() needs a function")
        return call_region(tx, args[0], list(args[1:]), dict(kwargs))


def _through_body(tx, bodies: LayerBodies, key_base: tuple, layer, fn_value, prefix: list, args: list,
                  kwargs: dict, pin: bool = False):
    """A call of a body kept for this kind of call (traced now if none serves and the kind
    is not refused), or None.  ``pin``: the body depends on every write of the trace (a
    function's closure may read state made in the frame)."""
    tensors: list = []
    try:
        shape = (tuple(_data_key(a, tensors) for a in args),
                 tuple((k, _data_key(v, tensors)) for k, v in kwargs.items()))
    except _NotData:
        return None
    key = (*key_base, shape, torch.is_grad_enabled(), autocast_state())
    known = bodies.by_key.setdefault(key, [])
    for body in known:
        out = body.call_for(tx, bodies, layer, tensors)
        if out is not None:
            return out
    if key in bodies.refused or len(known) >= MAX_BODIES:
        return None
    body = _trace_body(tx, bodies, layer, _BodyCall(fn_value, prefix, len(args), tuple(kwargs)), args, kwargs,
                       pin)
    if isinstance(body, str):
        bodies.refused[key] = body
        return None
    out = body.call_for(tx, bodies, layer, tensors)
    if out is None:
        # not even its own layer passes (it read state a write of the trace had changed)
        bodies.refused[key] = "the layer it was traced from does not pass its checks"
        return None
    known.append(body)
    return out


class _NotData(Exception):
    pass


def _data_key(v: Value, tensors: list):
    """What of an argument a body depends on: tensors' metadata, constants' values and the
    containers' structure (``tensors`` collects the tensors in the body's argument order)."""
    if isinstance(v, TensorValue):
        if v.cls is not torch.Tensor:
            raise _NotData
        f = v.fake
        tensors.append(v)
        return ("tensor", tuple(map(str, f.shape)), tuple(map(str, f.stride())), f.dtype, f.device,
                f.requires_grad)
    if type(v) is ConstantValue and type(v.value) in _IMMUTABLE:
        return ("const", type(v.value), v.value)
    if type(v) in (TupleValue, ListValue):
        return (type(v).__name__, tuple(_data_key(i, tensors) for i in v.items))
    if type(v) is DictValue and v.cls is dict and not v.key_values:
        return ("dict", tuple((k, _data_key(i, tensors)) for k, i in v.items.items()))
    raise _NotData


def _body_argument(v: Value, fake_mode):
    """The argument ``trace_subgraph`` makes a body input of: a new fake with a tensor's
    metadata (a fresh placeholder: the caller's own fake would map results that are the
    input itself, ``x.to(x.dtype)``, back to the caller's Value), containers of them,
    constants as they are."""
    if isinstance(v, TensorValue):
        f = v.fake
        with fake_mode:
            fresh = torch.empty_strided(f.shape, f.stride(), dtype=f.dtype, device=f.device)
        return fresh.requires_grad_(f.requires_grad)
    if type(v) is TupleValue:
        return tuple(_body_argument(i, fake_mode) for i in v.items)
    if type(v) is ListValue:
        return [_body_argument(i, fake_mode) for i in v.items]
    if type(v) is DictValue:
        return {k: _body_argument(i, fake_mode) for k, i in v.items.items()}
    return v


def _is_repeated(state, bodies: LayerBodies, source, cls) -> bool:
    """``source`` is ``container._modules[key]`` of a module container with two or more
    modules of class ``cls``."""
    if not (type(source) is ItemSource and type(source.base) is AttrSource and source.base.name == "_modules"):
        return False
    parent = source.base.base
    hit = bodies.repeated.get((parent, cls))
    if hit is None:
        try:
            container = state.real_value(parent)
        except Exception:     # noqa: BLE001 - a source Kiln cannot read back: no reuse
            container = None
        hit = isinstance(container, _CONTAINERS) and \
            sum(type(m) is cls for m in container._modules.values()) >= 2
        bodies.repeated[(parent, cls)] = hit
    return hit


def _pending_objects(side_effects) -> set:
    """id()s of the existing objects the trace has changed (writes replayed later)."""
    se = side_effects
    out = {key[0] for key in se.attr_writes}
    out.update(id(c.real) for c in se.mutated_containers.values() if getattr(c, "real", None) is not None)
    return out


def under(source, root) -> bool:
    while source is not None:
        if source == root:
            return True
        source = source.base
    return False


def reroot(source, old, new):
    """``source`` with its prefix ``old`` replaced by ``new`` (None: not under ``old``)."""
    if source == old:
        return new
    base = source.base
    if base is None:
        return None
    moved = reroot(base, old, new)
    if moved is None:
        return None
    for f in dataclasses.fields(source):
        if getattr(source, f.name) is base:
            return dataclasses.replace(source, **{f.name: moved})
    return None


_BASE_FIELDS: dict = {}     # source class -> the name of its field holding its base


def _moved(rel, source, memo: dict):
    """``reroot(rel, LAYER, source)`` for one of a body's fixed sources, or ``rel`` itself
    when it is not under LAYER; ``memo`` (by id: the body keeps its sources alive) shares
    the common prefixes of one layer's sources."""
    hit = memo.get(id(rel))
    if hit is not None:
        return hit
    base = rel.base
    if rel == LAYER:
        out = source
    elif base is None:
        out = rel
    else:
        moved = _moved(base, source, memo)
        if moved is base:
            out = rel
        else:
            name = _BASE_FIELDS.get(type(rel))
            if name is None:
                name = _BASE_FIELDS[type(rel)] = next(f.name for f in dataclasses.fields(rel)
                                                      if getattr(rel, f.name) is base)
            out = dataclasses.replace(rel, **{name: moved})
    memo[id(rel)] = out
    return out


class _BodyCall(Value):
    """The body's function: ``fn(*prefix, ...)`` with the body's arguments, the first
    ``positional`` of them positionally, the rest as the keyword arguments ``names``."""

    def __init__(self, fn_value, prefix: list, positional: int, names: tuple):
        self.fn_value, self.prefix, self.positional, self.names = fn_value, prefix, positional, names

    def call(self, tx, args, kwargs):
        return self.fn_value.call(tx, [*self.prefix, *args[:self.positional]],
                                  dict(zip(self.names, args[self.positional:])))


def _trace_body(tx, bodies: LayerBodies, module_value, body_fn, args: list, kwargs: dict, pin: bool):
    """The body traced from this layer (None: a region without one), or why none is kept."""
    state = tx.state
    layer_source = module_value.source if module_value is not None else None
    for v in state.known_values() if layer_source is not None else ():
        # an object under the layer read before the body: its guards are not the body's
        if v is not module_value and getattr(v, "source", None) is not None and under(v.source, layer_source):
            return f"{v.describe()} was read before the layer was called"
    guards = state.guards
    se = state.side_effects
    hits = se.pending_hits
    recording, guards.recording = guards.recording, []
    grad_mode = torch.is_grad_enabled()
    bodies.depth += 1
    try:
        body_args = [_body_argument(a, state.builder.fake_mode) for a in [*args, *kwargs.values()]]
        what = type(module_value.obj).__name__ if module_value is not None else "nested_compile_region"
        sub = tx.trace_subgraph(body_fn, body_args, f"layer {what}")
    except (Unsupported, TracedException) as e:
        return f"its body cannot be traced on its own: {e}"
    finally:
        recorded, guards.recording = guards.recording, recording
        bodies.depth -= 1
        torch._C._set_grad_enabled(grad_mode)
    why = _impure(sub)
    if why:
        return why
    inputs = dict(state.builder.placeholders)
    sources = []
    for node in sub.lifted:
        src = inputs.get(node)
        if src is not None:
            sources.append(reroot(src, layer_source, LAYER) or src)
        elif node.op == "call_method" and node.target == "size" and node.args[0] in inputs \
                and not under(inputs[node.args[0]], layer_source):
            sources.append(node)     # a symbolic size of an input (lift_size_symbols): the same for all
        else:
            return f"its body reads a tensor computed in the frame ({node.name})"
    body = LayerBody(tx, sub, layer_source, sources, recorded)
    # it saw writes of the trace (a global set before the loop): only while nothing else
    # is written is that state the same for another layer
    body.version = se.version if (pin or se.pending_hits != hits or se.cell_writes) else None
    return body


def _impure(sub) -> str | None:
    """Why a traced body is not a pure function of its inputs, if it is not."""
    graph = sub.gm.graph
    placeholders = [n.meta.get("example_value") for n in graph.nodes if n.op == "placeholder"]
    storages = {id(f.untyped_storage()) for f in placeholders if isinstance(f, torch.Tensor)}
    for n in graph.nodes:
        if n.op in ("call_function", "call_method", "call_module"):
            if n.meta.get("kiln_draws"):
                return "its body draws random numbers"
            if "example_value" not in n.meta:
                return f"its body switches global state ({n.target})"
    seen = set()
    for f in sub.out_fakes:
        if has_unbacked(f):
            return "its body returns a tensor whose size depends on tensor data"
        storage = id(f.untyped_storage())
        if storage in storages or storage in seen:
            return "its body returns a tensor sharing memory with an input or another output"
        seen.add(storage)
    return None


def _meta(f):
    if not isinstance(f, torch.Tensor):
        return (type(f), str(f))
    return (type(f), tuple(map(str, f.shape)), tuple(map(str, f.stride())), f.dtype, f.device, f.requires_grad)


class LayerBody:
    """A body traced from one layer, with what another layer must satisfy to call it."""

    def __init__(self, tx, sub, layer_source, sources: list, recorded: list):
        state = tx.state
        self.sub = sub
        self.cls = type(state.real_value(layer_source)) if layer_source is not None else None
        self.layer_description = layer_source.describe() if layer_source is not None else None
        self.sources = sources                   # one per lifted input: relative to LAYER, or absolute
        self.metas = [_meta(f) for f in sub.lifted_fakes]
        self.pattern = _pattern(sub.lifted)
        self.guards = []                          # (guard relative to LAYER, sources for the check)
        relative = GuardSet(state.ns)
        seen = set()
        for g in recorded:
            if id(g) in seen or not any(s is not None and under(s, layer_source) for s in (g.source, *g.uses)):
                continue
            seen.add(id(g))
            moved = [None if s is None else (reroot(s, layer_source, LAYER) or s) for s in (g.source, *g.uses)]
            self.guards.append((g, moved))
            # outside the layer: the same object for every layer (nothing was written since)
            checked = [s if s is None or under(s, LAYER) else _constant(state, s) for s in moved]
            relative.add(g.kind, checked[0], g.check, g.description, tuple(checked[1:]), g.plan)
        self.checks = len(relative)
        # the checks hand back every object they read on the way, so that a layer whose
        # objects the trace has written to (reads of it would see the writes) is not called
        read = {s for g in relative for s in (g.source, *g.uses) if s is not None and under(s, LAYER)}
        read.update(s for s in sources if not isinstance(s, torch.fx.Node) and under(s, LAYER))
        for s in list(read):
            while s.base is not None and s.base != LAYER:
                s = s.base
                read.add(s)
        self.read = sorted(read, key=lambda s: s.describe())
        text = GuardCodegen(relative, "___layer").source("___fits", [LAYER, *self.read])
        scope = dict(state.ns.values)
        exec(compile(text, f"<kiln layer checks for {getattr(self.cls, '__name__', 'a region')}>", "exec"), scope)
        self.fits = scope["___fits"]
        self.identifier = None
        self.version = None                       # the writes' count it depends on (None: none)

    def call_for(self, tx, bodies: LayerBodies, module_value, tensors: list):
        """The call of this body for a layer, or None where the layer does not fit it."""
        layer = module_value.obj if module_value is not None else None
        state = tx.state
        se = state.side_effects
        if (self.cls is not None and type(layer) is not self.cls) or (self.version is not None and se.version != self.version):
            return None
        read = self.fits(layer)
        if read is False:
            return None
        if se.attr_writes or se.mutated_containers:
            pending = _pending_objects(se)
            if any(id(obj) in pending for obj in read) or module_value is not None and \
                    any(c.source is not None and under(c.source, module_value.source)
                        for c in se.mutated_containers.values()):
                return None
        source = module_value.source if module_value is not None else None
        memo: dict = {}
        values = dict(zip(self.read, read[1:]))    # what the checks read, by relative source
        lifted = []
        for rel, meta, fake in zip(self.sources, self.metas, self.sub.lifted_fakes):
            if isinstance(rel, torch.fx.Node):
                lifted.append((rel, fake))
                continue
            src = _moved(rel, source, memo) if source is not None else rel
            real = values[rel] if rel in values else state.real_value(src)
            v = tx.wrap(real, src)
            if not isinstance(v, TensorValue) or _meta(v.fake) != meta:
                return None
            lifted.append(lower(tx, v))
        if _pattern([n for n, _ in lifted]) != self.pattern:
            return None
        where = source.describe() if source is not None else None
        for g, moved in self.guards:
            placed = [None if s is None else _moved(s, source, memo) for s in moved]
            state.guards.add(g.kind, placed[0], g.check, g.description.replace(self.layer_description, where),
                             tuple(placed[1:]), g.plan, (g.expected, g.actual))
        builder = state.builder
        attr = bodies.attr_nodes.get(id(self))
        if attr is None:
            name = self.cls.__name__ if self.cls is not None else "region"
            attr = bodies.attr_nodes[id(self)] = builder.add_attr(self.sub.gm, f"layer_body_{name}")
            self.identifier = attr.target
        explicit = [lower(tx, t) for t in tensors]
        operands = explicit + lifted
        node = builder.graph.create_node("call_function", call_body,
                                         (attr, self.identifier, *[n for n, _ in operands]), {})
        # the outputs' metadata is the traced body's (its inputs' metadata is the same):
        # new fakes with it, instead of running the body's ops on fakes again
        with builder.fake_mode:
            result = tuple(_fresh_output(f) for f in self.sub.out_fakes)
        node.meta["example_value"] = result
        count = len(self.sub.out_fakes)
        return self.sub.rebuild(outer_outputs(tx, node, result, count) if count else [])


def _fresh_output(f):
    """A new fake like ``f``, the output of an op (with a ``grad_fn``) where ``f`` needs grad."""
    t = torch.empty_strided(f.shape, f.stride(), dtype=f.dtype, device=f.device)
    return t.requires_grad_().clone() if f.requires_grad else t


def _pattern(nodes: list) -> tuple:
    """Which inputs are the same node (aliasing among a body's inputs)."""
    first: dict = {}
    return tuple(first.setdefault(n, i) for i, n in enumerate(nodes))


def _constant(state, source):
    obj = state.real_value(source)
    state.keepalive.append(obj)
    return ConstSource(id(obj), obj)
