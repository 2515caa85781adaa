"""One frame from bytecode to compiled entry: capture, graph breaks, resume
functions, generated guard and glue code."""

# --- the package's face: what the layers above import from it ---
from .compile_frame import capture, compile_stored_graph, Entry, StoredForm  # noqa: F401
from .codegen import GeneratedCode  # noqa: F401
from .resume import frame_label  # noqa: F401
from .whole_frame import capture_whole  # noqa: F401
# --- end of the face ---
