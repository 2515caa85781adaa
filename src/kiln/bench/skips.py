"""The known-failure skip list: the ONE place that says which runs are skipped and why.

Why a list at all: a benchmark that always re-runs a model known to hang or crash
wastes the whole time budget and buries the news in known noise.  Why in one
readable file: a skip is a debt; it must carry its reason and be easy to find and
delete once fixed.  ``kiln bench --no-skip`` runs the skipped entries anyway.

Each :class:`Skip` names a model and a reason.  The optional fields narrow it: an
entry with ``frontend="kiln"`` only skips Kiln's row, ``mode="training"`` only the
training run, and so on.  ``None`` matches anything.

Keep entries short and specific, and link an issue when there is one.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Skip:
    model: str
    reason: str
    frontend: str | None = None   # "kiln" | "torch"
    mode: str | None = None       # "inference" | "training"
    backend: str | None = None    # e.g. "inductor"
    device: str | None = None     # "cpu" | "cuda"

    def matches(self, model: str, frontend: str, mode: str, backend: str, device: str) -> bool:
        wanted = (self.model, self.frontend, self.mode, self.backend, self.device)
        actual = (model, frontend, mode, backend, device)
        return all(w is None or w == a for w, a in zip(wanted, actual))


SKIPS: list[Skip] = [
    # Example of the shape an entry takes (kept commented until a real failure is known):
    # Skip("bigbird", "block-sparse attention: capture recurses through numpy RNG (issue #NN)",
    #      frontend="kiln", mode="training"),
]


def skip_reason(model: str, frontend: str, mode: str, backend: str, device: str) -> str | None:
    """The reason this run is on the skip list, or None when it should run."""
    for entry in SKIPS:
        if entry.matches(model, frontend, mode, backend, device):
            return entry.reason
    return None
