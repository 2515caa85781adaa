"""Higher-order operators: calls that take a Python function (torch.cond, map,
while_loop, scan, checkpoint, autograd.Function, torch.func transforms,
flex_attention).  Kiln traces the function into its own fx subgraph in a nested
scope (``subgraph.py``) and records one call of the operator in the outer graph."""
