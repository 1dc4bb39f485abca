"""measure.pipeline (what ``analyze`` computes over files): a failed file's traces count for nothing."""

from __future__ import annotations

from tracekit import ev, mk

from orchestrace.measure.pipeline import corpus_analysis, measure_traces


def _trace(tid: str, tokens_in: int):
    return mk(
        [
            ev("d", 0, "orchestrator_decision", "o", tokens_in=tokens_in),
            ev("c", 1, "tool_call", "w", t_end=3, tool="x", tokens_out=2),
        ],
        [("d", "c", "causal")],
        trace_id=tid,
    )


def test_traces_of_a_failed_file_are_dropped_from_the_report_and_the_group_sums():
    traces = [(0, _trace("a", 5)), (1, _trace("b", 100)), (2, _trace("c", 7))]
    measured = [(m.file, m.metrics, m.groups) for m in measure_traces(traces, set(), by="agent")]
    assert [r["trace_id"] for _, r, _ in measured] == ["a", "b", "c"]
    result = corpus_analysis(measured, {1}, by="agent")  # file 1 failed after its trace was read
    assert result is not None
    assert [r["trace_id"] for r in result.traces] == ["a", "c"] and result.corpus["traces"] == 2
    assert result.groups is not None and result.corpus["groups"] is result.groups
    assert (result.groups["o"]["traces"], result.groups["o"]["tokens_in"]) == (2, 5 + 7)
    assert (result.groups["w"]["tool_calls"], result.groups["w"]["tokens_out"]) == (2, 4)
    assert corpus_analysis(measured, {0, 1, 2}) is None
