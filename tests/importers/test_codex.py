"""Codex CLI rollout importer on the real rollout of the public data."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from orchestrace import importers
from orchestrace.core.validate import validate_trace
from orchestrace.importers import codex


@pytest.fixture(scope="module")
def rollout(data: Path) -> Path:
    return next((data / "codex").glob("rollout-*.jsonl"))


def test_rollout_imports_and_validates(rollout: Path) -> None:
    assert importers.detect(rollout) == "codex"
    tr = next(codex.load(rollout))
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []
    recs = [json.loads(line) for line in rollout.read_text().splitlines() if line.strip()]
    kinds = Counter((r["type"], r["payload"].get("type")) for r in recs)
    names = Counter(r["payload"]["name"] for r in recs if r["payload"].get("type") == "function_call")
    n_calls = kinds[("response_item", "function_call")] + kinds[("response_item", "custom_tool_call")]
    n_calls += kinds[("response_item", "web_search_call")] - names["update_plan"]
    assert sum(e.type == "tool_call" for e in tr.events) == n_calls == 103
    assert sum(e.type == "tool_result" for e in tr.events) == n_calls
    assert (
        sum(e.type == "orchestrator_decision" and e.tool == "update_plan" for e in tr.events)
        == names["update_plan"]
        == 2
    )
    assert sum(e.type == "human_intervention" for e in tr.events) == kinds[("event_msg", "user_message")] == 2
    # token totals: the trace sums to the rollout's final cumulative usage
    final = [
        r["payload"]["info"]["total_token_usage"] for r in recs if r["payload"].get("type") == "token_count"
    ][-1]
    assert tr.costs["tokens_in"] == final["input_tokens"] == 6055836
    assert tr.costs["tokens_out"] == final["output_tokens"] == 9118
    # failed commands become status error
    failed = {
        r["payload"]["call_id"]
        for r in recs
        if r["payload"].get("type") == "exec_command_end" and r["payload"].get("exit_code") not in (None, 0)
    }
    errs = {e.call_id for e in tr.events if e.type == "tool_result" and e.status == "error"}
    assert failed <= errs and failed
    assert tr.metadata["session"]["cli_version"] == "0.125.0"
    assert tr.events[-1].t == pytest.approx(tr.costs["wall_clock_s"], abs=1.0)


def test_spawn_agent_tools(tmp_path: Path) -> None:
    """Collaboration tools: spawn_agent -> spawn, send_input -> message, close_agent -> despawn."""
    ts = "2026-05-11T08:00:0{}Z"
    recs = [
        {"timestamp": ts.format(0), "type": "session_meta", "payload": {"id": "s", "cli_version": "0.130.0"}},
        {"timestamp": ts.format(1), "type": "event_msg", "payload": {"type": "user_message", "message": "split it"}},
        {"timestamp": ts.format(2), "type": "response_item", "payload": {"type": "function_call", "name": "spawn_agent", "arguments": "{\"message\": \"do A\"}", "call_id": "c1"}},
        {"timestamp": ts.format(3), "type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "{\"agent_id\": \"ag-7\"}"}},
        {"timestamp": ts.format(4), "type": "response_item", "payload": {"type": "function_call", "name": "send_input", "arguments": "{\"id\": \"ag-7\", \"message\": \"more\"}", "call_id": "c2"}},
        {"timestamp": ts.format(5), "type": "response_item", "payload": {"type": "function_call", "name": "close_agent", "arguments": "{\"id\": \"ag-7\"}", "call_id": "c3"}},
        {"timestamp": ts.format(6), "type": "event_msg", "payload": {"type": "brand_new_event"}},
    ]  # fmt: skip
    f = tmp_path / "rollout-x.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    tr = next(codex.load(f))
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []
    assert [(e.type, e.to) for e in tr.events[1:]] == [
        ("spawn", "subagent-1"),
        ("message", "subagent-1"),
        ("despawn", "subagent-1"),
    ]
    assert tr.metadata["import"]["unknown_records"] == {"event_msg/brand_new_event": 1}
