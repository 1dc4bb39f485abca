"""The shipped verifier for traces without an outcome (README "End to end on real logs")."""

from __future__ import annotations

from tracekit import ev, mk

from orchestrace.reward.verifiers import calls_succeeded


def test_calls_succeeded_is_the_share_of_results_and_returns_that_did_not_fail():
    tr = mk(
        [
            ev("d", 0, "orchestrator_decision", "o"),
            ev("c1", 1, "tool_call", "o", tool="x", call_id="1"),
            ev("r1", 2, "tool_result", "x", tool="x", call_id="1", status="error"),
            ev("c2", 3, "tool_call", "o", tool="x", call_id="2"),
            ev("r2", 4, "tool_result", "x", tool="x", call_id="2"),
            ev("m", 5, "message", "o", to="o", status="error"),  # not a call outcome: ignored
        ]
    )
    assert calls_succeeded(tr) == 0.5  # r1 failed, r2 did not
    assert calls_succeeded(mk([ev("d", 0, "orchestrator_decision", "o")])) == 1.0
