"""kiln.export of tiny Hugging Face models (BertModel, GPT2Model) with a dynamic sequence
length: one program for every length in the range, equal to eager on other lengths,
after a save/load round trip too; the ModelOutput comes back as eager's class."""
from __future__ import annotations

import pytest
import torch
from torch.export import Dim

transformers = pytest.importorskip("transformers")

from tests.export.harness import check_export  # noqa: E402


def _bert():
    cfg = transformers.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=128, max_position_embeddings=128, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0)
    return transformers.BertModel(cfg).eval()


def _gpt2():
    cfg = transformers.GPT2Config(vocab_size=1000, n_embd=64, n_layer=2, n_head=2, n_positions=128, use_cache=False,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=2)
    return transformers.GPT2Model(cfg).eval()


def _ids(seq, batch=2):
    return torch.randint(0, 1000, (batch, seq))


@pytest.mark.parametrize("make", [_bert, _gpt2], ids=["bert", "gpt2"])
def test_dynamic_sequence_length(make):
    torch.manual_seed(0)
    model = make()
    seq = Dim("seq", min=2, max=128)
    ep = check_export(model, (_ids(16),), dynamic_shapes={"input_ids": {1: seq}},
                      others=[(_ids(37),), (_ids(128),), (_ids(2),)], atol=1e-5, rtol=1e-5)
    assert [(int(r.lower), int(r.upper)) for r in ep.range_constraints.values()] == [(2, 128)]
    out = ep.module()(_ids(9))
    assert type(out) is type(model(_ids(9)))
    assert set(ep.graph_signature.parameters) == {n for n, _ in model.named_parameters()}


def test_bert_with_attention_mask_and_dynamic_batch():
    torch.manual_seed(0)
    model = _bert()
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=2, max=64)
    ids, mask = _ids(12, 3), torch.ones(3, 12, dtype=torch.long)
    mask[0, 8:] = 0
    mask2 = torch.ones(5, 20, dtype=torch.long)
    mask2[1, 3:] = 0
    check_export(model, (ids,), {"attention_mask": mask},
                 dynamic_shapes={"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}},
                 others=[((_ids(20, 5),), {"attention_mask": mask2})], atol=1e-5, rtol=1e-5, save=False)
