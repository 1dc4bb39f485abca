"""Credit units (survey §4.1): how a trace's events are partitioned at each level.

Every event belongs to exactly one unit per level (spec §4.3). Events that are not natively
part of a level (e.g. a tool_call at the message level) go to the **residual** unit ``~rest``,
which counterfactual methods never remove. Our definitions:

* team: one unit.
* orchestrator: each ``orchestrator_decision`` is a unit; a ``spawn``/``despawn`` joins the latest
  earlier decision of the same agent (itself when there is none).
* role: ``event.role``; a tool_result without one takes its call's role; else ``~agent:<owner>``.
* agent: the owner agent. A ``tool_result`` is owned by the agent of its ``tool_call`` (its own
  ``agent`` field names the tool).
* turn: ``event.turn`` when set; otherwise (number of orchestrator decisions at or before the
  event) - 1, floored at 0: a turn is one orchestrator round. Without decisions, messages open turns.
* message: each ``message`` event.
* tool: each ``tool_call`` together with its ``tool_result``.
* token: each event that generated tokens (``tokens_out`` > 0, else one token per event with
  ``content``) is a span of tokens; the credit written on it is **per token**.
"""

from __future__ import annotations

from bisect import bisect_right

import msgspec

from ..core.access import tool_pairs
from ..core.errors import OrchestraceError
from ..core.model import Trace

UNITS = ("team", "orchestrator", "role", "agent", "turn", "message", "tool", "token")
REST = "~rest"
_ORCH = ("orchestrator_decision", "spawn", "despawn")


class Units(msgspec.Struct):
    """Unit id of every event (``keys``, trace order), the distinct non-residual units (``ids``, by
    first appearance in time), each unit's owner agent and size (tokens for the token level, else 1)."""

    level: str
    keys: list[str]
    ids: list[str]
    owner: dict[str, str]
    size: dict[str, float]

    def members(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {u: [] for u in (*self.ids, REST)}
        for i, k in enumerate(self.keys):
            out[k].append(i)
        return out


def owners(trace: Trace) -> list[str]:
    """Owner agent of each event: the calling agent for tool results, else ``event.agent``."""
    caller = {r.id: c.agent for c, r in tool_pairs(trace) if r is not None}
    return [caller.get(e.id, e.agent) for e in trace.events]


def unit_keys(trace: Trace, level: str) -> Units:
    if level not in UNITS:
        raise OrchestraceError("OT410", f"unknown credit unit {level!r}; known: {', '.join(UNITS)}")
    ev = trace.events
    own = owners(trace)
    order = sorted(range(len(ev)), key=lambda i: (ev[i].t, i))
    keys = [REST] * len(ev)
    size: dict[str, float] = {}
    if level == "team":
        keys = ["team"] * len(ev)
    elif level == "agent":
        keys = list(own)
    elif level == "role":
        call_role = {r.id: c.role for c, r in tool_pairs(trace) if r is not None and c.role}
        keys = [e.role or call_role.get(e.id) or f"~agent:{o}" for e, o in zip(ev, own, strict=True)]
    elif level == "orchestrator":
        last: dict[str, str] = {}
        for i in order:
            e = ev[i]
            if e.type == "orchestrator_decision":
                last[e.agent] = keys[i] = e.id
            elif e.type in ("spawn", "despawn"):
                keys[i] = last.get(e.agent, e.id)
    elif level == "turn":
        marks = sorted(e.t for e in ev if e.type == "orchestrator_decision") or sorted(
            e.t for e in ev if e.type == "message"
        )
        for i, e in enumerate(ev):
            keys[i] = f"turn:{e.turn if e.turn is not None else max(bisect_right(marks, e.t) - 1, 0)}"
    elif level == "message":
        keys = [e.id if e.type == "message" else REST for e in ev]
    elif level == "tool":
        pos = {e.id: i for i, e in enumerate(ev)}
        for c, r in tool_pairs(trace):
            keys[pos[c.id]] = c.id
            if r is not None:
                keys[pos[r.id]] = c.id
    else:  # token
        for i, e in enumerate(ev):
            n = e.tokens_out or (1 if e.content else 0)
            if n > 0:
                keys[i] = e.id
                size[e.id] = float(n)
    first: dict[str, int] = {}
    for pos, i in enumerate(order):
        first.setdefault(keys[i], pos)
    ids = sorted((k for k in first if k != REST), key=first.__getitem__)
    owner = {}
    for i in order:
        owner.setdefault(keys[i], own[i])
    return Units(level=level, keys=keys, ids=ids, owner=owner, size={u: size.get(u, 1.0) for u in ids})
