"""Higher-order operators: calls that take a Python function (torch.cond, map,
while_loop, scan, checkpoint, autograd.Function, torch.func transforms,
flex_attention).  Kiln traces the function into its own fx subgraph in a nested
scope (``subgraph.py``) and records one call of the operator in the outer graph."""

# --- the package's face: what the layers above import from it ---
from .table import hop_functions  # noqa: F401
# --- end of the face ---
