"""Differential fuzzer of Kiln against eager PyTorch (issue #13).

Why: hand-written capture tests check the cases someone thought of; silent wrong
results come from combinations nobody wrote down (a view returned next to a detached
alias, a Python float global meeting an integer tensor, a guard on a list that shrank).
:mod:`tests.fuzz.gen` writes small random programs as source text, :mod:`tests.fuzz.oracle`
runs each one eagerly and compiled (separate module namespaces, identical inputs, several
calls that change types/dtypes/shapes/requires_grad/values) and lists every difference,
:mod:`tests.fuzz.minimize` shrinks a failing program, and ``python -m tests.fuzz`` runs a
campaign.  Importing this package imports nothing heavy.
"""
