"""Learning orchestration decisions from traces."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .policies import TracePolicy


def load_policy(path: str, *, explore: bool = False) -> TracePolicy:
    """Any saved decision policy (``policies.load_policy``; imported on first use, it pulls in numpy
    inference only)."""
    from .policies import load_policy as load

    return load(path, explore=explore)
