"""Issue: BertModel, GPT2Model and T5Model compile with fullgraph=True into one graph
in eval mode, match eager, do not recompile for new values, recompile once for a new
batch size."""
import pytest
import torch

import kiln
from kiln.testing import CompileCounter

from .hf_configs import BUILDERS, inputs

pytestmark = pytest.mark.slow


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) or hasattr(out, "to_tuple") else out


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_fullgraph_one_graph_and_recompiles(name):
    torch.manual_seed(0)
    model = BUILDERS[name]().eval()
    cc = CompileCounter()
    cmodel = kiln.compile(model, backend=cc, fullgraph=True)
    for seed in (0, 1, 2):
        args, kwargs = inputs(name, batch=2, seed=seed)
        with torch.no_grad():
            expected = model(*args, **kwargs)
            actual = cmodel(*args, **kwargs)
        assert type(actual) is type(expected)
        torch.testing.assert_close(_first(actual), _first(expected), atol=1e-5, rtol=1e-5)
    assert cc.frame_count == 1, "one graph, no recompiles for new values of the same shape"
    assert kiln.metrics.recompiles == 0
    args, kwargs = inputs(name, batch=3, seed=3)
    with torch.no_grad():
        torch.testing.assert_close(_first(cmodel(*args, **kwargs)), _first(model(*args, **kwargs)),
                                   atol=1e-5, rtol=1e-5)
    assert cc.frame_count == 2
    assert kiln.metrics.recompiles == 1
