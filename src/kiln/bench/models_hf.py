"""Hugging Face models built from small configs with random weights.

Why small configs: the harness measures the *frontend* (capture, guards, breaks,
per-call overhead) and accuracy, not the arithmetic throughput of a 100M parameter
model, and it has to run on two CPU cores.  Every model keeps the real architecture
(the Python code paths Kiln has to capture are the same) at hidden size 64,
2 layers, 2-4 heads and a vocabulary of 1000.  Nothing is ever downloaded: models
are constructed from a config object, weights come from the seeded generator.

Each entry names the config class, the bare model class (inference) and the model
class with a head (training, called with labels so it returns ``.loss``).  Dropout
probabilities are forced to 0 and ``use_cache`` to False, so eager and compiled runs
are comparable and the outputs are plain tensors.
"""
from __future__ import annotations

import torch

from .registry import register

BATCH = 2
SEQ = 32
VOCAB = 1000


def _zero_dropout(config) -> None:
    """Set every dropout/layerdrop probability on a config to 0."""
    for key, value in config.to_dict().items():
        k = key.lower()
        droppy = "dropout" in k or "drop_prob" in k or k.endswith("_pdrop") or "layerdrop" in k
        if droppy and isinstance(value, (int, float)) and not isinstance(value, bool):
            setattr(config, key, 0.0)


def _builder(config_cls: str, model_cls: str, train_cls: str, **config_kwargs):
    """A ``build(training)`` that makes the config and the right model class."""

    def build(training: bool):
        # optional dependency (the ``models`` extra), ~0.6 s to import: only when a model is built
        import transformers

        config = getattr(transformers, config_cls)(**config_kwargs)
        _zero_dropout(config)
        if hasattr(config, "use_cache"):
            config.use_cache = False
        cls = getattr(transformers, train_cls if training else model_cls)
        return cls(config)

    return build


def _sized(make):
    """``make(seq, batch)`` -> an inputs function at that size, with ``.at`` for ``--dynamic``."""

    def at(seq: int, batch: int):
        inputs = make(seq, batch)
        inputs.at = at
        return inputs

    return at


def _text(seq=SEQ, *, seq2seq=False, vocab=VOCAB, batch=BATCH):
    """Inputs for a text model: token ids, mask, decoder ids or labels as needed.

    ``kiln bench --dynamic`` varies both the sequence length and the batch size
    (through ``.at``); a seq2seq decoder gets half the length, at least 1.
    """

    def make(seq: int, batch: int):
        def inputs(training: bool, gen: torch.Generator) -> dict:
            ids = torch.randint(3, vocab, (batch, seq), generator=gen)
            kw = {"input_ids": ids, "attention_mask": torch.ones(batch, seq, dtype=torch.long)}
            half = max(seq // 2, 1)
            if training:
                # MLM/causal heads take the ids as labels; seq2seq heads shift labels into
                # decoder inputs themselves.
                kw["labels"] = ids.clone() if not seq2seq else torch.randint(3, vocab, (batch, half), generator=gen)
            elif seq2seq:
                kw["decoder_input_ids"] = torch.randint(3, vocab, (batch, half), generator=gen)
            return kw

        return inputs

    return _sized(make)(seq, batch)


def _image(size=32, classes=10):
    """Images at a fixed resolution; ``--dynamic`` varies the batch size only."""

    def make(seq: int, batch: int):
        def inputs(training: bool, gen: torch.Generator) -> dict:
            kw = {"pixel_values": torch.randn(batch, 3, size, size, generator=gen)}
            if training:
                kw["labels"] = torch.randint(0, classes, (batch,), generator=gen)
            return kw

        return inputs

    return _sized(make)(0, BATCH)


def _audio(mels=16, frames=64, target=16):
    """Fixed-length features (Whisper checks their length); ``--dynamic`` varies the batch size only."""

    def make(seq: int, batch: int):
        def inputs(training: bool, gen: torch.Generator) -> dict:
            kw = {"input_features": torch.randn(batch, mels, frames, generator=gen)}
            ids = torch.randint(3, VOCAB, (batch, target), generator=gen)
            kw["labels" if training else "decoder_input_ids"] = ids
            return kw

        return inputs

    return _sized(make)(0, BATCH)


_BERTISH = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=128, max_position_embeddings=128)
_DECODER = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)

