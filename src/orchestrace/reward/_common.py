"""Small helpers shared by the reward families: event attributes, sub-agents, tool-call pairing."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from ..core.model import Event, Trace

#: Event types that count as a sub-agent's own step when deciding whether it was useful (R7's
#: r_parallel). Critical Steps use measure's step definition (``measure.parallel.STEP_TYPES``).
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


def attr(e: Event, *keys: str) -> Any:
    """First present key among ``e.attrs[k]`` then ``e.extra[k]``; None when absent."""
    for src in (e.attrs, e.extra):
        if src:
            for k in keys:
                v = src.get(k)
                if v is not None:
                    return v
    return None


def num(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return float(v)
    return None


def mean(xs: Iterable[float]) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def spawned(trace: Trace) -> dict[str, Event]:
    """Sub-agent name -> the (first) spawn event that created it."""
    out: dict[str, Event] = {}
    for e in sorted(trace.events, key=lambda e: e.t):
        if e.type == "spawn" and e.to and e.to not in out:
            out[e.to] = e
    return out


def tool_pairs(trace: Trace) -> list[tuple[Event, Event | None]]:
    """Each tool_call with its tool_result: by ``call_id``, else the first later open result of the same tool."""
    calls = [e for e in trace.events if e.type == "tool_call"]
    results = sorted((e for e in trace.events if e.type == "tool_result"), key=lambda e: e.t)
    by_id = {r.call_id: r for r in results if r.call_id}
    used: set[str] = set()
    pairs: list[tuple[Event, Event | None]] = []
    for c in sorted(calls, key=lambda e: e.t):
        r = by_id.get(c.call_id) if c.call_id else None
        if r is None:
            r = next(
                (
                    x
                    for x in results
                    if x.id not in used and not x.call_id and x.tool == c.tool and x.t >= c.t
                ),
                None,
            )
        if r is not None:
            used.add(r.id)
        pairs.append((c, r))
    return pairs


def resolve(
    ref: str | Callable[..., Any] | None, *, what: str = "reward hook", code: str = "OT401"
) -> Callable[..., Any] | None:
    """A hook given as a callable or as ``"package.module:function"`` (the TOML and CLI form)."""
    if ref is None or callable(ref):
        return ref
    import importlib

    from ..core.errors import OrchestraceError

    mod, _, fn = ref.partition(":")
    if not fn:
        raise OrchestraceError(code, f"{what} must look like package.module:function, got {ref!r}")
    try:
        return getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError, ValueError) as e:
        raise OrchestraceError(code, f"cannot import {what} {ref!r}: {e}") from None
