"""R7 orchestration rewards: Critical Steps, PARL's r_parallel and r_finish, split and aggregation quality.

Our definitions (spec §3.3, §8.4-8.5; the Kimi report does not disclose functional forms):

* **Critical Steps** and total steps come from ``orchestrace.measure`` (heaviest dependency path
  weighted by agent steps; equals sum_t (S_main + max_i S_sub,i) on Kimi's stages, recursive for
  nested hierarchies). Kimi uses it as a budget: the spec's ``caps.max_critical_steps``.
* A sub-agent's **own steps** (for "useful") are its orchestrator_decision, message, tool_call,
  return and aggregate events.
* ``r_parallel`` (Kimi form, counters serial collapse) = min(#useful sub-agents, cap) / cap, where a
  useful sub-agent was spawned and took at least ``min_steps`` steps; the "speedup" variant
  (survey §6.2 reading) = 1 - critical/total steps, the fraction of steps taken off the critical path.
* ``r_finish`` (Kimi form) = fraction of spawned sub-agents whose assigned subtask completed
  successfully (a ``return`` with status != error and no error event); the "terminated" variant
  (survey reading) counts sub-agents that reached a return or a despawn at all.
* ``split_correctness`` = mean ``attrs.split_correct`` on spawn events, else the fraction of
  sub-agents that ran without any error event.
* ``aggregation_quality`` = mean ``attrs.aggregation_score`` on aggregate events, else the
  fraction of successful sub-agent returns that reach an aggregate event along the edges.
"""

from __future__ import annotations

from collections import defaultdict

from ..core.access import attr, num, spawned
from ..core.graph import TraceGraph
from ..core.model import Trace
from ..measure.parallelism import critical_steps as measure_critical_steps
from .channels import STEP_TYPES, RewardOut, mean


def critical_steps(trace: Trace) -> tuple[float, float]:
    """(Critical Steps, total steps) as defined by :func:`orchestrace.measure.parallelism.critical_steps`."""
    res = measure_critical_steps(trace)
    return float(res["critical"]), float(res["total"])


def _subagent_events(trace: Trace) -> dict[str, list]:
    subs = spawned(trace)
    by: dict[str, list] = defaultdict(list)
    for e in trace.events:
        if e.agent in subs:
            by[e.agent].append(e)
    return {a: by.get(a, []) for a in subs}


def r7_orchestration(
    trace: Trace,
    *,
    parallel_cap: int = 8,
    min_steps: int = 1,
    parallel_form: str = "kimi",
    finish_form: str = "kimi",
) -> RewardOut:
    """R7: ``critical_steps``, ``total_steps``, ``speedup``, ``r_parallel``, ``r_finish``,
    ``split_correctness``, ``aggregation_quality`` (definitions in the module docstring)."""
    out = RewardOut()
    crit, total = critical_steps(trace)
    out.add("critical_steps", crit, "R7")
    out.add("total_steps", total, "R7")
    out.add("speedup", total / crit if crit else 1.0, "R7")
    subs = _subagent_events(trace)
    useful = sum(1 for evs in subs.values() if sum(e.type in STEP_TYPES for e in evs) >= min_steps)
    if parallel_form == "kimi":
        r_par = min(useful, parallel_cap) / parallel_cap if parallel_cap > 0 else 0.0
    elif parallel_form == "speedup":
        r_par = 1.0 - crit / total if total else 0.0
    else:
        raise ValueError(f"unknown r_parallel form {parallel_form!r} (kimi, speedup)")
    out.add("r_parallel", r_par, "R7")

    if finish_form not in ("kimi", "terminated"):
        raise ValueError(f"unknown r_finish form {finish_form!r} (kimi, terminated)")
    despawned = {e.to for e in trace.events if e.type == "despawn"}

    def finished(agent: str, evs: list) -> bool:
        if finish_form == "terminated":
            return agent in despawned or any(e.type == "return" for e in evs)
        ok_return = any(e.type == "return" and e.status != "error" for e in evs)
        return ok_return and not any(e.status == "error" for e in evs)

    out.add("r_finish", mean(float(finished(a, evs)) for a, evs in subs.items()) if subs else 0.0, "R7")

    marks = [
        v for e in trace.events if e.type == "spawn" and (v := num(attr(e, "split_correct"))) is not None
    ]
    split = (
        mean(marks)
        if marks
        else mean(float(not any(e.status == "error" for e in evs)) for evs in subs.values())
    )
    out.add("split_correctness", split, "R7")

    scores = [
        v
        for e in trace.events
        if e.type == "aggregate" and (v := num(attr(e, "aggregation_score"))) is not None
    ]
    if scores:
        agg = mean(scores)
    else:
        g = TraceGraph(trace)
        agg_mask = g.mask("aggregate")
        rets = [
            g.index[e.id]
            for e in trace.events
            if e.type == "return" and e.status != "error" and e.agent in subs
        ]
        agg = mean(float((g.reachable([r]) & agg_mask).any()) for r in rets) if rets else 0.0
    out.add("aggregation_quality", agg, "R7")
    return out
