"""E3 collaboration quality: message redundancy, messages per delegation, debate resolution.

Our definitions (spec §8.6 leaves the duplicate test open):

- **Message key**: a ``message`` event's ``content_ref`` if set, else a hash of its ``content``
  with case and whitespace normalised; messages with neither are not counted.
- **Message redundancy**: messages (in time order) whose key equals an earlier message's key, over
  all keyed messages. A semantic hook ``similar(a, b) -> float`` with a ``threshold`` also marks a
  message redundant when it is that similar to an earlier message's ``content`` (pairwise, so
  quadratic in the number of messages; meant for embeddings or an LLM judge on small traces).
- **Messages per delegation**: message events over spawn events (null without spawns).
- **Debate** (``topology == "debate"`` only): each debater's *position* is its last message or
  return (``attrs.answer`` or ``attrs.position`` if set, else its message key). ``debate_consensus``
  is the share of debaters holding the most common final position; ``debate_resolved`` is the final
  aggregate's ``attrs.resolved`` when recorded, else whether a strict majority holds one position;
  ``debate_diversity`` is distinct first positions over debaters.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.model import Event, Trace
from .view import TraceView, as_view

Similarity = Callable[[str, str], float]


def message_key(e: Event) -> str | None:
    if e.content_ref:
        return e.content_ref
    if e.content:
        norm = " ".join(e.content.lower().split())
        return "sha1:" + hashlib.sha1(norm.encode()).hexdigest()
    return None


def message_redundancy(
    x: Trace | TraceView, *, similar: Similarity | None = None, threshold: float = 0.9
) -> float | None:
    """Share of inter-agent messages that repeat an earlier one (null without keyed messages)."""
    v = as_view(x)
    ev = v.trace.events
    idx = v.g.nodes("message")
    idx = idx[np.lexsort((idx, v.g.t[idx]))].tolist()
    seen: set[str] = set()
    texts: list[str] = []
    keyed = dup = 0
    for i in idx:
        key = message_key(ev[i])
        if key is None:
            continue
        keyed += 1
        text = ev[i].content
        is_dup = key in seen or (
            similar is not None and text is not None and any(similar(text, o) >= threshold for o in texts)
        )
        dup += is_dup
        seen.add(key)
        if text is not None:
            texts.append(text)
    return dup / keyed if keyed else None


def messages_per_delegation(x: Trace | TraceView) -> float | None:
    v = as_view(x)
    spawns = len(v.g.nodes("spawn"))
    return len(v.g.nodes("message")) / spawns if spawns else None


def _position(e: Event) -> str | None:
    if e.attrs:
        for k in ("answer", "position"):
            if e.attrs.get(k) is not None:
                return str(e.attrs[k])
    return message_key(e)


def debate(x: Trace | TraceView) -> dict[str, Any]:
    """``{"debate_consensus", "debate_resolved", "debate_diversity"}``; all null unless a debate."""
    v = as_view(x)
    out: dict[str, Any] = dict.fromkeys(("debate_consensus", "debate_resolved", "debate_diversity"))
    if v.trace.topology != "debate":
        return out
    g = v.g
    ev = v.trace.events
    idx = g.nodes("message", "return")
    idx = idx[np.lexsort((idx, g.t[idx]))].tolist()
    first: dict[str, str | None] = {}
    last: dict[str, str | None] = {}
    for i in idx:
        who = ev[i].agent
        pos = _position(ev[i])
        if ev[i].type == "message":
            first.setdefault(who, pos)
        if pos is not None:
            last[who] = pos
    finals = [p for p in last.values() if p is not None]
    if finals:
        top = Counter(finals).most_common(1)[0][1]
        out["debate_consensus"] = top / len(finals)
        out["debate_resolved"] = float(top * 2 > len(finals))
    firsts = [p for p in first.values() if p is not None]
    if firsts:
        out["debate_diversity"] = len(set(firsts)) / len(firsts)
    fin = v.final_node
    if fin >= 0 and ev[fin].attrs and ev[fin].attrs.get("resolved") is not None:
        out["debate_resolved"] = float(bool(ev[fin].attrs["resolved"]))
    return out
