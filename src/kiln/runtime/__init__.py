"""What runs on every compiled call: the code that generated guards and glue call.

Kiln works at two times.  At **compile time** (the first call of a frame, or a guard
miss) ``capture`` traces the frame, a backend compiles the graph, and codegen writes
the guard and glue functions as Python source.  At **call time** those generated
functions run, and everything they call lives here: the error fallback
(``fallback``), the output fix-ups that make a backend's outputs behave as eager's
(``outputs``), what guards and glue ask of and rebuild as real iterators
(``iterators``), the contexts the glue enters again at a break and the autocast state
the guards read (``contexts``), exceptions rebuilt (``objects``), the hooks that make a
compiled backward do only what eager's would (``backward_reach``), the step functions
and loop-exit pickers of a graph break (``steps``), and the compiled callees at a break
(``callees``).  ``caches`` holds the
process-wide caches' registry behind ``kiln.reset()``.  ``guard_plan`` turns an entry's
guards into a plan the C accelerator runs (``_guard_plan.c``, with the optional C++
``_tensor_facts.cpp``), which ``native`` builds on first use and loads.

Why one package: what runs per call is what costs per call, so it is where a faster
implementation goes (the C accelerator of issues #21/#26 lives here), and it must not
pull in the compile-time side.  The rule: modules here import only the standard
library, torch, Kiln's foundation modules (``exc``, ``config``, ``metrics``,
``markers``, ``trace``) and each other; ``tests/internals/test_layers.py`` checks it.
Compile-time code passes in what a run-time object needs (code objects, callbacks)
instead of this package reaching up for it.
"""

# --- the package's face: what the layers above import from it ---
from .backward_reach import NodeWatch, backwards_made_by, boxed, copy_graph, reach_aware  # noqa: F401
from .callees import CalleeCompiler, has_hooks  # noqa: F401
from .contexts import (  # noqa: F401
    autocast_state,
    entered_autocast_exit,
    entered_grad_exit,
    entered_inference_exit,
    no_exit,
)
from .fallback import (  # noqa: F401
    BackendFallbackWarning,
    CHECK_FAILED,
    FALLEN_BACK,
    GraphCall,
    InputSnapshot,
    RngSnapshot,
    Where,
    describe,
    run_frame_as_python,
    warn_fallback,
)
from .guard_changes import describe_change  # noqa: F401
from .guard_plan import Lambda, make_guard, PlanSpec  # noqa: F401
from .iterators import REBUILDERS, SEQUENCE_ITERATORS, advanced, remaining_items  # noqa: F401
from .objects import container_subclass, rebuild_exception, replay_set  # noqa: F401
from .outputs import (  # noqa: F401
    gradients_through_reached_outputs,
    named_like_eager,
    not_a_view,
    rebuild_view,
    view_of_detached,
)
from .steps import LoopExit, StepFactory  # noqa: F401
# --- end of the face ---
