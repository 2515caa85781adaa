"""Generated step/continuation code objects must be well-formed: a malformed line
table once made CPython write past its line array under a profiler (heap corruption)."""
import cProfile

import torch

import kiln
from kiln.capture.frames import resume


def wrapper_like(x, flag=True):
    total = x * 2
    try:
        for i in range(3):
            with torch.no_grad():
                total = total + i
            print("step", i)
            if flag:
                total = total * 1.5
    finally:
        total = total - 1
    return total


def test_every_generated_code_has_a_consistent_line_table():
    cf = kiln.compile(wrapper_like)
    x = torch.randn(3)
    torch.testing.assert_close(cf(x), wrapper_like(x))
    codes = list(resume._CONTINUATIONS.values())
    assert codes, "the program should have graph breaks"
    for code in codes:
        units = len(code.co_code) // 2
        assert sum((end - start) // 2 for start, end, _ in code.co_lines()) == units, code.co_name


def test_round_trip_line_table_is_repaired():
    from bytecode import Bytecode
    code = resume.consistent_linetable(Bytecode.from_code(wrapper_like.__code__).to_code())
    units = len(code.co_code) // 2
    assert sum((end - start) // 2 for start, end, _ in code.co_lines()) == units
    assert [line for line in (p[0] for p in code.co_positions()) if line] == \
        [line for line in (p[0] for p in wrapper_like.__code__.co_positions()) if line]


def test_compiled_calls_with_breaks_run_under_a_profiler():
    cf = kiln.compile(wrapper_like)
    x = torch.randn(3)
    cf(x)
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        for _ in range(3):
            out = cf(x)
    finally:
        profiler.disable()
    torch.testing.assert_close(out, wrapper_like(x))
    assert kiln.metrics.eager_fallbacks == 0
