"""A small block-sparse BigBird, for ``kiln explain tests/models/bigbird_script.py:model``."""
import numpy as np
import torch
import transformers

transformers.logging.set_verbosity_error()


def build(mode="eval", seed=0):
    config = transformers.BigBirdConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, vocab_size=1000,
        attention_type="block_sparse", block_size=16, num_random_blocks=2, max_position_embeddings=1024)
    torch.manual_seed(seed)
    m = transformers.BigBirdModel(config)
    return m.train() if mode == "train" else m.eval()


def inputs(batch=1, seq=512, seed=0):
    return torch.randint(0, 1000, (batch, seq), generator=torch.Generator().manual_seed(seed))


model = build("eval")


def model_inputs():
    np.random.seed(0)
    return (inputs(),)
