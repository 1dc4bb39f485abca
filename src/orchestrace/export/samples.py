"""Trainer sample streams: one stream per agent (or role), so several policies train from one run.

A **sample** is one LLM output of an agent (an event of type orchestrator_decision, message,
tool_call, return or aggregate with ``content``, ``content_ref`` or ``tokens_out``):

* ``prompt``: ``attrs.prompt`` when recorded, else the context the agent saw, rebuilt from the
  event's dependency predecessors ("<agent>: <content>" lines in time order), else from the most
  recent of all its ancestors (a single-agent log's history), else the task
  (``metadata.question`` / ``metadata.task``, else the first human message, else ``task_id``);
  see :func:`orchestrace.export.context.event_prompts`;
* ``response``: ``content``; when withheld, ``response`` is null and ``response_ref`` holds the
  ``content_ref``;
* ``advantage``: ``event.credit["<method>/<unit>"]`` (computed with :func:`assign_credit` when the
  traces do not carry it yet);
* ``group_id``: ``<task_id>::<stream>``: the baseline group of that policy (GRPO groups per task;
  Dr. MAS groups per task x agent, which a per-agent stream is); with ``group="turn"``
  ``<trace_id>::turn:<k>::<stream>``, per-step groups ranked by a per-event reward;
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
from ..core.io import atomic_output
from ..core.model import Trace
from ..core.paths import make_dirs
from ..credit import EPS, assign_credit, check_method_options, normalise, option_names, unit_keys
from ..reward.spec import channel_value
from .context import DEFAULT_MAX_CHARS, event_prompts

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


#: per-event reward channels a ``group="turn"`` export can rank samples by (R4 process, R5 tool)
STEP_REWARDS = ("tool", "process")


def _step_rewards(tr: Trace, channel: str) -> dict[str, float]:
    from ..reward import r4_process, r5_tool

    if channel not in STEP_REWARDS:
        raise OrchestraceError(
            "OT420", f"step_reward must be one of {', '.join(STEP_REWARDS)}, got {channel!r}"
        )
    out = r5_tool(tr) if channel == "tool" else r4_process(tr)
    return out.per_event.get(channel, {})


def samples(
    traces: Iterable[Trace],
    key: str | None = None,
    *,
    by: str = "agent",
    method: str = "grpo",
    unit: str = "agent",
    channel: str = "team",
    group: str = "task",
    step_reward: str = "tool",
    max_prompt_chars: int = DEFAULT_MAX_CHARS,
    **credit_options: Any,
) -> dict[str, list[Sample]]:
    """Sample streams keyed by agent (``by="agent"``) or role (``by="role"``).

    ``group="task"``: one baseline group per task and stream, advantage = the credit ``key``
    (needs several traces per task to carry a signal). ``group="turn"``: per-step groups, one
    per trace, turn and stream, for logs with one trace per task: each sample's reward is its
    own per-event reward (``step_reward``: R5 ``tool`` outcome of the call, or R4 ``process``
    score); samples without one are left out; advantage = (reward - group mean) / (group std + eps).
    """
    if unknown := sorted(set(credit_options) - option_names()):  # a typo must not fall back to a default
        known = sorted(
            {"key", "by", "method", "unit", "channel", "group", "step_reward", "max_prompt_chars"}
            | option_names()
        )
        raise OrchestraceError(
            "OT420", f"unknown option {', '.join(map(repr, unknown))}; known: {', '.join(known)}"
        )
    if by not in ("agent", "role"):
        raise OrchestraceError("OT420", f"streams are per agent or per role, got by={by!r}")
    if group not in ("task", "turn"):
        raise OrchestraceError("OT420", f"groups are per task or per turn, got group={group!r}")
    traces = list(traces)
    key = key or f"{method}/{unit}"
    method, _, unit = key.partition("/")
    check_method_options(method, set(credit_options) - {"partition"})  # alpha with grpo: ignored
    if group == "task" and traces and any(key not in (e.credit or {}) for t in traces for e in t.events):
        traces = assign_credit(traces, method, unit, channel=channel, **credit_options)
    streams: dict[str, list[Sample]] = defaultdict(list)
    for tr in traces:
        keys = unit_keys(tr, unit).keys
        turns = unit_keys(tr, "turn").keys if group == "turn" else keys
        per_event = _step_rewards(tr, step_reward) if group == "turn" else {}
        prompts = event_prompts(tr, max_prompt_chars)
        for i, e in enumerate(tr.events):
            if e.type not in SAMPLE_TYPES or not (e.content or e.content_ref or e.tokens_out):
                continue
            if group == "turn" and e.id not in per_event:
                continue
            stream = e.agent if by == "agent" else (e.role or e.agent)
            streams[stream].append(
                Sample(
                    prompt=prompts[i],
                    response=e.content,
                    response_ref=e.content_ref if e.content is None else None,
                    advantage=float((e.credit or {})[key]) if group == "task" else 0.0,
                    group_id=f"{tr.task_id}::{stream}"
                    if group == "task"
                    else f"{tr.trace_id}::{turns[i]}::{stream}",
                    unit=unit,
                    unit_id=keys[i],
                    stream=stream,
                    agent=e.agent,
                    role=e.role,
                    trace_id=tr.trace_id,
                    task_id=tr.task_id,
                    event_id=e.id,
                    method=method if group == "task" else f"grpo-step/{step_reward}",
                    reward=channel_value(tr.rewards, channel) if group == "task" else per_event[e.id],
                )
            )
    if group == "turn":
        for rows in streams.values():
            _centre_in_groups(rows)
    return dict(streams)


def _centre_in_groups(rows: list[Sample]) -> None:
    """GRPO's advantage within each group: (r - mean) / (std + eps), std with ddof=1 as in TRL."""
    by_group: dict[str, list[Sample]] = defaultdict(list)
    for r in rows:
        by_group[r.group_id].append(r)
    for members in by_group.values():
        rs = [float(m.reward or 0.0) for m in members]
        mean, std = normalise(rs)
        for m, r in zip(members, rs, strict=True):
            m.advantage = (r - mean) / (std + EPS)


