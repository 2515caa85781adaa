"""Real models over many sequence lengths, and generation with a growing KV cache:
few graphs, no recompile-limit warning, the same outputs as eager."""
from __future__ import annotations

import warnings

import pytest
import torch
import transformers

import kiln
from kiln.bench import registry
from kiln.bench.models_hf import _text
from kiln.cache import KilnWarning

transformers.logging.set_verbosity_error()

SEQ_LENGTHS = [8, 9, 12, 16, 5, 20, 24, 7, 31, 10, 14, 18]


class Counting:
    def __init__(self, backend):
        self.inner = kiln.backends.lookup(backend)
        self.count = 0

    def __call__(self, gm, example_inputs):
        self.count += 1
        return self.inner(gm, example_inputs)


@pytest.mark.slow
@pytest.mark.parametrize("name,backend", [("bert", "eager"), ("bert", "aot_eager"), ("t5", "eager"),
                                          ("llama", "eager"), ("gpt2", "eager")])
def test_model_over_12_sequence_lengths(name, backend):
    kiln.config.raise_on_backend_error = True
    torch.manual_seed(0)
    model = registry.get(name).build(False).eval()
    counter = Counting(backend)
    compiled = kiln.compile(model, backend=counter)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", KilnWarning)
        for seq in SEQ_LENGTHS:
            kwargs = _text(seq, seq2seq=(name == "t5"))(False, torch.Generator().manual_seed(seq))
            expected, got = model(**kwargs), compiled(**kwargs)
            torch.testing.assert_close(got[0], expected[0], atol=1e-4, rtol=1e-4)
    assert counter.count <= 3
    assert not kiln.metrics.breaks


@pytest.mark.slow
def test_gpt2_generate_with_a_growing_cache():
    kiln.config.raise_on_backend_error = True
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=2, vocab_size=1000, n_positions=128,
                                     bos_token_id=1, eos_token_id=2)
    model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(3, 1000, (1, 7), generator=torch.Generator().manual_seed(0))
    expected = model.generate(ids, max_new_tokens=24, do_sample=False, pad_token_id=2)
    counter = Counting("eager")
    model.forward = kiln.compile(model.forward, backend=counter)
    with warnings.catch_warnings():
        warnings.simplefilter("error", KilnWarning)
        got = model.generate(ids, max_new_tokens=24, do_sample=False, pad_token_id=2)
    assert torch.equal(got, expected)
    assert counter.count <= 6
