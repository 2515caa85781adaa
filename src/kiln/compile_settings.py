"""What one ``kiln.compile(...)`` call asked for, as one frozen object.

``backend``, ``fullgraph``, ``dynamic``, ``mode`` and ``options`` decide how every frame
compiled under that call is captured and compiled, so they travel together: from
``kiln.compile`` through ``api.Compiler`` to the frame caches (``cache.cache_for``) and
the capture (``capture.frames.compile_frame``), and to the frames a graph break makes.  Two
compiled functions share cache entries exactly when their settings have the same
``key()``, the one place that key is built.

Why frozen: entries are cached under the key, so settings that changed after the
fact would leave entries compiled under other settings in the cache.  This module
checks only what needs no backend (types, the mode/options pairing); what a backend
accepts as ``mode`` and ``options`` is the backend's to say (``api`` asks it).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Mapping

#: the modes torch.compile documents (torch._inductor.list_mode_options may know more)
TORCH_COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True, eq=False)
class CompileSettings:
    """The settings of one ``kiln.compile`` call (see the module docstring).

    ``backend``: the resolved backend callable (the user's own, or the registry's for
    a name); caches are keyed by its identity.  ``mode``: torch.compile's ``mode``
    (None and "default" ask for nothing).  ``options``: torch.compile's ``options``
    (inductor config), kept as sorted ``(name, value)`` pairs so the object stays frozen.
    """

    backend: Callable
    backend_name: str
    fullgraph: bool = False
    dynamic: bool | None = None
    mode: str | None = None
    options: tuple = ()

    def __post_init__(self):
        if not isinstance(self.fullgraph, bool):
            raise TypeError(f"kiln.compile: fullgraph must be a bool, got {type(self.fullgraph).__name__}")
        if self.dynamic not in (None, True, False):
            raise TypeError(f"kiln.compile: dynamic must be None, True or False, got {self.dynamic!r}")
        if self.mode is not None and not isinstance(self.mode, str):
            raise TypeError(f"kiln.compile: mode must be a str (one of {', '.join(map(repr, TORCH_COMPILE_MODES))}) "
                            f"or None, got {type(self.mode).__name__}")
        if not isinstance(self.options, tuple):
            object.__setattr__(self, "options", freeze_options(self.options))

    @property
    def asks_backend(self) -> bool:
        """Whether ``mode`` or ``options`` ask the backend for something beyond its default."""
        return self.mode not in (None, "default") or bool(self.options)

    def options_dict(self) -> dict:
        return dict(self.options)

    def options_key(self) -> tuple:
        """``options`` as a hashable tuple (values that do not hash are keyed by their repr)."""
        return tuple((name, _hashable(value)) for name, value in self.options)

    def key(self) -> tuple:
        """What separates frame caches (and compiled module classes): the one definition.

        The backend by identity (the user's callable; the compiler keeps it alive, so its
        id is not reused), then every setting that changes what is compiled."""
        return (id(self.backend), self.fullgraph, self.dynamic, self.mode, self.options_key())

    def for_nested_frames(self) -> "CompileSettings":
        """The settings of frames a graph break makes (continuations, callees): the same,
        without fullgraph, which a capture that breaks cannot have had."""
        return self if not self.fullgraph else dataclasses.replace(self, fullgraph=False)


def freeze_options(options) -> tuple:
    """torch.compile's ``options`` dict as sorted ``(name, value)`` pairs."""
    if options is None:
        return ()
    if not isinstance(options, Mapping):
        raise TypeError(f"kiln.compile: options must be a dict of inductor settings, got {type(options).__name__}")
    for name in options:
        if not isinstance(name, str):
            raise TypeError(f"kiln.compile: option names must be str, got {name!r}")
    return tuple(sorted(options.items()))


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return ("unhashable", type(value).__name__, repr(value))
    return value