def _fname(stream: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", stream) or "_"


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _options(opts: dict[str, Any]) -> dict[str, Any]:
    """CLI options arrive as strings; turn the known ones into their types. A value that is none
    (samples=abc: int() was an internal error; partition=maybe was false) is OT420."""
    out = dict(opts)
    if isinstance(out.get("partition"), str):
        word = out["partition"].strip().lower()
        if word not in (*_TRUE, *_FALSE):
            raise OrchestraceError(
                "OT420", f"option partition must be true or false, got {out['partition']!r}"
            )
        out["partition"] = word in _TRUE
    for k, kind, low in (("samples", int, 1), ("seed", int, 0), ("max_prompt_chars", int, 1)):
        if isinstance(out.get(k), str):
            try:
                out[k] = kind(out[k])
            except ValueError:
                raise OrchestraceError("OT420", f"option {k} must be an integer, got {out[k]!r}") from None
        if k in out and out[k] < low:
            raise OrchestraceError("OT420", f"option {k} must be >= {low}, got {out[k]}")
    for k in ("alpha", "eps"):  # reach the credit methods, which check their range
        if isinstance(out.get(k), str):
            try:
                out[k] = float(out[k])
            except ValueError:
                raise OrchestraceError("OT420", f"option {k} must be a number, got {out[k]!r}") from None
    return out


def _write_jsonl(rows_by_stream: dict[str, list[dict[str, Any]]], out: str) -> int:
    make_dirs(out)
    n = 0
    for stream, rows in rows_by_stream.items():
        with atomic_output(os.path.join(out, _fname(stream) + ".jsonl")) as tmp, open(tmp, "wb") as f:
            for r in rows:
                f.write(orjson.dumps(r) + b"\n")
                n += 1
    return n


def export_samples(traces: Iterable[Trace], out: str, **opts: Any) -> int:
    """Our sample JSONL: ``<out>/<stream>.jsonl`` with every Sample field."""
    streams = samples(traces, **_options(opts))
    return _write_jsonl({k: [msgspec.to_builtins(s) for s in v] for k, v in streams.items()}, out)


def trl_row(s: Sample) -> dict[str, Any]:
    """TRL's standard prompt/completion row; the rest rides along as extra columns (TRL passes
    them to reward functions as keyword arguments, e.g. ``advantage`` and ``reward``)."""
    return {
        "prompt": s.prompt,
        "completion": s.response if s.response is not None else "",
        "completion_ref": s.response_ref,
        "advantage": s.advantage,
        "reward": s.reward,
        "group_id": s.group_id,
        "unit": s.unit,
        "unit_id": s.unit_id,
        "agent": s.agent,
        "role": s.role,
        "trace_id": s.trace_id,
        "event_id": s.event_id,
    }


def export_trl(traces: Iterable[Trace], out: str, **opts: Any) -> int:
    """``<out>/<stream>.jsonl`` in TRL's prompt/completion format, rows with completion text only.

    A sample whose text was withheld (``content_ref`` only) cannot be trained on and is left out;
    when that leaves nothing, it is an error (import with content kept), not an empty dataset.
    """
    streams = samples(traces, **_options(opts))
    rows = {k: [trl_row(s) for s in v if s.response] for k, v in streams.items()}
    withheld = sum(len(v) for v in streams.values()) - sum(len(v) for v in rows.values())
    if not any(rows.values()) and withheld:
        raise OrchestraceError(
            "OT421",
            f"no sample has completion text ({withheld} samples with content withheld): "
            "import the traces with their content kept (--keep-content)",
        )
    if not any(rows.values()):  # "0 samples withheld ... --keep-content" sent the user the wrong way
        raise OrchestraceError(
            "OT421",
            f"no sample: no event of type {', '.join(sorted(SAMPLE_TYPES))} carries content, content_ref or tokens_out",
        )
    return _write_jsonl({k: v for k, v in rows.items() if v}, out)


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
    make_dirs(out)
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
    group's recorded responses, each under its *own* prompt (walking on through the group over
    successive requests, cycling at its end), cut at the trainer's ``max_completion_length``;
    ``reward_func`` returns the exported advantage, which GRPO then
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
    seen: dict[str, int] = defaultdict(int)  # successive requests walk on through a group's rows

    def rollout_func(prompts: list[str], trainer: Any) -> dict[str, Any]:
        limit = getattr(getattr(trainer, "args", None), "max_completion_length", None)
        p_ids, c_ids, logps, adv = [], [], [], []
        for g in prompts:
            per = max(1, group_size // max(1, prompts.count(g)))
            for _ in range(per):
                r = groups[g][seen[g] % len(groups[g])]
                seen[g] += 1
                p_ids.append(tokenizer(r["prompt"], add_special_tokens=False)["input_ids"])
                ids = tokenizer(r["completion"], add_special_tokens=False)["input_ids"]
                ids = ids + [tokenizer.eos_token_id]
                if limit is not None:
                    ids = ids[:limit]  # as generation would stop at max_completion_length
                c_ids.append(ids)
                logps.append([0.0] * len(ids))  # only read for vLLM importance sampling
                adv.append(float(r["advantage"]))
        return {"prompt_ids": p_ids, "completion_ids": c_ids, "logprobs": logps, "advantage": adv}

    def reward_func(
        prompts: list[Any], completions: list[Any], advantage: list[float], **_: Any
    ) -> list[float]:
        return [float(a) for a in advantage]

    return dataset, rollout_func, reward_func
