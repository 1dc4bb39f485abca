"""Trainer sample streams: one stream per agent (or role), so several policies train from one run.

A **sample** is one LLM output of an agent (an event of type orchestrator_decision, message,
tool_call, return or aggregate with ``content``, ``content_ref`` or ``tokens_out``):

* ``prompt``: ``attrs.prompt`` when recorded, else the context the agent saw, rebuilt from the
  event's dependency predecessors ("<agent>: <content>" lines in time order), else the task
  (``metadata.question`` / ``metadata.task``, else ``task_id``);
* ``response``: ``content``; when withheld, ``response`` is null and ``response_ref`` holds the
  ``content_ref``;
* ``advantage``: ``event.credit["<method>/<unit>"]`` (computed with :func:`assign_credit` when the
  traces do not carry it yet);
* ``group_id``: ``<task_id>::<stream>``: the baseline group of that policy (GRPO groups per task;
  Dr. MAS groups per task x agent, which a per-agent stream is);
* ``unit`` / ``unit_id``: the credit unit level and the unit the event belongs to.

Targets: ``samples`` (our JSONL, one file per stream), ``trl`` (prompt/completion JSONL that
``datasets.load_dataset("json", ...)`` reads; :func:`trl_replay` trains TRL's GRPOTrainer on it)
and ``verl`` (Parquet rows with ``data_source, prompt, ability, reward_model, extra_info``).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec
import orjson

from ..core.errors import OrchestraceError
from ..core.model import Trace
from ..credit import assign_credit, unit_keys
from ..credit.game import DEPENDENCY_EDGES

SAMPLE_TYPES = frozenset(("orchestrator_decision", "message", "tool_call", "return", "aggregate"))


class Sample(msgspec.Struct, kw_only=True, omit_defaults=True):
    prompt: str
    response: str | None
    advantage: float
    group_id: str
    unit: str
    unit_id: str
    stream: str
    agent: str
    trace_id: str
    task_id: str
    event_id: str
    method: str
    role: str | None = None
    response_ref: str | None = None
    reward: float | None = None


def _task_text(tr: Trace) -> str:
    meta = tr.metadata or {}
    for k in ("question", "task", "prompt"):
        if isinstance(meta.get(k), str):
            return meta[k]
    return tr.task_id


def _prompts(tr: Trace) -> list[str]:
    ev = tr.events
    index = {e.id: i for i, e in enumerate(ev)}
    preds: list[list[int]] = [[] for _ in ev]
    for x in tr.edges:
        if x.type in DEPENDENCY_EDGES:
            preds[index[x.dst]].append(index[x.src])
    task = _task_text(tr)
    out = []
    for i, e in enumerate(ev):
        p = (e.attrs or {}).get("prompt")
        if isinstance(p, str):
            out.append(p)
            continue
        ctx = [
            f"{ev[j].agent}: {ev[j].content}"
            for j in sorted(preds[i], key=lambda j: (ev[j].t, j))
            if ev[j].content
        ]
        out.append("\n".join(ctx) if ctx else task)
    return out


def samples(
    traces: Iterable[Trace],
    key: str | None = None,
    *,
    by: str = "agent",
    method: str = "grpo",
    unit: str = "agent",
    channel: str = "team",
    **credit_options: Any,
) -> dict[str, list[Sample]]:
    """Sample streams keyed by agent (``by="agent"``) or role (``by="role"``)."""
    if by not in ("agent", "role"):
        raise OrchestraceError("OT420", f"streams are per agent or per role, got by={by!r}")
    traces = list(traces)
    key = key or f"{method}/{unit}"
    method, _, unit = key.partition("/")
    if traces and any(key not in (e.credit or {}) for t in traces for e in t.events):
        traces = assign_credit(traces, method, unit, channel=channel, **credit_options)
    streams: dict[str, list[Sample]] = defaultdict(list)
    for tr in traces:
        keys = unit_keys(tr, unit).keys
        prompts = _prompts(tr)
        for i, e in enumerate(tr.events):
            if e.type not in SAMPLE_TYPES or not (e.content or e.content_ref or e.tokens_out):
                continue
            stream = e.agent if by == "agent" else (e.role or e.agent)
            streams[stream].append(
                Sample(
                    prompt=prompts[i],
                    response=e.content,
                    response_ref=e.content_ref if e.content is None else None,
                    advantage=float((e.credit or {})[key]),
                    group_id=f"{tr.task_id}::{stream}",
                    unit=unit,
                    unit_id=keys[i],
                    stream=stream,
                    agent=e.agent,
                    role=e.role,
                    trace_id=tr.trace_id,
                    task_id=tr.task_id,
                    event_id=e.id,
                    method=method,
                    reward=tr.rewards.get(channel),
                )
            )
    return dict(streams)


def _fname(stream: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", stream) or "_"


def _options(opts: dict[str, Any]) -> dict[str, Any]:
    """CLI options arrive as strings; turn the known ones into their types."""
    out = dict(opts)
    if isinstance(out.get("partition"), str):
        out["partition"] = out["partition"].lower() in ("1", "true", "yes")
    for k in ("samples", "seed"):
        if isinstance(out.get(k), str):
            out[k] = int(out[k])
    return out


def _write_jsonl(rows_by_stream: dict[str, list[dict[str, Any]]], out: str) -> int:
    os.makedirs(out, exist_ok=True)
    n = 0
    for stream, rows in rows_by_stream.items():
        with open(os.path.join(out, _fname(stream) + ".jsonl"), "wb") as f:
            for r in rows:
                f.write(orjson.dumps(r) + b"\n")
                n += 1
    return n


def export_samples(traces: Iterable[Trace], out: str, **opts: Any) -> int:
    """Our sample JSONL: ``<out>/<stream>.jsonl`` with every Sample field."""
    streams = samples(traces, **_options(opts))
    return _write_jsonl({k: [msgspec.to_builtins(s) for s in v] for k, v in streams.items()}, out)


def trl_row(s: Sample) -> dict[str, Any]:
    """TRL prompt/completion row; the rest rides along as extra columns (TRL passes them to reward functions)."""
    return {
        "prompt": s.prompt,
        "completion": s.response if s.response is not None else "",
        "completion_ref": s.response_ref,
        "advantage": s.advantage,
        "group_id": s.group_id,
        "unit": s.unit,
        "unit_id": s.unit_id,
        "agent": s.agent,
        "role": s.role,
        "trace_id": s.trace_id,
        "event_id": s.event_id,
    }


def export_trl(traces: Iterable[Trace], out: str, **opts: Any) -> int:
    """``<out>/<stream>.jsonl`` in TRL's prompt/completion format."""
    streams = samples(traces, **_options(opts))
    return _write_jsonl({k: [trl_row(s) for s in v] for k, v in streams.items()}, out)


