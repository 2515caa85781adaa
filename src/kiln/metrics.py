"""Process-wide counters that the benchmark harness and ``kiln.explain`` read.

Kept deliberately dumb: plain integers and lists that Kiln's capture path appends to.
``kiln.reset()`` clears them.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BreakRecord:
    reason: str
    location: str | None = None
    source_line: str | None = None
    fix: str | None = None        # how to write it so that it is captured (Unsupported.fix)

    def __str__(self) -> str:
        loc = f" at {self.location}" if self.location else ""
        fix = f" (fix: {self.fix})" if self.fix else ""
        return f"{self.reason}{loc}{fix}"


@dataclass
class Metrics:
    frames_captured: int = 0     # successful captures (cache entries made)
    graphs: int = 0              # graphs handed to a backend
    ops: int = 0                 # call_function/call_method/call_module nodes in those graphs
    recompiles: int = 0          # captures of a code object that already had an entry
    eager_fallbacks: int = 0     # frames that ran eagerly because capture failed
    backend_fallbacks: int = 0   # graphs that ran eagerly because the backend failed
    ddp_split_graphs: int = 0    # graphs split at DDP bucket boundaries (backends/ddp_split.py)
    ddp_stages: int = 0          # stages those graphs were split into
    entries_loaded: int = 0      # entries loaded from the persistent cache instead of captured
    cache_skipped: int = 0       # entries the persistent cache could not write (cache_skip events)
    capture_seconds: float = 0.0
    backend_seconds: float = 0.0
    breaks: list = field(default_factory=list)   # BreakRecord per graph break / fallback

    def reset(self) -> None:
        fresh = Metrics()
        self.__dict__.update(fresh.__dict__)


metrics = Metrics()
