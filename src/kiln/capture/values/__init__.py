"""What a value is while Kiln traces: tensors, constants, containers, functions, objects."""
from .base import ConstantValue, NullValue, Value, const  # noqa: F401

# --- the package's face: what the layers above import from it ---
from .attributes import DELETED, GENERIC_SETATTRS, lookup_class_attr  # noqa: F401
from .base import (  # noqa: F401
    AttributeMissing,
    NULL,
    TracedException,
    new_serial,
    raise_python,
    type_lookup,
    type_name,
)
from .builder import wrap  # noqa: F401
from .builtins import real_classes  # noqa: F401
from .callables import torch_special_functions  # noqa: F401
from .containers import (  # noqa: F401
    DictValue,
    DictViewValue,
    ListValue,
    SequenceValue,
    SetValue,
    SliceValue,
    TupleValue,
    key_of,
    set_items,
)
from .contexts import GradModeValue, GradModeWrappedFunction, WithExit  # noqa: F401
from .exceptions import ExceptionValue  # noqa: F401
from .functions import BoundMethodValue, CellValue, NestedFunctionValue, UserFunctionValue  # noqa: F401
from .generators import GeneratorValue  # noqa: F401
from .iterators import IteratorValue, as_iterator  # noqa: F401
from .new_objects import NewObjectValue  # noqa: F401
from .nn_modules import ModuleValue  # noqa: F401
from .numpy_arrays import NumpyArrayValue, numpy_operator  # noqa: F401
from .objects import ClassValue, ObjectValue, slot_names  # noqa: F401
from .super_value import make_super  # noqa: F401
from .symbolic import SizeValue, SymNodeValue  # noqa: F401
from .tensor import TensorValue, graph_call  # noqa: F401
from .tensor_subclasses import without_subclass_dispatch  # noqa: F401
# --- end of the face ---
