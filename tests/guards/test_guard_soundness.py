"""Property test: whatever changes between calls (globals, attributes, dtypes, shapes,
devices given as strings, list lengths, dict keys), the compiled function agrees with
eager — a guard either still holds or triggers a recompile."""
import torch
from hypothesis import given, settings, strategies as st

import kiln

SCALE = 2


class Config:
    def __init__(self):
        self.bias = 1.0
        self.use_relu = True


CFG = Config()


def program(x, items, table, device):
    y = x.to(device) * SCALE + CFG.bias
    if CFG.use_relu:
        y = torch.relu(y)
    for i, item in enumerate(items):
        y = y + item * (i + 1)
    for key in table:
        y = y - table[key] if key.startswith("neg") else y + table[key]
    if x.dtype == torch.float64:
        y = y * 0.5
    return y, len(items), sorted(table)


states = st.fixed_dictionaries({
    "scale": st.integers(-3, 3),
    "bias": st.sampled_from([0.0, 1.0, -2.5]),
    "use_relu": st.booleans(),
    "dtype": st.sampled_from([torch.float32, torch.float64]),
    "shape": st.sampled_from([(3,), (2, 3), (4,)]),
    "n_items": st.integers(0, 3),
    "keys": st.lists(st.sampled_from(["a", "b", "neg_c", "neg_d"]), unique=True, max_size=3),
    "device": st.sampled_from(["cpu", "cpu:0"]),
})


@settings(max_examples=60, deadline=None)
@given(st.lists(states, min_size=2, max_size=6))
def test_compiled_agrees_with_eager_under_changing_state(sequence):
    global SCALE
    kiln.reset()
    kiln.config.recompile_limit = 64
    compiled = kiln.compile(program)
    saved = (SCALE, CFG.bias, CFG.use_relu)
    try:
        for i, s in enumerate(sequence):
            SCALE, CFG.bias, CFG.use_relu = s["scale"], s["bias"], s["use_relu"]
            g = torch.Generator().manual_seed(i)
            x = torch.randn(s["shape"], generator=g).to(s["dtype"])
            items = [float(k) for k in range(s["n_items"])]
            table = {k: float(len(k)) for k in s["keys"]}
            expected = program(x, items, table, s["device"])
            actual = compiled(x, items, table, s["device"])
            torch.testing.assert_close(actual[0], expected[0])
            assert actual[0].dtype == expected[0].dtype
            assert actual[1:] == expected[1:]
        assert kiln.metrics.eager_fallbacks == 0
        assert 1 <= kiln.metrics.frames_captured <= len(sequence)
    finally:
        SCALE, CFG.bias, CFG.use_relu = saved


def test_cache_hits_when_nothing_changes():
    kiln.reset()
    compiled = kiln.compile(program)
    x = torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(compiled(x, [1.0], {"a": 1.0}, "cpu")[0], program(x, [1.0], {"a": 1.0}, "cpu")[0])
    assert kiln.metrics.frames_captured == 1
