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
    assert errs == failed and len(failed) == 4
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


def _rollout(path: Path, recs: list[dict]) -> None:
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")


def test_subagent_rollouts_hang_under_their_spawn(tmp_path: Path) -> None:
    """Multi-agent Codex: the child thread's rollout (source.subagent.thread_spawn) joins the parent."""
    ts = "2026-05-11T08:00:{:02d}Z"

    def tok(i: int, total: int) -> dict:
        usage = {"input_tokens": total, "output_tokens": 1}
        return {
            "timestamp": ts.format(i),
            "type": "event_msg",
            "payload": {
                "type": "token_count",
                "info": {"total_token_usage": usage, "last_token_usage": usage},
            },
        }

    parent = [
        {"timestamp": ts.format(0), "type": "session_meta", "payload": {"id": "P", "source": "cli"}},
        {"timestamp": ts.format(1), "type": "event_msg", "payload": {"type": "user_message", "message": "review both files"}},
        {"timestamp": ts.format(2), "type": "response_item", "payload": {"type": "function_call", "name": "spawn_agent", "arguments": "{\"message\": \"review a.py\"}", "call_id": "s1"}},
        tok(2, 100),
        {"timestamp": ts.format(3), "type": "response_item", "payload": {"type": "function_call_output", "call_id": "s1", "output": "{\"agent_id\": \"C1\", \"nickname\": \"Ada\"}"}},
        {"timestamp": ts.format(4), "type": "response_item", "payload": {"type": "function_call", "name": "wait", "arguments": "{\"ids\": [\"C1\"]}", "call_id": "w1"}},
        {"timestamp": ts.format(30), "type": "response_item", "payload": {"type": "function_call_output", "call_id": "w1", "output": "{\"status\": {\"C1\": \"completed\"}}"}},
    ]  # fmt: skip
    thread = {"subagent": {"thread_spawn": {"parent_thread_id": "P", "depth": 1, "agent_nickname": "Ada"}}}
    child = [
        {"timestamp": ts.format(3), "type": "session_meta", "payload": {"id": "C1", "source": thread}},
        {"timestamp": ts.format(3), "type": "event_msg", "payload": {"type": "user_message", "message": "review a.py"}},
        {"timestamp": ts.format(5), "type": "response_item", "payload": {"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\": \"cat a.py\"}", "call_id": "x1"}},
        tok(5, 40),
        {"timestamp": ts.format(6), "type": "response_item", "payload": {"type": "function_call_output", "call_id": "x1", "output": "print(1)"}},
        {"timestamp": ts.format(9), "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a.py is fine"}]}},
    ]  # fmt: skip
    orphan_meta = {"subagent": {"thread_spawn": {"parent_thread_id": "P", "depth": 1}}}
    orphan = [
        {"timestamp": ts.format(10), "type": "session_meta", "payload": {"id": "C2", "source": orphan_meta}},
        {"timestamp": ts.format(11), "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}},
    ]  # fmt: skip
    _rollout(tmp_path / "rollout-1-P.jsonl", parent)
    _rollout(tmp_path / "rollout-2-C1.jsonl", child)
    _rollout(tmp_path / "rollout-3-C2.jsonl", orphan)
    planned = importers.plan(importers.walk([tmp_path]))
    assert [Path(p).name for p, _ in planned] == ["rollout-1-P.jsonl"]  # children come with the parent
    (tr,) = list(codex.load(tmp_path / "rollout-1-P.jsonl"))
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []
    spawns = [e for e in tr.events if e.type == "spawn"]
    assert [(e.to, e.attrs.get("agent_id"), e.attrs.get("synthetic")) for e in spawns] == [
        ("subagent-1", "C1", None),
        ("subagent-2", "C2", True),
    ]
    assert spawns[0].attrs["nickname"] == "Ada"
    child_events = [(e.type, e.tool) for e in tr.events if e.agent == "subagent-1"]
    assert child_events == [
        ("tool_call", "exec_command"),
        ("tool_result", "exec_command"),
        ("message", None),
        ("return", None),
    ]
    ret = next(e for e in tr.events if e.type == "return" and e.agent == "subagent-1")
    assert ret.to == "codex" and ret.t == 9.0
    prompt = next(
        e for e in tr.events if e.attrs and e.attrs.get("kind") == "prompt" and e.to == "subagent-1"
    )
    assert (prompt.type, prompt.agent, prompt.t) == ("message", "codex", 3.0)
    assert tr.costs["tokens_in"] == 140


def test_web_search_results_are_external(data: Path) -> None:
    """The rollout has 3 ``web_search_call`` records (grep); their results are untrusted web content."""
    (rollout,) = sorted((data / "codex").glob("rollout-*.jsonl"))
    tr = next(codex.load(rollout))
    web = [e for e in tr.events if e.type == "tool_result" and e.tool == "web_search"]
    assert len(web) == 3
    assert all(e.trusted is False and e.attrs["external"] is True for e in web)
    others = [e for e in tr.events if e.type == "tool_result" and e.tool != "web_search"]
    assert others and not any((e.attrs or {}).get("external") for e in others)


def test_a_byte_order_mark_loses_nothing(rollout: Path, tmp_path: Path) -> None:
    # the BOM made line 1 (session_meta) unreadable: the trace id came from the file name and the
    # session metadata was gone, with only "1 unreadable line(s) skipped" said
    marked = tmp_path / rollout.name
    marked.write_bytes(b"\xef\xbb\xbf" + rollout.read_bytes())
    assert importers.detect(marked) == "codex"
    plain, bom = next(codex.load(rollout)), next(codex.load(marked))
    assert bom.trace_id == plain.trace_id == "codex:019e1625-789d-76c0-80ab-3724b5ddb799"
    assert bom.metadata["session"] == plain.metadata["session"]
    assert "bad_lines" not in bom.metadata["import"] and len(bom.events) == len(plain.events)
