"""The capture state values read is declared (``values.base.CaptureStateView``), and
``CaptureState`` provides every member of it: a member added to the declaration and
not to the state (or renamed on one side) fails here, not in some rarely traced path."""
import pathlib
import re
import typing

from kiln.capture.semantics.state import CaptureState
from kiln.capture.values.base import CaptureStateView, Tracer


def _declared(protocol) -> set[str]:
    names = set(typing.get_type_hints(protocol))
    names |= {n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")}
    return names


def test_capture_state_has_every_declared_member():
    state = CaptureState(lambda: None)
    missing = sorted(n for n in _declared(CaptureStateView) if not hasattr(state, n))
    assert missing == [], f"CaptureState lacks {missing}"


def test_tracer_interface_names_the_state_view():
    assert typing.get_type_hints(Tracer)["state"] is CaptureStateView


def test_values_read_only_declared_members():
    """Every ``tx.state.X`` read in values/ and hops/ is a declared member."""
    root = pathlib.Path(__file__).resolve().parents[2] / "src" / "kiln" / "capture"
    read = set()
    for path in [*(root / "values").glob("*.py"), *(root / "hops").glob("*.py")]:
        read |= set(re.findall(r"tx\.state\.([A-Za-z_]+)", path.read_text()))
    assert read - _declared(CaptureStateView) == set()
