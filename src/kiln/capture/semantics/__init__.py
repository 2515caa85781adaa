"""What Python means: operators, the capture state, and the opcode handlers."""

# --- the package's face: what the layers above import from it ---
from .handlers import HANDLERS  # noqa: F401
from .state import CaptureState  # noqa: F401
# --- end of the face ---
