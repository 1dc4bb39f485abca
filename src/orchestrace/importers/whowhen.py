"""Who&When (ICML 2025 failure-attribution benchmark) runs as traces.

One JSON file is one failed run. Each ``history`` step becomes exactly one event, so the gold
label ``mistake_step`` indexes events through ``attrs["step"]`` and the event at that step carries
``attrs["gold_mistake"] = True``. Times are ordinal (step i at t = i): the logs have no clock.

Hand-Crafted (Magentic-One): ``Orchestrator (thought)`` -> ``orchestrator_decision``,
``Orchestrator (-> X)`` -> delegation ``message`` to X, X's turn -> ``message`` back to the
orchestrator, ``Orchestrator (termination condition)`` -> ``orchestrator_decision``,
``human`` -> ``human_intervention``. Algorithm-Generated (AG2 expert teams): every turn is a
``message`` from its speaker to the group; the code-execution terminal's turns are marked
``attrs.kind = "code_execution"``. Labels (mistake agent, step, reason), question id and level
are kept in ``metadata``; the reward is the recorded outcome (0 for every run of the benchmark).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..core.errors import LoadError
from ..core.read import parse_json, read_bytes
from .reading import head_bytes, require_nonempty
from .redact import redact
from .staging import ImportStaging
from .values import as_int

NAME = "who-and-when"
DESCRIPTION = "Who&When failure-attribution runs (Hand-Crafted Magentic-One, Algorithm-Generated AG2)"

_ORCH = re.compile(r"^(?P<agent>[^()]+?)\s*\((?P<what>.*)\)\s*$")
_TERMINALS = frozenset({"Computer_terminal", "ComputerTerminal"})


def sniff(path: str | os.PathLike[str]) -> bool:
    p = os.fspath(path)
    if not p.endswith((".json", ".json.gz", ".json.zst")):
        return False
    head = head_bytes(p, 1 << 20)
    if b'"history"' not in head:
        return False
    # labels sit at the end of big runs; a cut-off file still starts with its history of turns
    return b'"mistake_agent"' in head or (
        re.sub(rb"\s+", b"", head[:80]).startswith(b'{"history":[') and b'"role"' in head[:4096]
    )


def _speaker(step: dict[str, Any]) -> tuple[str, str | None]:
    """(speaker, annotation) of a history step: ``Orchestrator (-> WebSurfer)`` -> (Orchestrator, -> WebSurfer)."""
    name = step.get("name")
    role = step.get("role")
    who = name if isinstance(name, str) and name else role if isinstance(role, str) and role else "unknown"
    m = _ORCH.match(who)
    if m:
        return m.group("agent").strip(), m.group("what").strip()
    return who.strip(), None


def load(path: str | os.PathLike[str], *, keep_content: bool = False) -> Any:
    p = Path(path)
    require_nonempty(p)
    # decompressed (.gz, .zst: it was refused as invalid UTF-8); says "truncated" for a cut-off file
    d = parse_json(read_bytes(p), path=str(p))
    history = d.get("history") if isinstance(d, dict) else None
    if not isinstance(history, list) or not history:
        raise LoadError("OT006", "no history steps: nothing to import", path=str(p))
    b = ImportStaging(keep_content=keep_content)
    hand_crafted = any(_speaker(s)[1] is not None for s in history if isinstance(s, dict))
    orchestrator = "Orchestrator"
    mistake_step = as_int(d.get("mistake_step"))
    prev: int | None = None
    pending_delegation: dict[str, int] = {}
    for i, step in enumerate(history):
        if not isinstance(step, dict):
            b.stats.unknown["non-object step"] += 1
            continue
        who, what = _speaker(step)
        content = step.get("content")
        attrs: dict[str, Any] = {"step": i, "speaker": step.get("name") or step.get("role")}
        if i == mistake_step:
            attrs["gold_mistake"] = True
        if who == "human" or step.get("role") == "human":
            e = b.add("human_intervention", "human", float(i), content=content, attrs=attrs)
        elif what is not None and what.startswith("->"):
            target = what[2:].strip()
            attrs["kind"] = "delegation"
            e = b.add("message", who, float(i), to=target, role="orchestrator", content=content, attrs=attrs)
            pending_delegation[target] = e
        elif what is not None:
            attrs["kind"] = what  # thought, termination condition
            e = b.add(
                "orchestrator_decision", who, float(i), role="orchestrator", content=content, attrs=attrs
            )
        else:
            if who in _TERMINALS:
                attrs["kind"] = "code_execution"
            to = orchestrator if hand_crafted else None
            e = b.add(
                "message",
                who,
                float(i),
                to=to,
                role=step.get("role") if isinstance(step.get("role"), str) else None,
                content=content,
                attrs=attrs,
            )
            if who in pending_delegation:
                src = pending_delegation.pop(who)
                b.edge(src, e, "message")
                if src == prev:
                    prev = None
        if prev is not None and b.events[prev].agent != b.events[e].agent:
            b.edge(prev, e, "causal")
        prev = e
    b.stats.records["history step"] = len(history)
    label_keys = ("mistake_agent", "mistake_step", "mistake_reason", "mistake_type", "labels")
    meta: dict[str, Any] = {
        "source_format": NAME,
        "source": str(p),
        "subset": "Hand-Crafted" if hand_crafted else "Algorithm-Generated",
        "labels": {k: d[k] for k in label_keys if k in d},
        "time_unit": "step",
        "t0_unix": None,  # ordinal times: there is no clock
    }
    for k in ("question_ID", "level", "is_correct", "is_corrected"):
        if k in d:
            meta[k] = d[k]
    if keep_content:
        for k in ("question", "ground_truth"):  # content kept, secrets redacted, as in events
            meta[k] = redact(d[k]) if isinstance(d.get(k), str) else d.get(k)
    # Who&When collects failed runs only (the benchmark is "who failed, and when"): a run is a
    # success only if the file says ``is_correct: true``, which no published file does
    success = 1.0 if d.get("is_correct") is True else 0.0
    rewards = {"team": success}
    run = Path(p.name.removesuffix(".gz").removesuffix(".zst")).stem  # 1.json and 1.json.gz: run 1
    task = str(d.get("question_ID") or run)
    yield b.build(
        trace_id=f"who-and-when:{meta['subset']}:{run}",
        task_id=task,
        system="magentic-one" if hand_crafted else "ag2",
        topology="centralized" if hand_crafted else "mixed",
        rewards=rewards,
        metrics={"task_success": success},
        metadata=meta,
    )
