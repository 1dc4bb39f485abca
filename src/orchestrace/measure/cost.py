"""E4 cost and protocol overhead.

Our definitions (spec §2.2 and §8.6 leave the token classes open):

- **Coordination tokens**: tokens of ``orchestrator_decision``, ``spawn``, ``despawn``,
  ``message``, ``return`` and ``aggregate`` events, plus *tool-management* tokens: tool calls and
  results of coordination tools (spawning, assigning, messaging or handing off through a tool:
  ``COORDINATION_TOOLS``, any ``transfer_to_*`` handoff, or an event with
  ``attrs.coordination = true``). Everything else (tool calls and results of task tools, human and
  safety events) is task content.
- ``protocol_overhead = coordination tokens / all tokens``; it needs per-event tokens, so it is
  null when the events carry none (the analysis then falls back to a recorded value, if any).
- ``tokens_per_delegation`` = all tokens / spawn events (the survey's E4 "tokens per delegation");
  null without spawns or without per-event tokens.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.model import EVENT_TYPES, Trace
from .view import TraceView, as_view

COORDINATION_TYPES = ("orchestrator_decision", "spawn", "despawn", "message", "return", "aggregate")
COORDINATION_TOOLS = frozenset(
    {
        "Task",
        "Agent",
        "SendMessage",
        "TaskCreate",
        "TaskUpdate",
        "TaskList",
        "TaskGet",
        "create_subagent",
        "assign_task",
        "spawn_agent",
        "send_message",
        "handoff",
        "delegate",
    }
)
GROUPS = ("agent", "role", "type")


def is_coordination_tool(name: str | None) -> bool:
    return bool(name) and (name in COORDINATION_TOOLS or name.startswith("transfer_to_"))  # type: ignore[union-attr]


def coordination_mask(x: Trace | TraceView) -> np.ndarray:
    """Events whose tokens count as coordination (see module docstring)."""
    v = as_view(x)
    g = v.g
    mask = g.mask(*COORDINATION_TYPES)
    ev = v.trace.events
    idx = g.nodes("tool_call", "tool_result")
    tools = [ev[i].tool for i in idx.tolist()]
    coord = {name for name in set(tools) if is_coordination_tool(name)}
    if coord:
        mask[idx[np.fromiter((name in coord for name in tools), dtype=bool, count=len(tools))]] = True
    return mask | v.attr_flag("coordination")


def protocol_overhead(x: Trace | TraceView) -> float | None:
    v = as_view(x)
    total = int(v.g.tokens.sum())
    if total == 0:
        return None
    return float(v.g.tokens[coordination_mask(v)].sum()) / total


def totals(x: Trace | TraceView) -> dict[str, float | None]:
    """Trace totals: tokens (in/out), USD, wall-clock span, tool calls, messages, spawns.

    Tokens and USD are None when no event carries them: 0 would claim a run that cost nothing
    (a trace whose costs say 100 tokens had ``tokens: 0``)."""
    v = as_view(x)
    g = v.g
    ev = v.trace.events
    n_spawn = int((g.type == EVENT_TYPES.index("spawn")).sum())
    has_tokens = any(e.tokens_in is not None or e.tokens_out is not None for e in ev)
    tokens = int(g.tokens.sum()) if has_tokens else None
    return {
        "events": v.n,
        "tokens": tokens,
        "tokens_in": int(v.tokens_in.sum()) if has_tokens else None,
        "tokens_out": int(v.tokens_out.sum()) if has_tokens else None,
        "usd": float(v.usd.sum()) if any(e.cost_usd is not None for e in ev) else None,
        "wall_clock_s": float(g.t_end.max() - g.t.min()) if v.n else 0.0,
        "tool_calls": int((g.type == EVENT_TYPES.index("tool_call")).sum()),
        "messages": int((g.type == EVENT_TYPES.index("message")).sum()),
        "spawns": n_spawn,
        "tokens_per_delegation": tokens / n_spawn if n_spawn and tokens else None,  # type: ignore[dict-item]
    }


def breakdown(x: Trace | TraceView, by: str = "agent") -> dict[str, dict[str, Any]]:
    """Per agent, role or event type: events, tokens in/out, USD, busy seconds, tool calls, messages.

    Events without a role are grouped under ``"-"``.
    """
    if by not in GROUPS:
        raise ValueError(f"by must be one of {GROUPS}")
    v = as_view(x)
    g = v.g
    if by == "agent":
        codes, names = g.agent, g.agents
    elif by == "role":
        codes, names = np.where(g.role < 0, len(g.roles), g.role), [*g.roles, "-"]
    else:
        codes, names = g.type.astype(np.int64), list(EVENT_TYPES)
    k = len(names)

    def count(weights: np.ndarray | None = None) -> np.ndarray:
        return np.bincount(codes, weights=weights, minlength=k)

    cols = {
        "events": count(),
        "tokens_in": count(v.tokens_in.astype(np.float64)),
        "tokens_out": count(v.tokens_out.astype(np.float64)),
        "usd": count(v.usd),
        "busy_s": count(v.busy_time),
        "tool_calls": count((g.type == EVENT_TYPES.index("tool_call")).astype(np.float64)),
        "messages": count((g.type == EVENT_TYPES.index("message")).astype(np.float64)),
    }
    out: dict[str, dict[str, Any]] = {}
    for j, name in enumerate(names):
        if cols["events"][j] == 0:
            continue
        row = {c: (float(a[j]) if c in ("usd", "busy_s") else int(a[j])) for c, a in cols.items()}
        row["tokens"] = row["tokens_in"] + row["tokens_out"]
        out[name] = row
    return out
