"""The instruction table: opname -> handler(tracer, instr).

Each family module ends with a TABLE dict listing its opcodes in the order they
are documented there; this module merges them so the whole instruction set can be
read top to bottom: names -> stack -> data -> patterns -> calls -> control -> blocks.
"""
from . import blocks, calls, control, data, names, patterns, stack

HANDLERS: dict = {}
for _family in (names, stack, data, patterns, calls, control, blocks):
    for _op, _fn in _family.TABLE.items():
        assert _op not in HANDLERS, f"opcode {_op} handled twice"
        HANDLERS[_op] = _fn
