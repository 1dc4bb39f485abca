"""E4 error amplification.

Our definitions (spec §8.1, §8.2):

- **Corrupted event**: ``status == "error"`` (a failed tool result, a crashed step), or an explicit
  flag ``attrs.corrupted`` / ``attrs.is_error`` (the latter is how Anthropic-style logs mark a
  failed tool result). Untrusted content is *not* corruption: that is the safety metric's concern.
- **Downstream** means reachable along dependencies (``view.py``: explicit edges plus program
  order), so an error inside an agent's context counts against that agent's later events.
- **Initial** corrupted events have no corrupted ancestor. Every other corrupted event descends
  from at least one initial event.
- ``error_amplification = |corrupted, not initial| / max(1, |initial|)``: how many further
  corrupted events each independent first error is followed by. **No corrupted event gives 0**
  (the reference example's value), and several initial errors share the denominator.
"""

from __future__ import annotations

import numpy as np

from ..core.model import Trace
from .view import TraceView, as_view, multi_bfs


def corrupted(x: Trace | TraceView) -> np.ndarray:
    v = as_view(x)
    return v.g.error | v.attr_flag("corrupted", "is_error")


def strict_descendants(v: TraceView, sources: np.ndarray) -> np.ndarray:
    """Mask of nodes reachable from the sources (a mask) by at least one dependency edge."""
    s, d = v.dep_edges
    return multi_bfs(v.deps, d[sources[s]])[0]


def error_amplification(x: Trace | TraceView) -> dict[str, float]:
    """``{"error_amplification", "corrupted", "initial", "downstream"}`` (counts as floats)."""
    v = as_view(x)
    bad = corrupted(v)
    desc = strict_descendants(v, bad)
    initial = int((bad & ~desc).sum())
    downstream = int((bad & desc).sum())
    return {
        "error_amplification": downstream / max(1, initial),
        "corrupted": float(bad.sum()),
        "initial": float(initial),
        "downstream": float(downstream),
    }
