"""The basic layer of capture: the version table, instructions, sources, the graph
being built, guards and side effects as data; nothing here knows about values."""

# --- the package's face: what the layers above import from it ---
from .dynamism import ShapePolicy  # noqa: F401
from .graph import (  # noqa: F401
    GraphBuilder,
    SYMBOLIC_TYPES,
    contains_fake,
    data_dependent_expr,
    has_unbacked,
    insert_placeholder,
    placeholder_name,
)
from .guards import GuardCodegen, GuardSet, literal  # noqa: F401
from .instructions import (  # noqa: F401
    BINARY_OP_SYMBOLS,
    CO_ASYNC_GENERATOR,
    CO_COROUTINE,
    CO_GENERATOR,
    CO_ITERABLE_COROUTINE,
    decode,
    enclosing_loops,
    exception_table,
    exit_of,
    index_at_offset,
    loop_exit,
    stack_depths,
    stack_inputs,
)
from .opcodes import INTRINSIC_1, INTRINSIC_2, LAYOUT, ROWS, local_accesses  # noqa: F401
from .operator_table import (  # noqa: F401
    ALL_OPERATOR_FUNCTIONS,
    BINARY_OPS,
    COMPARE_OPS,
    DUNDER,
    INPLACE_OPS,
    INPLACE_TO_BINARY,
    REFLECTED,
    UNARY_OPS,
)
from .side_effects import SideEffects  # noqa: F401
from .sources import (  # noqa: F401
    AsTensorSource,
    AttrSource,
    CallSource,
    ClosureSource,
    ConstSource,
    DictKeysSource,
    DictValuesSource,
    FnSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    Namespace,
    Source,
    param_source,
)
# --- end of the face ---