def verl_row(s: Sample, index: int) -> dict[str, Any]:
    return {
        "data_source": "orchestrace",
        "prompt": [{"role": "user", "content": s.prompt}],
        "ability": s.role or s.agent,
        "reward_model": {"style": "precomputed", "ground_truth": s.response or ""},
        "extra_info": {
            "index": index,
            "uid": s.group_id,
            "advantage": s.advantage,
            "unit": s.unit,
            "unit_id": s.unit_id,
            "response": s.response or "",
            "response_ref": s.response_ref or "",
            "trace_id": s.trace_id,
            "event_id": s.event_id,
        },
    }


def export_verl(traces: Iterable[Trace], out: str, **opts: Any) -> int:
    """``<out>/<stream>.parquet``: verl's RL dataset columns; the advantage and uid in ``extra_info``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    streams = samples(traces, **_options(opts))
    os.makedirs(out, exist_ok=True)
    n = 0
    for stream, rows in streams.items():
        table = pa.Table.from_pylist([verl_row(s, i) for i, s in enumerate(rows)])
        pq.write_table(table, os.path.join(out, _fname(stream) + ".parquet"))
        n += len(rows)
    return n


def trl_replay(
    rows: Sequence[dict[str, Any]], tokenizer: Any, *, group_size: int
) -> tuple[Any, Callable[..., dict[str, Any]], Callable[..., list[float]]]:
    """Train TRL's GRPOTrainer on exported rows instead of fresh generations.

    Returns ``(dataset, rollout_func, reward_func)``: the dataset has one row per group
    (``prompt`` = the group id); ``rollout_func`` answers each request for a group with that
    group's recorded responses, each under its *own* prompt (cycling when the group is smaller
    than ``group_size``); ``reward_func`` returns the exported advantage, which GRPO then
    centres within the group. Pass ``rollout_func=`` and ``reward_funcs=[reward_func]``.
    """
    from datasets import Dataset

    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("completion"):
            groups[r["group_id"]].append(r)
    if not groups:
        raise OrchestraceError("OT421", "no exported row has a completion text (content withheld?)")
    dataset = Dataset.from_list([{"prompt": g} for g in groups])

    def rollout_func(prompts: list[str], trainer: Any) -> dict[str, Any]:
        seen: dict[str, int] = defaultdict(int)
        p_ids, c_ids, logps, adv = [], [], [], []
        for g in prompts:
            per = max(1, group_size // max(1, prompts.count(g)))
            for _ in range(per):
                r = groups[g][seen[g] % len(groups[g])]
                seen[g] += 1
                p_ids.append(tokenizer(r["prompt"], add_special_tokens=False)["input_ids"])
                ids = tokenizer(r["completion"], add_special_tokens=False)["input_ids"]
                c_ids.append(ids + [tokenizer.eos_token_id])
                logps.append([0.0] * (len(ids) + 1))  # only read for vLLM importance sampling
                adv.append(float(r["advantage"]))
        return {"prompt_ids": p_ids, "completion_ids": c_ids, "logprobs": logps, "advantage": adv}

    def reward_func(
        prompts: list[Any], completions: list[Any], advantage: list[float], **_: Any
    ) -> list[float]:
        return [float(a) for a in advantage]

    return dataset, rollout_func, reward_func
