"""What an agent had read when it produced an event: the prompt text rebuilt from the trace.

Shared by the trainer rows (``prompt``) and the OTLP spans (``input.value``), so a model call
shows the same context in Phoenix as the row a trainer learns from.
"""

from __future__ import annotations

import heapq

from ..core.model import Trace
from ..credit.game import DEPENDENCY_EDGES

#: characters of rebuilt context kept per event (the most recent ones)
DEFAULT_MAX_CHARS = 4000


def task_text(tr: Trace) -> str:
    """The task as posed: ``metadata.question/task/prompt``, else the first human message, else the task id."""
    meta = tr.metadata or {}
    for k in ("question", "task", "prompt"):
        if isinstance(meta.get(k), str) and meta[k]:
            return meta[k]
    for e in tr.events:
        if e.type == "human_intervention" and e.content:
            return e.content
    return tr.task_id


def event_prompts(tr: Trace, max_chars: int = DEFAULT_MAX_CHARS) -> list[str]:
    """Per event, the text that led to it (why: a replayed completion needs its real prompt).

    ``attrs.prompt`` when recorded; else the contents of its direct dependency predecessors
    ("<agent>: <content>" lines in time order); else the most recent contents among all its
    ancestors (any edge type, so a single-agent log's history counts), up to ``max_chars``;
    else the task text.
    """
    ev = tr.events
    index = {e.id: i for i, e in enumerate(ev)}
    dep: list[list[int]] = [[] for _ in ev]
    every: list[list[int]] = [[] for _ in ev]
    for x in tr.edges:
        if x.src in index and x.dst in index:
            every[index[x.dst]].append(index[x.src])
            if x.type in DEPENDENCY_EDGES:
                dep[index[x.dst]].append(index[x.src])
    task = task_text(tr)
    out = []
    for i, e in enumerate(ev):
        p = (e.attrs or {}).get("prompt")
        if isinstance(p, str):
            out.append(p)
            continue
        ctx = [
            f"{ev[j].agent}: {ev[j].content}"
            for j in sorted(dep[i], key=lambda j: (ev[j].t, j))
            if ev[j].content
        ]
        if not ctx:
            ctx = _recent_ancestors(ev, every, i, max_chars)
        text = "\n".join(ctx) if ctx else task
        out.append(text[-max_chars:] if len(text) > max_chars else text)
    return out


def _recent_ancestors(ev: list, preds: list[list[int]], i: int, budget: int) -> list[str]:
    """Contents of ``i``'s ancestors, latest first until ``budget`` characters, returned in time order."""
    heap = [(-ev[j].t, -j) for j in preds[i]]
    heapq.heapify(heap)
    seen = set(preds[i])
    picked: list[int] = []
    used = 0
    while heap and used < budget:
        _, nj = heapq.heappop(heap)
        j = -nj
        if ev[j].content:
            picked.append(j)
            used += len(ev[j].content) + len(ev[j].agent) + 3
        for k in preds[j]:
            if k not in seen:
                seen.add(k)
                heapq.heappush(heap, (-ev[k].t, -k))
    return [f"{ev[j].agent}: {ev[j].content}" for j in reversed(picked)]
