"""Guards: every assumption a captured graph makes, compiled into one Python function.

Each guard is a boolean Python expression over Sources (``x.dtype is ___c3``).  An
entry's guards are emitted as one generated function with the frame's own signature,
cheap checks first, plus a twin function that returns the text of the first guard
that failed (used for recompile messages; never on the fast path).

A guard may also carry a *plan*: the same check as steps of the C accelerator
(``runtime/guard_plan.py``), e.g. ``(("type", T), ("eq", 3))`` for
``type({v}) is T and {v} == 3``.  ``GuardCodegen.plan`` turns the sorted guard list into
one ``PlanSpec``, walking it exactly as the Python function does; a guard without a plan
becomes a step that runs its check text as a Python lambda, so a plan is always complete
and the Python text stays the specification.  Whoever writes a check writes its plan
beside it, the two saying the same thing (the guard tests run both paths).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ...runtime import autocast_state, describe_change, guard_plan as gp
from .sources import AttrSource, ClosureSource, ConstSource, FnSource, GlobalSource, ItemSource, LocalSource, \
    Namespace, Source

# Order in which guard kinds are emitted: cheap identity/type checks first.
_KIND_ORDER = {"global_state": 0, "id": 1, "type": 2, "const": 3, "len": 4, "keys": 5, "tensor": 6, "shape": 7,
               "alias": 8}


@dataclass
class Guard:
    kind: str
    source: Source | None
    check: str          # a Python expression; the placeholder {v} stands for the source's value
    description: str    # user-facing sentence fragment
    uses: tuple = ()    # extra sources the check reads ({v1}, {v2}...)
    plan: tuple | None = None   # the check as accelerator steps (module docstring); None: its text
    # for a recompile message with both sides (``runtime.guard_changes``): what the check
    # expected, and the expression of what it reads (``{v}``: the source's value); None: none
    expected: object = None
    actual: str | None = None


class GuardSet:
    """Collects guards while tracing, deduplicated by (source, check)."""

    def __init__(self, ns: Namespace):
        self.ns = ns
        self._guards: dict[tuple, Guard] = {}
        # while a layer body is traced (hops/layers.py): every guard asked for, kept or
        # already there, so the body's assumptions can be checked for another layer
        self.recording: list | None = None

    def __len__(self):
        return len(self._guards)

    def __iter__(self):
        return iter(self._guards.values())

    def sources(self) -> set:
        """Every source some guard reads: the guard function has its value bound."""
        out = set()
        for g in self._guards.values():
            if g.source is not None:
                out.add(g.source)
            out.update(g.uses)
        return out

    def add(self, kind: str, source: Source | None, check: str, description: str, uses: tuple = (),
            plan: tuple | None = None, change: tuple | None = None):
        """``plan``: ``check`` as accelerator steps (see the module docstring), if it has them;
        ``change``: ``(expected, actual)``, what a failure message shows on each side (see
        ``Guard``); without it the message is the description."""
        key = (source, check, uses)
        guard = self._guards.get(key)
        if guard is None:
            expected, actual = change if change is not None else (None, None)
            guard = self._guards[key] = Guard(kind, source, check, description, uses, plan, expected, actual)
        if self.recording is not None:
            self.recording.append(guard)

    # -- the kinds ----------------------------------------------------------------
    def identity(self, source: Source, obj, what: str = "object"):
        self.add("id", source, f"{{v}} is {self.ns.ref(obj)}", f"{source.describe()} is the same {what}",
                 plan=(("is", obj),))

    def type_is(self, source: Source, obj):
        t = type(obj)
        self.add("type", source, f"type({{v}}) is {self.ns.ref(t)}", f"type({source.describe()}) is {t.__name__}",
                 plan=(("type", t),), change=(t, "{v}"))

    def constant(self, source: Source, value):
        plan = (("type", type(value)), ("eq", value))
        if value is None or isinstance(value, bool):
            check = f"{{v}} is {value!r}"
            plan = (("is", value),)
        elif isinstance(value, (int, float, str, bytes)) and type(value) in (int, float, str, bytes):
            ref = self.ns.ref(type(value))
            text = literal(value)
            if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
                text = self.ns.ref(value)
                check = f"type({{v}}) is {ref} and ({{v}} == {text} or ({{v}} != {{v}} and {text} != {text}))"
                plan = None
            else:
                check = f"type({{v}}) is {ref} and {{v}} == {text}"
        elif isinstance(value, (torch.dtype, torch.device, type(Ellipsis))) or value is NotImplemented:
            check = f"{{v}} == {self.ns.ref(value)}" if isinstance(value, torch.device) else f"{{v}} is {self.ns.ref(value)}"
            plan = (("eq" if isinstance(value, torch.device) else "is", value),)
        elif _unequal_to_itself(value):
            # a NaN of another kind (a numpy scalar): the same NaN again passes, as for floats
            ref = self.ns.ref(value)
            check = f"type({{v}}) is {self.ns.ref(type(value))} and ({{v}} == {ref} or ({{v}} != {{v}} and {ref} != {ref}))"
            plan = None
        else:
            check = f"type({{v}}) is {self.ns.ref(type(value))} and {{v}} == {self.ns.ref(value)}"
        self.add("const", source, check, f"{source.describe()} == {value!r}", plan=plan, change=(value, "{v}"))

    def length(self, source: Source, obj):
        self.type_is(source, obj)
        self.add("len", source, f"len({{v}}) == {len(obj)}", f"len({source.describe()}) == {len(obj)}",
                 plan=(("len", len(obj)),), change=(len(obj), "{v}"))

    def dict_keys(self, source: Source, d: dict):
        self.type_is(source, d)
        keys = list(d.keys())
        if all(type(k) in (str, int) for k in keys):
            self.add("keys", source, f"list({{v}}) == {literal(keys)}", f"{source.describe()} has keys {keys!r}",
                     plan=(("keys", keys),), change=(keys, "{v}"))
        else:
            # by identity: == on tensor keys (optimizer state) would compare values, and raise
            ref = self.ns.ref(keys)
            self.add("keys", source, f"len({{v}}) == {len(keys)} and all(a is b or (type(a) in (str, int) and a == b) "
                     f"for a, b in zip({{v}}, {ref}))", f"{source.describe()} has the same keys")

    def key_presence(self, source: Source, key, present: bool):
        """``key in d`` (or ``not in``) for a dict whose key set as a whole is not
        depended on: a lookup by a constant ``str``, ``int`` or ``bytes`` key."""
        op = "in" if present else "not in"
        self.add("key", source, f"{literal(key)} {op} {{v}}", f"{key!r} {op} {source.describe()}")

    def tensor(self, source: Source, t: torch.Tensor, fake=None):
        """Type, dtype, device, requires_grad, and every size and stride that is static in
        ``fake`` (all of them unless the capture made some symbolic: those are checked by
        the shape guards, ``GraphBuilder.shape_guards``)."""
        # on the CPU, is_cpu says what ``device == cpu`` does without making a device object
        device = "{v}.is_cpu" if t.device.type == "cpu" else f"{{v}}.device == {self.ns.ref(t.device)}"
        parts = [f"type({{v}}) is {self.ns.ref(type(t))}",
                 f"{{v}}.dtype is {self.ns.ref(t.dtype)}",
                 device,
                 f"{{v}}.requires_grad is {t.requires_grad}"]
        sizes = tuple(fake.shape) if fake is not None else tuple(t.shape)
        strides = (tuple(fake.stride()) if fake is not None else tuple(t.stride())) if t.layout == torch.strided else None
        parts.append(_static_entries("{v}.shape", sizes))
        if strides is not None:
            parts.append(_static_entries("{v}.stride()", strides))
        shown = lambda xs: "(" + ", ".join(str(x) for x in xs) + ("," if len(xs) == 1 else "") + ")"  # noqa: E731
        desc = (f"{source.describe()} is a {type(t).__name__} of dtype {t.dtype}, device {t.device}, "
                f"shape {shown(sizes)}, stride {shown(strides) if strides is not None else '-'}, "
                f"requires_grad={t.requires_grad}")
        static = lambda xs: None if xs is None else tuple(x if type(x) is int else None for x in xs)  # noqa: E731
        plan = (("tensor", type(t), t.dtype, None if t.device.type == "cpu" else t.device, t.requires_grad,
                 static(sizes), static(strides)),)
        self.add("tensor", source, " and ".join(parts), desc, plan=plan,
                 change=((type(t), t.dtype, t.device, t.requires_grad, static(sizes), static(strides)), "{v}"))

    def shape(self, sources: list, check: str, description: str):
        """A guard the ShapeEnv recorded on symbolic sizes; ``check`` reads ``{v}``, ``{v1}``...
        for ``sources`` in order."""
        self.add("shape", sources[0], check, description, uses=tuple(sources[1:]), change=(description, "{v}"))

    def same_object(self, source: Source, other: Source):
        self.add("alias", source, "{v} is {v1}", f"{source.describe()} is {other.describe()}", uses=(other,),
                 plan=(("same",),))

    def global_state(self):
        grad, mode = self.ns.ref(torch.is_grad_enabled), _mode_word(torch.is_grad_enabled())
        self.add("global_state", None, f"{grad}() is {torch.is_grad_enabled()}", f"grad mode is {mode}",
                 plan=(("call_is", torch.is_grad_enabled, torch.is_grad_enabled()),),
                 change=(mode, f"{self.ns.ref(_mode_word)}({grad}())"))
        # the default dtype decides what factory calls (torch.ones(2)) make
        dtype = torch.get_default_dtype()
        self.add("global_state", None, f"{self.ns.ref(torch.get_default_dtype)}() is {self.ns.ref(dtype)}",
                 f"the default dtype is {dtype}", plan=(("call_is", torch.get_default_dtype, dtype),),
                 change=(dtype, f"{self.ns.ref(torch.get_default_dtype)}()"))
        # autocast changes what every op computes (and backends bake it in): one cheap
        # check when it is off, the full (device, dtype) state when it is on
        if not torch._C._is_any_autocast_enabled():
            self.add("global_state", None, f"{self.ns.ref(torch._C._is_any_autocast_enabled)}() is False",
                     "autocast is off", plan=(("call_is", torch._C._is_any_autocast_enabled, False),),
                     change=("off", "'on'"))
        else:
            state = autocast_state()
            self.add("global_state", None, f"{self.ns.ref(autocast_state)}() == {literal(state)}",
                     f"autocast state is {state}", change=(state, f"{self.ns.ref(autocast_state)}()"))


def _mode_word(on: bool) -> str:
    return "enabled" if on else "disabled"


def _unequal_to_itself(value) -> bool:
    try:
        return bool(value != value)
    except Exception:   # noqa: BLE001 - an object whose != is not a plain answer
        return False


def literal(value) -> str:
    """``repr(value)`` to embed in a check template: the templates are ``str.format``
    strings (``{v}`` names the source), so braces in the repr (a string constant such as
    ``"{'a': 0}"``, a dict key) are doubled to stay literal."""
    return repr(value).replace("{", "{{").replace("}", "}}")


def _static_entries(expr: str, values: tuple) -> str:
    """``expr == values``, checking only the entries that are plain ints (symbolic ones are
    left to the shape guards)."""
    if all(type(v) is int for v in values):
        return f"{expr} == {values!r}"
    checks = [f"len({expr}) == {len(values)}"]
    checks += [f"{expr}[{i}] == {v}" for i, v in enumerate(values) if type(v) is int]
    return " and ".join(checks)


class GuardCodegen:
    """Turns a GuardSet into the source of the guard function and its explainer."""

    def __init__(self, guards: GuardSet, params: str):
        # a guard may only read what the guards before it made safe to read: checks on a
        # container's items come after its type and length checks, so a guard never raises
        # (an IndexError would fail the entry on every call).  So sources nearer the
        # arguments go first, and within one depth the cheap kinds first.
        self.guards = sorted(guards, key=lambda g: (_depth(g), _KIND_ORDER.get(g.kind, 9)))
        self.params = params
        self.ns = guards.ns

    def _body(self, on_fail, handoff: list = ()) -> list[str]:
        lines: list[str] = []
        temps: dict[Source, str] = {}

        def value_of(src: Source) -> str:
            if src in temps:
                return temps[src]
            base = src.base
            if base is not None:
                value_of(base)  # make sure parents are bound first
            text = src.expr(_TempNS(self.ns, temps))
            if "(" not in text and "[" not in text and "." not in text:
                temps[src] = text       # a bare local name: no temp needed
                return text
            name = f"___v{len(temps)}"
            lines.append(f"{name} = {text}")
            temps[src] = name
            return name

        for g in self.guards:
            fmt = {}
            if g.source is not None:
                fmt["v"] = value_of(g.source)
            for i, u in enumerate(g.uses, 1):
                fmt[f"v{i}"] = value_of(u)
            check = g.check.format(**fmt)
            lines.append(f"if not ({check}):")
            lines.append(f"    {on_fail(g, fmt)}")
        if handoff:
            lines.append(f"return ({''.join(value_of(s) + ', ' for s in handoff)})")
        return lines

    def source(self, name: str, handoff: list = ()) -> str:
        """The guard function: False when a guard fails, else the values of ``handoff``
        (sources the guards read anyway, typically the graph's tensor inputs) as a tuple
        the glue takes, so the glue does not walk the same attribute chains again
        (``True`` when there is nothing to hand off)."""
        out = [f"def {name}({self.params}):", "    try:"]
        out += ["        " + l for l in self._body(lambda g, fmt: "return False", handoff)]
        if not handoff:            # else the body ends returning the handed-off values
            out.append("        return True")
        out += ["    except Exception:", "        return False"]
        return "\n".join(out) + "\n"

    def gather_source(self, name: str, handoff: list) -> str:
        """What the guard hands off, read directly: for the first call of a new entry,
        which runs without calling its guard."""
        values = "".join(f"{s.expr(self.ns)}, " for s in handoff)
        return f"def {name}({self.params}):\n    return ({values})\n"

    def plan(self, code, handoff: list = ()) -> gp.PlanSpec:
        """The guard function as accelerator steps (``runtime/guard_plan.py``): the same
        guards in the same order, each source read once into a slot when ``_body`` binds
        it, each guard's ``plan`` steps or, without one, its check text as a lambda."""
        slots: dict[Source, int] = {}
        params = gp.parameter_names(code)
        steps: list = []
        count = [len(params)]

        def new_slot() -> int:
            count[0] += 1
            return count[0] - 1

        def slot_of(src: Source) -> int:
            if src in slots:
                return slots[src]
            base = src.base
            base_slot = slot_of(base) if base is not None else None
            slots[src] = slot = _load_steps(src, base_slot, params, new_slot, steps, self._lambda_of_source)
            return slot

        for g in self.guards:
            used = ([slot_of(g.source)] if g.source is not None else []) + [slot_of(u) for u in g.uses]
            if g.plan is None:
                names = [f"___a{i}" for i in range(len(used))]
                fmt = dict(zip(["v", *(f"v{i}" for i in range(1, len(used)))], names))
                text = g.check.format(**fmt)
                steps.append((gp.C_PY, gp.Lambda(f"lambda {', '.join(names)}: ({text})"), tuple(used)))
                continue
            checks = g.plan
            if checks[0][0] == "on":       # a source-less check on an object: held in a slot
                used = [new_slot()]
                steps.append((gp.L_CONST, used[0], checks[0][1]))
                checks = checks[1:]
            for check in checks:
                steps.append(_check_step(check, used))
        return gp.PlanSpec(count[0], steps, tuple(slot_of(s) for s in handoff) if handoff else None)

    def _lambda_of_source(self, src: Source) -> gp.Lambda:
        """``src`` read by Python from its base's value (``___b``): source kinds without a step."""
        temps = {src.base: "___b"} if src.base is not None else {}
        text = src.expr(_TempNS(self.ns, temps))
        return gp.Lambda(f"lambda {'___b' if temps else ''}: {text}")

    def explain_source(self, name: str) -> str:
        out = [f"def {name}({self.params}):", "    try:"]
        out += ["        " + l for l in self._body(self._failure)]
        out += ["        return None", "    except Exception as e:",
                "        return f'a guard raised {type(e).__name__}: {e}'"]
        return "\n".join(out) + "\n"


    def _failure(self, g: Guard, fmt: dict) -> str:
        """The explain twin's line for a failed guard: what changed (both sides, from
        ``runtime.guard_changes``), or what was expected."""
        if g.actual is None:
            return f"return {('expected ' + g.description)!r}"
        # a global state's name is its description's subject ("grad mode is enabled")
        name = g.source.describe() if g.source is not None else g.description.split(" is ")[0]
        return (f"return {self.ns.ref(describe_change)}({g.kind!r}, {name!r}, {self.ns.ref(g.expected)}, "
                f"{g.actual.format(**fmt)}, {g.description!r})")


_CHECK_CODES = {"is": gp.C_IS, "type": gp.C_TYPE, "eq": gp.C_EQ, "len": gp.C_LEN, "tensor": gp.C_TENSOR,
                "attr_is": gp.C_ATTR_IS, "falsy_attrs": gp.C_FALSY_ATTRS, "in_dict": gp.C_IN_DICT, "in": gp.C_IN,
                "hasattr": gp.C_HASATTR, "truth": gp.C_TRUTH, "method_is": gp.C_METHOD_IS, "keys": gp.C_KEYS}


def _check_step(check: tuple, used: list) -> tuple:
    """One planned check (``("type", T)``...) as a step on the guard's slots."""
    kind, *operands = check
    if kind == "same":
        return (gp.C_SAME, used[0], used[1])
    if kind in ("call_is", "call_eq"):
        return (gp.C_CALL_IS if kind == "call_is" else gp.C_CALL_EQ, *operands)
    if kind == "keys":
        operands = [list(operands[0])]
    return (_CHECK_CODES[kind], used[0], *operands)


def _load_steps(src: Source, base: int | None, params: list, new_slot, steps: list, fallback) -> int:
    """Append the steps that read ``src`` (its base already in slot ``base``); its slot.
    Each step does what ``src.expr`` does in Python (an attribute, an item, a constant);
    other source kinds read through ``fallback(src)``, a lambda of the base's value."""
    if isinstance(src, FnSource):
        return 0
    if isinstance(src, LocalSource) and src.name in params:
        return params.index(src.name)
    slot = new_slot()
    if isinstance(src, ConstSource):
        steps.append((gp.L_CONST, slot, src.obj))
    elif isinstance(src, GlobalSource):
        holder = new_slot()
        steps.append((gp.L_CONST, holder, src.globals_ref))
        steps.append((gp.L_ITEM, slot, holder, src.name))
    elif isinstance(src, AttrSource):
        steps.append((gp.L_ATTR, slot, base, src.name))
    elif type(src) is ItemSource:
        steps.append((gp.L_ITEM, slot, base, src.index))
    elif isinstance(src, ClosureSource):
        cells, cell = new_slot(), new_slot()
        steps.append((gp.L_ATTR, cells, base, "__closure__"))
        steps.append((gp.L_ITEM, cell, cells, src.index))
        steps.append((gp.L_ATTR, slot, cell, "cell_contents"))
    else:
        steps.append((gp.L_CALL, slot, fallback(src), (base,) if base is not None else ()))
    return slot


def _source_depth(source) -> int:
    depth = 0
    while source is not None:
        source = source.base
        depth += 1
    return depth


def _depth(guard: Guard) -> int:
    return max([_source_depth(guard.source), *(_source_depth(u) for u in guard.uses)])


class _TempNS(Namespace):
    """Expression namespace that substitutes already-bound temporaries for sources."""

    def __init__(self, ns: Namespace, temps: dict):
        self._ns = ns
        self._temps = temps

    def bound(self, source):
        return self._temps.get(source)

    def ref(self, obj, prefix="___c"):
        return self._ns.ref(obj, prefix)
