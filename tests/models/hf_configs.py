"""Small Hugging Face models built from configs with random weights (no downloads)."""
import torch
import transformers

transformers.logging.set_verbosity_error()


def bert():
    c = transformers.BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=256, vocab_size=1000)
    return transformers.BertModel(c)


def gpt2():
    c = transformers.GPT2Config(n_embd=128, n_layer=2, n_head=2, vocab_size=1000, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2Model(c)


def t5():
    c = transformers.T5Config(d_model=128, num_layers=2, num_heads=2, d_ff=256, d_kv=64, vocab_size=1000,
                              decoder_start_token_id=0)
    return transformers.T5Model(c)


def inputs(name, batch, seq=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 1000, (batch, seq), generator=g)
    if name == "t5":
        return (ids,), {"decoder_input_ids": torch.randint(0, 1000, (batch, seq // 2), generator=g)}
    return (ids,), {"attention_mask": torch.ones(batch, seq, dtype=torch.long)}


BUILDERS = {"bert": bert, "gpt2": gpt2, "t5": t5}
