"""Verifiers for traces that carry no outcome (imported real logs, runtime runs without a gold
answer), usable as ``[hooks] verifier = "orchestrace.reward.verifiers:NAME"`` in a reward spec.

They check how the run went, not whether its answer is right: a real log has no gold outcome, so
a team reward from them is a process signal. Use a task verifier when you have one.
"""

from __future__ import annotations

from ..core.model import Trace

CALL_OUTCOMES = ("tool_result", "return")


def calls_succeeded(trace: Trace) -> float:
    """The share of tool results and agent returns that did not fail (``status`` is not
    ``"error"``); 1.0 for a trace with none of them."""
    outcomes = [e for e in trace.events if e.type in CALL_OUTCOMES]
    if not outcomes:
        return 1.0
    return sum(e.status != "error" for e in outcomes) / len(outcomes)
