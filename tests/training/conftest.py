"""Training tests run with backend failures raised, not hidden by the eager fallback
(a backend that silently fell back to eager would trivially match eager)."""
import pytest
import torch

import kiln


@pytest.fixture(autouse=True)
def _raise_backend_errors():
    kiln.config.raise_on_backend_error = True   # tests/conftest.py restores it afterwards
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
