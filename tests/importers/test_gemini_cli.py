"""Gemini CLI session importer on the sample of the public data."""

from __future__ import annotations

from pathlib import Path

from orchestrace import importers
from orchestrace.core.validate import validate_trace


def test_gemini_sample(data: Path) -> None:
    f = data / "claude-code/test/fixtures/gemini/session-sample.jsonl"
    assert importers.detect(f) == "gemini-cli"
    (tr,) = list(importers.load(f))
    assert [x for x in validate_trace(tr) if x.severity == "error"] == []
    # hand-read from the file: 2 prompts, 2 thoughts, 2 answers, 1 search call; tokens 50+80+100 in, 20+40+30 out
    assert [e.type for e in tr.events] == [
        "human_intervention", "orchestrator_decision", "message",
        "human_intervention", "orchestrator_decision", "message",
        "tool_call", "tool_result",
    ]  # fmt: skip
    assert (tr.costs["tokens_in"], tr.costs["tokens_out"]) == (230, 90)
    assert tr.events[6].call_id == tr.events[7].call_id == "call-001"
    assert tr.events[1].t == 0.5 and tr.costs["wall_clock_s"] == 4.0
