"""Reward families R1-R6 (survey Table 10): each is a function ``trace -> RewardOut``.

Signals come from trace fields by default and from a callable when the user has one (a verifier,
a PRM, an LLM judge). Every default below is our definition and is documented in docs/reward.md.
Dense families (R4-R6) report the **mean** over scored items, not the sum, so padding a trace with
extra steps, calls or messages cannot raise them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping

from ..core.access import attr, num, tool_pairs
from ..core.errors import OrchestraceError
from ..core.model import Event, Trace
from ..core.plugins import hook_number
from .channels import RewardOut, mean

Verifier = Callable[[Trace], float]
AgentFn = Callable[[Trace, str], float]
Rubric = Callable[[list[Event], Trace], float]
StepScorer = Callable[[Event, Trace], float | None]


def r1_team(trace: Trace, verifier: Verifier | None = None, *, channel: str = "team") -> RewardOut:
    """R1 shared team outcome: the verifier's score, else ``rewards[channel]``, else ``metrics.task_success``."""
    out = RewardOut()
    if verifier is not None:
        value = hook_number(verifier(trace), verifier, trace.trace_id, "OT401")
    elif channel in trace.rewards:
        value = float(trace.rewards[channel])
    elif trace.metrics and "task_success" in trace.metrics:
        value = float(trace.metrics["task_success"])
    else:
        raise OrchestraceError(
            "OT402",
            f"trace {trace.trace_id!r} has no rewards.{channel} and no metrics.task_success; give a verifier",
        )
    out.add(channel, value, "R1")
    return out


def default_agent_outcome(events: list[Event]) -> float:
    """Outcome of one agent from its events: the last ``attrs.agent_reward`` if any, else 1 - error fraction."""
    for e in reversed(events):
        v = num(attr(e, "agent_reward"))
        if v is not None:
            return v
    return 1.0 - sum(e.status == "error" for e in events) / len(events)


def _by(trace: Trace, key: Callable[[Event], str | None]) -> dict[str, list[Event]]:
    groups: dict[str, list[Event]] = defaultdict(list)
    for e in sorted(trace.events, key=lambda e: e.t):
        k = key(e)
        if k is not None:
            groups[k].append(e)
    return groups


def r2_agent(trace: Trace, agent_fn: AgentFn | None = None) -> RewardOut:
    """R2 individual agent outcome: one channel ``agent/<name>`` per agent."""
    out = RewardOut()
    for name, events in _by(trace, lambda e: e.agent).items():
        value = agent_fn(trace, name) if agent_fn is not None else default_agent_outcome(events)
        out.add(f"agent/{name}", value, "R2")
    return out


def r3_role(trace: Trace, rubrics: Mapping[str, Rubric] | None = None) -> RewardOut:
    """R3 role rubric: ``role/<name>`` per role; roles without a rubric use the R2 default on their events."""
    out = RewardOut()
    rubrics = rubrics or {}
    for role, events in _by(trace, lambda e: e.role).items():
        fn = rubrics.get(role)
        value = fn(events, trace) if fn is not None else default_agent_outcome(events)
        out.add(f"role/{role}", value, "R3")
    return out


def default_step_score(e: Event, trace: Trace) -> float | None:
    """Per-step score read from the trace: ``attrs.process_score`` (or ``prm``); unscored steps give None."""
    return num(attr(e, "process_score", "prm"))


def r4_process(trace: Trace, prm: StepScorer | None = None) -> RewardOut:
    """R4 process reward: mean per-step score (trace fields or a PRM callable)."""
    fn = prm or default_step_score
    scores = {e.id: s for e in trace.events if (s := fn(e, trace)) is not None}
    out = RewardOut()
    out.add("process", mean(scores.values()), "R4")
    out.per_event["process"] = {k: float(v) for k, v in scores.items()}
    return out


def r5_tool(
    trace: Trace,
    *,
    success: float = 1.0,
    failure: float = 1.0,
    spam_penalty: float = 0.5,
    max_calls_per_agent: int | None = None,
    penalize_duplicates: bool = True,
) -> RewardOut:
    """R5 tool use: per call +success / -failure; spam calls earn -spam_penalty and no success.

    A call is spam when its agent already made ``max_calls_per_agent`` calls, or (with
    ``penalize_duplicates``) when the same agent already made the same call (tool and content).
    A call's outcome is its result's status, else the call's own status; a call without any
    result counts as a failure ("fabricated tool success" is not rewarded).
    """
    per_call: dict[str, float] = {}
    n_by_agent: dict[str, int] = defaultdict(int)
    seen: set[tuple[str, str | None, str | None]] = set()
    n_spam = 0
    for call, result in tool_pairs(trace):
        key = (call.agent, call.tool, call.content if call.content is not None else call.content_ref)
        n_by_agent[call.agent] += 1
        over = max_calls_per_agent is not None and n_by_agent[call.agent] > max_calls_per_agent
        dup = penalize_duplicates and key[2] is not None and key in seen
        seen.add(key)
        if over or dup:
            per_call[call.id] = -spam_penalty
            n_spam += 1
            continue
        status = result.status if result is not None else None
        ok = result is not None and status != "error" and call.status != "error"
        per_call[call.id] = success if ok else -failure
    out = RewardOut()
    out.add("tool", mean(per_call.values()), "R5")
    out.add("tool_spam", n_spam, "R5")
    out.per_event["tool"] = per_call
    return out


def default_judge(e: Event, trace: Trace) -> float | None:
    """Judge score on a message read from ``attrs.judge_score`` (or ``verifier_score``)."""
    return num(attr(e, "judge_score", "verifier_score"))


def r6_verifier(
    trace: Trace,
    judge: StepScorer | None = None,
    *,
    max_message_tokens: int | None = None,
    penalize_duplicates: bool = True,
) -> RewardOut:
    """R6 verifier / debate: mean judge score over messages, channel ``judge`` (named
    ``verifier`` before: it shared the word with the spec's ``[hooks] verifier``, which scores R1).

    Anti-padding caps: a message longer than ``max_message_tokens`` (tokens_out) keeps only the
    fraction cap/tokens of its score; a repeated message (same agent, same content) scores 0.
    """
    fn = judge or default_judge
    scores: dict[str, float] = {}
    seen: set[tuple[str, str]] = set()
    for e in sorted(trace.events, key=lambda e: e.t):
        if e.type != "message":
            continue
        s = fn(e, trace)
        if s is None:
            continue
        text = e.content if e.content is not None else e.content_ref
        if penalize_duplicates and text is not None:
            if (e.agent, text) in seen:
                s = 0.0
            seen.add((e.agent, text))
        if max_message_tokens is not None and (e.tokens_out or 0) > max_message_tokens:
            s *= max_message_tokens / e.tokens_out  # type: ignore[operator]
        scores[e.id] = float(s)
    out = RewardOut()
    out.add("judge", mean(scores.values()), "R6")
    out.per_event["judge"] = scores
    return out
