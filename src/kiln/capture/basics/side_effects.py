"""Pending Python-level mutations, replayed by the glue after the graph runs.

Tensor mutations live in the graph itself (in-place ops on graph inputs); what is
recorded here is everything else: attribute writes on existing objects, writes to
module globals (one store per module, however they are written) and closure cells,
and containers from outside the frame whose contents changed.  Reads during tracing
consult the pending writes first, so the traced code sees its own writes.
"""
from __future__ import annotations

from ...exc import Unsupported


class SideEffects:
    def __init__(self):
        self.attr_writes: dict = {}       # (id(obj), name) -> (obj_value, name, value)
        self.global_writes: dict = {}     # (id(module dict), name) -> (globals_dict, name, value)
        self.cell_writes: dict = {}       # id(cell) -> (cell_value, value)
        self.mutated_containers: dict = {}  # id(value) -> container value with a source
        self.new_objects: list = []
        self.in_hop: list = []            # stack of higher-order-operator scopes (see hops/)
        self.trace_local_ids: set = set()  # real objects made at trace time (copies): writes stay local
        self.calls: list = []             # (callable value, argument values): calls replayed last
        # where each write was made (user file:line, source line), stamped by the tracer after
        # the instruction that made it (``locate``): for messages that name the write's line
        self.locations: dict = {}         # (kind, key) -> (location, source line)
        self.unlocated: list = []         # (kind, key) recorded since the last stamp
        # for layer bodies traced once (hops/layers.py): every write of Python state counts
        # (``version``), and every read that found a pending write (``pending_hits``)
        self.version = 0
        self.pending_hits = 0

    def _check_allowed(self, what: str, target_is_new: bool = False):
        if self.in_hop and not target_is_new:
            raise self.in_hop[-1].mutation_error(what)

    # -- recording ----------------------------------------------------------------
    def store_attr(self, obj_value, name: str, value, real=None):
        """``real`` is the object written to, when ``obj_value`` does not hold it (a tensor)."""
        self.version += 1
        obj = obj_value.obj if real is None else real
        local = id(obj) in self.trace_local_ids
        self._check_allowed(f"attribute {name!r} of {obj_value.describe()}", target_is_new=local)
        if self.dict_mutated_as_container(obj):
            raise Unsupported(f"setting {name!r} of {obj_value.describe()} after changing its __dict__ directly")
        self.attr_writes[(id(obj), name)] = (obj_value, name, value)
        self.unlocated.append(("attr", (id(obj), name)))

    def drop_attr(self, obj, name: str):
        """Forget the pending write of ``obj.name`` (an attribute the trace added, then
        deleted: there is nothing to replay)."""
        self.version += 1
        self._check_allowed(f"attribute {name!r}")
        self.attr_writes.pop((id(obj), name), None)

    def dict_mutated_as_container(self, obj) -> bool:
        """Whether ``obj.__dict__`` itself was changed through a dict Value (``vars(o)[k] = v``):
        attribute reads and writes of ``obj`` would not see those changes, and the replay
        would order them wrongly, so such mixes are refused."""
        d = getattr(obj, "__dict__", None)
        return isinstance(d, dict) and any(getattr(c, "real", None) is d for c in self.mutated_containers.values())

    def has_pending_attrs(self, obj) -> bool:
        return any(key[0] == id(obj) for key in self.attr_writes)

    def replayed_attr_writes(self):
        return [w for key, w in self.attr_writes.items() if key[0] not in self.trace_local_ids]

    def pending_attr(self, obj, name: str):
        hit = self.attr_writes.get((id(obj), name))
        if hit is None:
            return None
        self.pending_hits += 1
        return hit[2]

    # -- module globals: one store per module -------------------------------------------
    # A module's globals and its attributes are one dict (``mod.__dict__`` is the
    # ``__globals__`` of its functions).  Every write to it, by STORE_GLOBAL in any
    # function sharing that dict or through the module object (``mod.x = v``,
    # ``setattr(mod, "x", v)``), is kept here under the dict, and every read (LOAD_GLOBAL,
    # ``mod.x``, ``getattr(mod, "x")``) asks here first: a write by an inlined callee in
    # another module is seen by the frame's later reads, whichever way they read.
    def store_global(self, globals_dict: dict, name: str, value):
        self.version += 1
        self._check_allowed(f"global {name!r} of module {globals_dict.get('__name__', '?')}")
        # keyed by first write: new names reach the module's dict in the order eager adds them
        self.global_writes[(id(globals_dict), name)] = (globals_dict, name, value)
        self.unlocated.append(("global", (id(globals_dict), name)))

    def pending_global(self, globals_dict: dict, name: str):
        hit = self.global_writes.get((id(globals_dict), name))
        if hit is None:
            return None
        self.pending_hits += 1
        return hit[2]

    def check_local_write(self, value, what: str):
        """A write to something made in the frame (a cell, a new object: nothing to replay):
        inside a higher-order operator's body only the body's own may change."""
        self.version += 1
        if self.in_hop and not self.in_hop[-1].owns(value):
            raise self.in_hop[-1].mutation_error(what)

    def store_cell(self, cell_value, value):
        self.version += 1
        self._check_allowed("a closure variable")
        self.cell_writes[id(cell_value)] = (cell_value, value)
        self.unlocated.append(("cell", id(cell_value)))

    def mutated(self, container):
        self.version += 1
        container.dirty = True
        if container.source is None:
            if self.in_hop and not self.in_hop[-1].owns(container):
                raise self.in_hop[-1].mutation_error(container.describe())
            return
        self._check_allowed(container.describe())
        self.mutated_containers[id(container)] = container
        self.unlocated.append(("container", id(container)))

    def locate(self, where) -> None:
        """Stamp the writes recorded since the last call with ``where`` (the first stamp of
        each write stays: the line that made it first)."""
        for key in self.unlocated:
            self.locations.setdefault(key, where)
        self.unlocated.clear()

    def replay_call(self, fn_value, args: list):
        """A call into real Python state that the graph cannot make (leaving an autocast
        entered before the frame began), replayed after the writes."""
        self.version += 1
        self._check_allowed(fn_value.describe())
        self.calls.append((fn_value, list(args)))

    def track_new(self, obj):
        self.new_objects.append(obj)
        if self.in_hop:
            self.in_hop[-1].created_ids.add(id(obj))

    def is_empty(self) -> bool:
        return not (self.replayed_attr_writes() or self.global_writes or self.cell_writes or self.mutated_containers
                    or self.calls)

    def values(self) -> list:
        """Every Value the replay will need (to decide which tensors leave the graph)."""
        out = [v for (_, _, v) in self.replayed_attr_writes()]
        out += [v for (_, _, v) in self.global_writes.values()]
        out += [v for (_, v) in self.cell_writes.values()]
        for c in self.mutated_containers.values():
            out += c.contents()
        for fn, args in self.calls:
            out += [fn, *args]
        return out
