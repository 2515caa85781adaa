"""Bytecode -> torch.fx capture: the symbolic interpreter and what it produces."""

# --- the package's face: what the layers above import from it ---
from .basics import ShapePolicy  # noqa: F401
from .frames import capture, compile_stored_graph, Entry, GeneratedCode, StoredForm  # noqa: F401
from .frames import capture_whole  # noqa: F401
from .frames import frame_label  # noqa: F401
# --- end of the face ---
