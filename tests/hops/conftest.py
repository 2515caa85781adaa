"""HOP tests run with internal errors raised (never silently eager) and a clean cache."""
from __future__ import annotations

import dataclasses

import pytest

import kiln
from kiln.config import config


@pytest.fixture(autouse=True)
def strict_kiln():
    saved = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    config.suppress_errors = False
    config.raise_on_backend_error = True   # a backend failing on a HOP must fail the test
    kiln.reset()
    yield config
    kiln.reset()
    for name, value in saved.items():
        setattr(config, name, value)
