"""What a value is while Kiln traces: tensors, constants, containers, functions, objects."""
from .base import ConstantValue, NullValue, Value, const  # noqa: F401
