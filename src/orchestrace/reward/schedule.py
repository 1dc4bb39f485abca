"""Annealing schedules for reward weights (PARL anneals its auxiliary weights to 0)."""

from __future__ import annotations

import math
from typing import Literal

import msgspec


class Schedule(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A weight multiplier as a function of the training step.

    * ``constant``: ``start``.
    * ``linear``: ``start -> end`` over ``steps`` steps, then ``end``.
    * ``cosine``: half-cosine from ``start`` to ``end`` over ``steps`` steps, then ``end``.
    * ``step``: ``values[i]`` where i = number of ``boundaries`` <= step (len(values) = len(boundaries) + 1).
    """

    kind: Literal["constant", "linear", "cosine", "step"] = "constant"
    start: float = 1.0
    end: float = 0.0
    steps: int = 1
    boundaries: list[int] = msgspec.field(default_factory=list)
    values: list[float] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        if self.kind in ("linear", "cosine") and self.steps <= 0:
            raise ValueError("schedule steps must be > 0")
        if self.kind == "step" and len(self.values) != len(self.boundaries) + 1:
            raise ValueError("a step schedule needs len(values) == len(boundaries) + 1")
        if self.kind == "step" and self.boundaries != sorted(self.boundaries):
            raise ValueError("step boundaries must be increasing")

    def __call__(self, step: int) -> float:
        if self.kind == "constant":
            return self.start
        if self.kind == "step":
            return self.values[sum(b <= step for b in self.boundaries)]
        frac = min(max(step, 0) / self.steps, 1.0)
        if self.kind == "linear":
            return self.start + (self.end - self.start) * frac
        return self.end + (self.start - self.end) * 0.5 * (1.0 + math.cos(math.pi * frac))
