"""A second process loads the entries the first one wrote: no capture, eager's results.

Each test runs its script twice (``helpers.run_script``): the first process captures and
writes, the second finds the entries under the same keys and runs them.  Both compare
the compiled results with eager on two inputs; the counting backend, registered by
name, sees the same graph (ops) compiled in both.
"""
import pytest

from .helpers import run_script

FUNCTION_AND_MODULE = '''
def f(x, y):
    return (x * y).sin().sum(0) + 1

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
    def forward(self, x):
        return torch.relu(self.lin(x)) * 2

torch.manual_seed(0)
block = Block()
cf = kiln.compile(f, backend="pcache_counting")
cm = kiln.compile(block, backend="pcache_counting")
same = []
for i in range(2):
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    same.append(torch.equal(cf(x, y), f(x, y)))
    same.append(torch.equal(cm(x), block(x)))
report(same=same, ops=counter.op_count, entries=len(cf.entries) + len(type(cm).forward.entries))
'''


def test_function_and_module_load_in_a_second_process(tmp_path):
    cache = tmp_path / "cache"
    first = run_script(FUNCTION_AND_MODULE, cache, tmp_path / "script.py")
    assert first["captured"] == 2 and first["loaded"] == 0 and first["skipped"] == 0
    assert first["same"] == [True] * 4 and first["graphs_compiled"] == 2
    second = run_script(FUNCTION_AND_MODULE, cache, tmp_path / "script.py")
    assert second["captured"] == 0 and second["loaded"] == 2, second
    assert second["same"] == [True] * 4
    # the stored graphs went to the backend again, with the same ops
    assert second["graphs_compiled"] == 2 and second["ops"] == first["ops"]
    assert second["entries"] == 2 and not second["warnings"]
    third = run_script(FUNCTION_AND_MODULE, cache, tmp_path / "script.py")
    assert third["captured"] == 0 and third["loaded"] == 2 and third["same"] == [True] * 4


BERT = '''
from transformers import BertConfig, BertModel
torch.manual_seed(0)
config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64)
model = BertModel(config).eval()
cm = kiln.compile(model, backend={backend!r})
same = []
with torch.no_grad():
    for seed in (1, 2):
        torch.manual_seed(seed)
        ids = torch.randint(0, 100, (2, 16))
        got, want = cm(ids).last_hidden_state, model(ids).last_hidden_state
        same.append(torch.equal(got, want))
report(same=same, ops=counter.op_count)
'''


@pytest.mark.parametrize("backend", ["eager", "pcache_counting"])
def test_bert_loads_in_a_second_process(tmp_path, backend):
    pytest.importorskip("transformers")
    cache, script = tmp_path / "cache", BERT.format(backend=backend)
    # layer bodies (repeated layers traced once) are not stored yet: a graph that calls
    # them is skipped (test_bert_with_layer_bodies_is_skipped_and_says_why)
    flat = {"KILN_REUSE_LAYER_BODIES": "0"}
    first = run_script(script, cache, tmp_path / "bert.py", env=flat)
    assert first["captured"] >= 1 and first["skipped"] == 0 and first["same"] == [True, True]
    second = run_script(script, cache, tmp_path / "bert.py", env=flat)
    assert second["captured"] == 0 and second["loaded"] == first["captured"], second
    assert second["same"] == [True, True] and not second["warnings"]
    if backend == "pcache_counting":
        assert second["graphs_compiled"] == first["graphs_compiled"] == 1 and second["ops"] == first["ops"] > 50


def test_bert_with_layer_bodies_is_skipped_and_says_why(tmp_path):
    """With repeated layers traced once (``reuse_layer_bodies``), the entry is not written, and the
    second process captures again, still equal to eager."""
    pytest.importorskip("transformers")
    cache, script = tmp_path / "cache", BERT.format(backend="eager")
    bodies = {"KILN_REUSE_LAYER_BODIES": "1"}
    first = run_script(script, cache, tmp_path / "bert.py", env=bodies)
    assert first["skipped"] == 1 and first["same"] == [True, True]
    second = run_script(script, cache, tmp_path / "bert.py", env=bodies)
    assert second["loaded"] == 0 and second["captured"] == first["captured"] and second["same"] == [True, True]
