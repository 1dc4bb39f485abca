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


def test_a_trace_met_again_with_the_same_content_is_measured_once():
    # analyze examples/runs/ --by agent counted a byte-identical replay as a second trace, where
    # ingest stores it once; with the same id and other content both are measured (ingest: OT310)
    from orchestrace.measure.pipeline import Repeats

    a, other_a = _trace("a", 5), _trace("a", 6)
    traces = [(0, a), (0, _trace("a", 5)), (1, _trace("a", 5)), (1, _trace("b", 100)), (2, other_a)]
    repeats = Repeats()
    measured = list(measure_traces(traces, set(), by="agent", repeats=repeats))
    assert [(m.file, m.trace.trace_id) for m in measured] == [(0, "a"), (1, "b"), (2, "a")]
    assert repeats.duplicates == 2 and repeats.conflicts == [("a", 0, 2)]
    result = corpus_analysis([(m.file, m.metrics, m.groups) for m in measured], set(), by="agent")
    assert result is not None and result.groups is not None
    assert (result.groups["o"]["traces"], result.groups["o"]["tokens_in"]) == (3, 5 + 100 + 6)
