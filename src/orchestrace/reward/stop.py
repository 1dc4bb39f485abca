"""The stop decision's reward, from the trace (StopVote's episodes and its Gymnasium env, ``loop
stop``, RetryStop).

R(G) = R1 (the team outcome: a verifier's score, else ``rewards["team"]``, else
``metrics.task_success``) - c x the cost of the answers drawn: every ``return`` event of an agent
other than the orchestrator, at its ``attrs.sample_cost`` (RetryStop's attempts:
``attrs.attempt_cost``; 1 when absent). With ``upto`` the cost
counts only the events before that index, and the verifier scores that prefix: what stopping
there would have earned, the stop-now baseline ``loop stop`` credits its decisions against.
"""

from __future__ import annotations

from ..core.access import attr, num
from ..core.model import Trace
from .families import Verifier, r1_team

ORCHESTRATOR = "orchestrator"


def samples_cost(trace: Trace, upto: int | None = None, *, cost_key: str = "sample_cost") -> float:
    """The cost of the answers workers returned (of the events before ``upto``, when given)."""
    events = trace.events if upto is None else trace.events[:upto]
    total = 0.0
    for e in events:
        if e.type == "return" and e.agent != ORCHESTRATOR:
            cost = num(attr(e, cost_key))
            total += 1.0 if cost is None else cost
    return total


def stop_reward(
    trace: Trace,
    cost: float,
    verifier: Verifier | None = None,
    *,
    upto: int | None = None,
    cost_key: str = "sample_cost",
) -> float:
    """R1 of the trace (``verifier``'s score when given) minus ``cost`` x :func:`samples_cost`."""
    return r1_team(trace, verifier).channels["team"] - cost * samples_cost(trace, upto, cost_key=cost_key)
