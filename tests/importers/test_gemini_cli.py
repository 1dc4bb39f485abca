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


def test_gemini_sample_with_a_byte_order_mark(data: Path, tmp_path: Path) -> None:
    # not detected, and not a Gemini session object (OT003), before the mark was dropped
    f = data / "claude-code/test/fixtures/gemini/session-sample.jsonl"
    marked = tmp_path / f.name
    marked.write_bytes(b"\xef\xbb\xbf" + f.read_bytes())
    assert importers.detect(marked) == "gemini-cli"
    ((plain,), (bom,)) = list(importers.load(f)), list(importers.load(marked))
    assert [(e.type, e.t) for e in bom.events] == [(e.type, e.t) for e in plain.events]