register("bert", _builder("BertConfig", "BertModel", "BertForMaskedLM", **_BERTISH), _text(),
         suites=("quick", "hf"), description="BERT encoder")
register("gpt2", _builder("GPT2Config", "GPT2Model", "GPT2LMHeadModel", vocab_size=VOCAB, n_embd=64, n_layer=2,
                          n_head=2, n_positions=128, bos_token_id=1, eos_token_id=2),
         _text(), suites=("quick", "hf"), description="GPT-2 decoder")
register("t5", _builder("T5Config", "T5Model", "T5ForConditionalGeneration", vocab_size=VOCAB, d_model=64, d_kv=32,
                        d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=2, decoder_start_token_id=0),
         _text(seq2seq=True), suites=("quick", "hf"), description="T5 encoder-decoder (relative position bias)")
register("bigbird", _builder("BigBirdConfig", "BigBirdModel", "BigBirdForMaskedLM", vocab_size=VOCAB, hidden_size=64,
                             num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                             max_position_embeddings=512, attention_type="block_sparse", block_size=16,
                             num_random_blocks=2),
         _text(seq=512, batch=1), suites=("hf",), description="BigBird block-sparse attention (numpy randomness)")
register("bart", _builder("BartConfig", "BartModel", "BartForConditionalGeneration", vocab_size=VOCAB, d_model=64,
                          encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
                          encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=128),
         _text(seq2seq=True), suites=("hf",), description="BART encoder-decoder")
register("distilbert", _builder("DistilBertConfig", "DistilBertModel", "DistilBertForMaskedLM", vocab_size=VOCAB,
                                dim=64, n_layers=2, n_heads=2, hidden_dim=128, max_position_embeddings=128),
         _text(), suites=("hf",), description="DistilBERT encoder")
register("albert", _builder("AlbertConfig", "AlbertModel", "AlbertForMaskedLM", embedding_size=32, **_BERTISH),
         _text(), suites=("hf",), description="ALBERT (shared layers)")
register("roberta", _builder("RobertaConfig", "RobertaModel", "RobertaForMaskedLM", pad_token_id=1, **_BERTISH),
         _text(), suites=("hf",), description="RoBERTa encoder")
register("electra", _builder("ElectraConfig", "ElectraModel", "ElectraForMaskedLM", embedding_size=32, **_BERTISH),
         _text(), suites=("hf",), description="ELECTRA generator")
register("opt", _builder("OPTConfig", "OPTModel", "OPTForCausalLM", vocab_size=VOCAB, hidden_size=64, ffn_dim=128,
                         num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=128,
                         word_embed_proj_dim=64),
         _text(), suites=("hf",), description="OPT decoder")
register("llama", _builder("LlamaConfig", "LlamaModel", "LlamaForCausalLM", **_DECODER), _text(),
         suites=("hf",), description="Llama decoder (RoPE, GQA, RMSNorm)")
register("mistral", _builder("MistralConfig", "MistralModel", "MistralForCausalLM", sliding_window=16, **_DECODER),
         _text(), suites=("hf",), description="Mistral decoder (sliding window)")
register("gpt_neo", _builder("GPTNeoConfig", "GPTNeoModel", "GPTNeoForCausalLM", vocab_size=VOCAB, hidden_size=64,
                             num_layers=2, num_heads=2, attention_types=[[["global", "local"], 1]], window_size=16,
                             max_position_embeddings=128, bos_token_id=1, eos_token_id=2),
         _text(), suites=("hf",), description="GPT-Neo (global + local attention)")
register("vit", _builder("ViTConfig", "ViTModel", "ViTForImageClassification", image_size=32, patch_size=8,
                         hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                         num_labels=10),
         _image(), suites=("hf",), description="Vision Transformer")
register("whisper", _builder("WhisperConfig", "WhisperModel", "WhisperForConditionalGeneration", vocab_size=VOCAB,
                             d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                             decoder_attention_heads=2, encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16,
                             max_source_positions=32, max_target_positions=64, pad_token_id=0, bos_token_id=1,
                             eos_token_id=2, decoder_start_token_id=1, suppress_tokens=None,
                             begin_suppress_tokens=None),
         _audio(), suites=("hf",), description="Whisper speech encoder-decoder")
