"""Shared fixtures for the backend tests: Kiln's config is restored after every test."""
from __future__ import annotations

import dataclasses

import pytest

from kiln.config import config


@pytest.fixture(autouse=True)
def restore_kiln_config():
    saved = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    yield config
    for name, value in saved.items():
        setattr(config, name, value)
