"""Bytecode -> torch.fx capture: the symbolic interpreter and what it produces."""
