"""Tiny Hugging Face models for training-step tests: random weights, no downloads,
every dropout probability set to 0.0 so eager, compiled and float64 runs are
deterministic functions of the same weights and seeds."""
from __future__ import annotations

import numpy as np
import torch
import transformers

transformers.logging.set_verbosity_error()

VOCAB = 1000


def no_dropout(config):
    """Set every ``*dropout*`` probability of ``config`` to 0.0."""
    for name in list(vars(config)):
        if "dropout" in name and isinstance(getattr(config, name), float):
            setattr(config, name, 0.0)
    return config


def bert():
    c = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=128, vocab_size=VOCAB, max_position_embeddings=64)
    return transformers.BertForMaskedLM(no_dropout(c))


def gpt2():
    c = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=2, vocab_size=VOCAB, n_positions=64,
                                bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(no_dropout(c))


def t5():
    c = transformers.T5Config(d_model=64, num_layers=2, num_decoder_layers=2, num_heads=2, d_ff=128, d_kv=32,
                              vocab_size=VOCAB, decoder_start_token_id=0, pad_token_id=0)
    return transformers.T5ForConditionalGeneration(no_dropout(c))


def bigbird():
    c = transformers.BigBirdConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                   intermediate_size=128, vocab_size=VOCAB, attention_type="block_sparse",
                                   block_size=16, num_random_blocks=2, max_position_embeddings=1024)
    return transformers.BigBirdForMaskedLM(no_dropout(c))


BUILDERS = {"bert": bert, "gpt2": gpt2, "t5": t5, "bigbird": bigbird}
SEQ = {"bert": 16, "gpt2": 16, "t5": 16, "bigbird": 512}


def build(name, seed=0):
    torch.manual_seed(seed)
    return BUILDERS[name]()


def batch(name, batch_size=2, seed=0):
    """Keyword inputs with labels for one training step."""
    seq = SEQ[name]
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (batch_size, seq), generator=g)
    labels = torch.randint(1, VOCAB, (batch_size, seq), generator=g)
    if name == "t5":
        return {"input_ids": ids, "labels": labels[:, : seq // 2].contiguous()}
    if name == "gpt2":
        return {"input_ids": ids, "labels": ids.clone()}
    return {"input_ids": ids, "attention_mask": torch.ones(batch_size, seq, dtype=torch.long), "labels": labels}


def seed_all(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
