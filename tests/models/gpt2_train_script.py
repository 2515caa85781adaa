"""A small GPT-2 training step, for ``kiln explain`` / ``kiln report``
tests/models/gpt2_train_script.py:train_step (the bench's gpt2 config, in train mode)."""
import torch

from kiln.bench import registry

SPEC = registry.get("gpt2")
torch.manual_seed(0)
model = SPEC.build(True).train()


def train_step(input_ids, attention_mask, labels):
    model.zero_grad()
    loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
    loss.backward()
    return loss.detach()


def train_step_inputs():
    kw = SPEC.inputs(True, torch.Generator().manual_seed(0))
    return (kw["input_ids"], kw["attention_mask"], kw["labels"])
