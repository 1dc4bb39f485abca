"""Corpus aggregation: percentiles, bands, groups, MAS-native coverage, robustness margin."""

from __future__ import annotations

import pytest
from measure_kit import KIMI, stages_trace
from tracekit import ev, mk

from orchestrace.measure import (
    analyze,
    band,
    corpus_report,
    coverage,
    group_breakdown,
    mas_native_line,
    robustness_margin,
    summarize,
)


def test_summarize_skips_nulls_and_interpolates_percentiles():
    s = summarize([4.0, None, 1.0, 3.0, 2.0])
    assert s == {"n": 4, "mean": 2.5, "p10": 1.3, "p50": 2.5, "p90": 3.7, "min": 1.0, "max": 4.0}
    assert summarize([None, None])["n"] == 0 and summarize([])["mean"] is None


def test_bands():
    assert [band(n) for n in (1, 10, 11, 100, 101, 1000, 1001)] == [
        "1-10",
        "1-10",
        "11-100",
        "11-100",
        "101-1000",
        "101-1000",
        ">1000",
    ]


def test_corpus_report_bands_groups_and_coverage():
    small = mk([ev("a", 0, "tool_call", "o", tool="x", t_end=1)], topology="harness", trace_id="s")
    big = stages_trace(KIMI, trace_id="k")
    big.topology = "swarm"
    results = [analyze(small), analyze(big)]
    rep = corpus_report(results, "topology")
    assert rep["traces"] == 2
    assert {k: v["traces"] for k, v in rep["bands"].items()} == {"1-10": 1, "11-100": 1}
    assert rep["bands"]["11-100"]["summary"]["critical_steps"]["mean"] == 12
    assert set(rep["groups"]) == {"harness", "swarm"}
    # no success, no tokens, no messages, no trust data, nothing corrupted: only E2 (spawns) is covered
    assert rep["coverage"] == {"E1": False, "E2": True, "E3": False, "E4": False}
    assert not rep["mas_native"]
    assert mas_native_line(rep) == "not MAS-native: covers 1 of E1-E4 (E2); missing E1, E3, E4"
    results[0]["task_success"] = 1.0
    results[1]["protocol_overhead"] = 0.2
    assert sum(coverage(results).values()) == 3


def test_group_breakdown_sums_over_traces():
    a = mk(
        [ev("1", 0, "message", "p", to="q", tokens_in=5), ev("2", 1, "message", "q", to="p", tokens_out=7)]
    )
    b = mk([ev("1", 0, "message", "p", to="q", tokens_in=10)])
    g = group_breakdown([a, b], "agent")
    assert g["p"]["traces"] == 2 and g["p"]["tokens"] == 15 and g["p"]["messages"] == 2
    assert g["q"]["traces"] == 1 and g["q"]["tokens_out"] == 7


def test_robustness_margin_pairs_tasks():
    def t(task, s):
        return mk([ev("a", 0, "aggregate", "o")], task_id=task, metrics={"task_success": s})

    clean = [t("a", 1.0), t("a", 1.0), t("b", 1.0), t("c", 1.0)]
    perturbed = [t("a", 0.0), t("a", 1.0), t("b", 0.0), t("d", 0.0)]
    # tasks a and b: clean means 1, 1; perturbed means 0.5, 0 -> 1 - 0.25
    assert robustness_margin(clean, perturbed) == pytest.approx(0.75)
    assert robustness_margin(clean, [t("z", 0.0)]) is None
