"""Shared test setup: every test starts with empty Kiln caches, and internal errors
raise instead of silently falling back to eager (so a Kiln bug fails the test)."""
import pytest

import kiln


@pytest.fixture(autouse=True)
def _fresh_kiln():
    kiln.reset()
    saved = (kiln.config.suppress_errors, kiln.config.recompile_limit, kiln.config.raise_on_backend_error)
    kiln.config.suppress_errors = False
    yield
    kiln.config.suppress_errors, kiln.config.recompile_limit, kiln.config.raise_on_backend_error = saved
    kiln.reset()
