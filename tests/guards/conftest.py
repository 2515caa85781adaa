"""Every guard test runs twice: with the C accelerator's guard plans and with the
generated Python guards (``kiln.config.no_c``), which are the specification.  The two
must take the same decisions, so each test's expectations hold under both."""
import pytest

import kiln
from kiln.runtime import native


@pytest.fixture(autouse=True, params=["C", "Python"])
def guard_path(request):
    saved = kiln.config.no_c
    kiln.config.no_c = request.param == "Python"
    if request.param == "C" and native.guard_plan_module() is None:
        kiln.config.no_c = saved
        pytest.skip(f"the C accelerator is not built here: {native.unavailable_reason()}")
    kiln.reset()
    yield request.param
    kiln.config.no_c = saved
    kiln.reset()
