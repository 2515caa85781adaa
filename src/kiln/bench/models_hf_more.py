"""More Hugging Face architectures (issue #14): the constructs real models use.

Same rules as ``models_hf`` (small configs, random weights, dropout 0, no cache
unless the model's point is its memory), chosen for what they make Kiln capture:
decoders with the Llama layout and their variations (biased q/k/v, scaled
embeddings, fused projections, multipliers, partial rotary), a model that carries
memories between segments (XLNet's ``mems``), a vision-text model (CLIP, contrastive
loss), an audio model whose positional convolution is weight-normalised (wav2vec2,
``torch.nn.utils.parametrize``), an encoder-decoder with pre-norm layers (mBART) and
an encoder with disentangled relative attention (DeBERTa-v2).
"""
from __future__ import annotations

import torch

from .models_hf import BATCH, SEQ, VOCAB, _builder, _DECODER, _BERTISH, _sized, _text
from .registry import register


def _vision_text(seq=16, size=32):
    """Token ids and images for a contrastive model; training asks it for its loss."""

    def make(seq: int, batch: int):
        def inputs(training: bool, gen: torch.Generator) -> dict:
            ids = torch.randint(3, VOCAB, (batch, seq), generator=gen)
            kw = {"input_ids": ids, "attention_mask": torch.ones(batch, seq, dtype=torch.long),
                  "pixel_values": torch.randn(batch, 3, size, size, generator=gen)}
            if training:
                kw["return_loss"] = True
            return kw

        return inputs

    return _sized(make)(seq, BATCH)


def _waveform(samples=4000, vocab=32, target=4):
    """Raw audio; training adds CTC labels.  ``--dynamic`` varies the batch size only."""

    def make(seq: int, batch: int):
        def inputs(training: bool, gen: torch.Generator) -> dict:
            kw = {"input_values": torch.randn(batch, samples, generator=gen)}
            if training:
                kw["labels"] = torch.randint(1, vocab, (batch, target), generator=gen)
            return kw

        return inputs

    return _sized(make)(0, BATCH)


register("qwen2", _builder("Qwen2Config", "Qwen2Model", "Qwen2ForCausalLM", **_DECODER), _text(),
         suites=("hf",), description="Qwen2 decoder (Llama layout, biased q/k/v)")
register("gemma", _builder("GemmaConfig", "GemmaModel", "GemmaForCausalLM", head_dim=16, **_DECODER), _text(),
         suites=("hf",), description="Gemma decoder (scaled embeddings, GeGLU, (1 + w) RMSNorm)")
register("phi3", _builder("Phi3Config", "Phi3Model", "Phi3ForCausalLM", pad_token_id=0, bos_token_id=1, eos_token_id=2, **_DECODER), _text(),
         suites=("hf",), description="Phi-3 decoder (fused qkv and gate/up projections)")
register("granite", _builder("GraniteConfig", "GraniteModel", "GraniteForCausalLM", embedding_multiplier=2.0,
                             residual_multiplier=0.5, attention_multiplier=0.25, logits_scaling=4.0, **_DECODER),
         _text(), suites=("hf",), description="Granite decoder (embedding/residual/attention multipliers)")
register("phi", _builder("PhiConfig", "PhiModel", "PhiForCausalLM", vocab_size=VOCAB, hidden_size=64,
                         intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         max_position_embeddings=128, partial_rotary_factor=0.5),
         _text(), suites=("hf",), description="Phi decoder (parallel attention/MLP, partial rotary)")
register("xlnet", _builder("XLNetConfig", "XLNetModel", "XLNetLMHeadModel", vocab_size=VOCAB, d_model=64, n_layer=2,
                           n_head=2, d_inner=128, mem_len=16, use_mems_eval=True, use_mems_train=True),
         _text(), suites=("hf",), description="XLNet (two-stream relative attention, memories)")
register("clip", _builder("CLIPConfig", "CLIPModel", "CLIPModel",
                          text_config=dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                                           num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=32,
                                           bos_token_id=1, eos_token_id=2),
                          vision_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                             num_attention_heads=2, image_size=32, patch_size=8),
                          projection_dim=32),
         _vision_text(), suites=("hf",), description="CLIP vision-text (contrastive loss)")
register("wav2vec2", _builder("Wav2Vec2Config", "Wav2Vec2Model", "Wav2Vec2ForCTC", vocab_size=32, hidden_size=64,
                              num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                              conv_dim=(32,) * 7, num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                              mask_time_prob=0.0, pad_token_id=0, ctc_zero_infinity=True),
         _waveform(), suites=("hf",), description="wav2vec2 speech encoder (weight-normalised conv, CTC)")
register("mbart", _builder("MBartConfig", "MBartModel", "MBartForConditionalGeneration", vocab_size=VOCAB, d_model=64,
                           encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
                           encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=128, pad_token_id=1),
         _text(seq2seq=True), suites=("hf",), description="mBART encoder-decoder (pre-norm)")
register("deberta_v2", _builder("DebertaV2Config", "DebertaV2Model", "DebertaV2ForMaskedLM",
                                relative_attention=True, position_buckets=32, pos_att_type=["p2c", "c2p"],
                                **_BERTISH),
         _text(), suites=("hf",), description="DeBERTa-v2 (disentangled relative attention)")
register("siglip", _builder("SiglipConfig", "SiglipModel", "SiglipModel",
                            text_config=dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                                             num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=32),
                            vision_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                               num_attention_heads=2, image_size=32, patch_size=8)),
         _vision_text(), suites=("hf",), description="SigLIP vision-text (sigmoid loss, attention-pooling head)")
register("pegasus", _builder("PegasusConfig", "PegasusModel", "PegasusForConditionalGeneration", vocab_size=VOCAB,
                             d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                             decoder_attention_heads=2, encoder_ffn_dim=128, decoder_ffn_dim=128,
                             max_position_embeddings=128, pad_token_id=0, decoder_start_token_id=0),
         _text(seq2seq=True), suites=("hf",), description="Pegasus encoder-decoder (sinusoidal positions)")
