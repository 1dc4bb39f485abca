"""What the reward families share: their result type, the step event types, a mean. Trace
accessors are ``core.access``; hooks are loaded by ``core.plugins``."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

#: Event types that count as a sub-agent's own step when deciding whether it was useful (R7's
#: r_parallel). Critical Steps use measure's step definition (``measure.parallelism.STEP_TYPES``).
STEP_TYPES = frozenset(("orchestrator_decision", "message", "tool_call", "return", "aggregate"))


class RewardOut(msgspec.Struct):
    """Named reward channels of one trace, the family each belongs to, and per-event scores.

    ``per_event[channel][event_id]`` holds the dense signal behind a process-like channel (R4-R6),
    so credit methods can use it without recomputing.
    """

    channels: dict[str, float] = msgspec.field(default_factory=dict)
    family: dict[str, str] = msgspec.field(default_factory=dict)
    per_event: dict[str, dict[str, float]] = msgspec.field(default_factory=dict)

    def add(self, name: str, value: float, family: str) -> None:
        self.channels[name] = float(value)
        self.family[name] = family

    def merge(self, other: RewardOut) -> RewardOut:
        self.channels.update(other.channels)
        self.family.update(other.family)
        self.per_event.update(other.per_event)
        return self


def mean(xs: Iterable[float]) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0
