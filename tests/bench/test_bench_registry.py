"""The model registry: selection rules, and every model builds and runs eagerly."""
from __future__ import annotations

import pytest
import torch

from kiln.bench import registry
from kiln.bench.runner import SEED, make_step, seed_all

HF_FAMILIES = {"bert", "gpt2", "t5", "bigbird", "bart", "distilbert", "albert", "roberta", "electra", "opt",
               "llama", "mistral", "gpt_neo", "vit", "whisper",
               # models_hf_more (issue #14): Llama-layout decoders, memories, vision-text, audio, seq2seq
               "qwen2", "gemma", "phi3", "granite", "phi", "xlnet", "clip", "siglip", "wav2vec2", "mbart",
               "pegasus", "deberta_v2"}
LOCAL = {"mlp", "cnn", "lstm", "transformer_encoder"}


def test_zoo_has_the_promised_models():
    names = set(registry.names())
    assert HF_FAMILIES <= names and LOCAL <= names
    assert {s.name for s in registry.select("hf")} >= HF_FAMILIES
    assert len(registry.select("hf")) >= 27


def test_quick_suite_is_small():
    quick = [s.name for s in registry.select("quick")]
    assert 3 <= len(quick) <= 4
    assert "mlp" in quick


def test_select_only_pattern_and_all():
    assert [s.name for s in registry.select("quick", only=["t5"])] == ["t5"]
    assert [s.name for s in registry.select("all", pattern=["gpt"])] == ["gpt2", "gpt_neo"]
    assert len(registry.select("all")) == len(registry.names())


def test_unknown_names_list_the_known_ones():
    with pytest.raises(KeyError, match=r"unknown benchmark model 'nope'; known models: .*bert"):
        registry.get("nope")
    with pytest.raises(KeyError, match=r"unknown suite 'huge'; known suites: quick"):
        registry.select("huge")


def test_register_refuses_duplicates_and_bad_names():
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("mlp", lambda t: None, lambda t, g: {})
    with pytest.raises(ValueError, match="short identifiers"):
        registry.register("has space", lambda t: None, lambda t, g: {})


def test_default_loss():
    assert registry.default_loss({"loss": torch.tensor(2.0)}).item() == 2.0
    assert registry.default_loss(torch.ones(3)).item() == 3.0
    with pytest.raises(TypeError, match="loss="):
        registry.default_loss("text")


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_every_model_builds_and_runs_eagerly(training):
    """All of the zoo, tiny configs: a few seconds for both modes together."""
    for spec in registry.select("all"):
        seed_all()
        model = spec.build(training).train(training)
        inputs = spec.inputs(training, torch.Generator().manual_seed(SEED))
        out = make_step(spec, training, model)(model, inputs)
        assert out, spec.name
        assert all(torch.isfinite(t).all() for t in out.values() if t.dtype.is_floating_point), spec.name
        if training:
            assert "loss" in out and any(k.startswith("grad.") for k in out), spec.name


def test_models_are_deterministic_and_dropout_free():
    spec = registry.get("bert")
    outs = []
    for _ in range(2):
        seed_all()
        model = spec.build(True).train(True)   # train mode: dropout would show up here
        inputs = spec.inputs(True, torch.Generator().manual_seed(SEED))
        outs.append(make_step(spec, True, model)(model, inputs)["loss"])
    assert torch.equal(outs[0], outs[1])
