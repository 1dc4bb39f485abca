"""core.counts (what ``stats`` prints): counts of a hand-made trace and of its event log."""

from __future__ import annotations

from tracekit import ev, mk

from orchestrace.core.counts import corpus_counts, file_counts, trace_counts
from orchestrace.core.io import save


def _trace():
    return mk(
        [
            ev("d", 1.0, "orchestrator_decision", "o", role="lead", tokens_in=10, tokens_out=5),
            ev("s", 2.0, "spawn", "o", role="lead", to="w"),
            ev("c", 3.0, "tool_call", "w", t_end=7.5, tool="x", tokens_in=3),
            ev("r", 6.0, "return", "w", to="o"),
        ],
        [("d", "s", "spawn"), ("s", "c", "spawn"), ("c", "r", "causal")],
        costs={"tokens": 18, "wall_clock_s": 6.5, "usd": 0.25},
    )


def test_counts_of_a_trace_by_hand():
    c = trace_counts(_trace(), "a.json")
    assert (c.events, c.edges, c.agents, c.event_tokens) == (4, 3, 2, 18)
    assert c.duration_s == 6.5  # first start 1.0 to the latest end 7.5 (the tool call's t_end)
    assert c.by_type == {"orchestrator_decision": 1, "spawn": 1, "tool_call": 1, "return": 1}
    assert c.by_agent == {"o": 2, "w": 2} and c.by_role == {"lead": 2}


def test_an_event_log_streams_to_the_same_counts_and_corpus_sums(tmp_path):
    save(_trace(), tmp_path / "a.json")
    save(_trace(), tmp_path / "a.events.jsonl")
    (whole,) = file_counts(str(tmp_path / "a.json"))
    (logged,) = file_counts(str(tmp_path / "a.events.jsonl"))
    assert (logged.events, logged.edges, logged.duration_s, logged.by_type) == (
        whole.events, whole.edges, whole.duration_s, whole.by_type
    )  # fmt: skip
    assert logged.trace_id == "tr" and logged.costs["usd"] == 0.25
    total = corpus_counts([whole, logged])
    assert (total.traces, total.events, total.edges, total.agents) == (2, 8, 6, 4)
    assert total.duration_s == 13.0 and total.costs["usd"] == 0.5 and total.by_role == {"lead": 4}
