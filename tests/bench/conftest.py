"""Fixtures for the ``kiln bench`` tests.

``bench_plugins`` makes the test-only models of ``bench_test_models.py`` visible to
this process and to worker subprocesses (through ``KILN_BENCH_PLUGINS`` and
``PYTHONPATH``), and restores the registry afterwards.
"""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

from kiln.bench import registry

HERE = Path(__file__).resolve().parent


@pytest.fixture
def bench_plugins(monkeypatch):
    registry.names()                       # load the built-in zoo first
    saved = dict(registry._MODELS)
    monkeypatch.setenv(registry.PLUGIN_ENV, "bench_test_models")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.syspath_prepend(str(HERE))
    sys.modules.pop("bench_test_models", None)
    importlib.import_module("bench_test_models")   # registers the test models here
    yield registry
    registry._MODELS.clear()
    registry._MODELS.update(saved)
    sys.modules.pop("bench_test_models", None)
