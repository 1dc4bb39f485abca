"""OTLP/JSON written by hand with the mistakes a collector or a script can make: bad span times,
bad token counts, parent ids that lead round in a circle. Each span must still be imported (with
the mistake noted), never dropped, mistimed or the cause of a skipped file."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from orchestrace.core.validate import validate_trace
from orchestrace.importers import otlp

T0 = 1_700_000_000_000_000_000  # ns


def _attr(k: str, v: Any) -> dict[str, Any]:
    return {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}


def _span(sid: str, parent: str | None, name: str, start_s: int, end_s: int, attrs: dict[str, Any]) -> dict:
    d = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": sid,
        "name": name,
        "startTimeUnixNano": str(T0 + start_s * 10**9),
        "endTimeUnixNano": str(T0 + end_s * 10**9),
        "attributes": [_attr(k, v) for k, v in attrs.items()],
    }
    if parent:
        d["parentSpanId"] = parent
    return d


A, C, X = "a000000000000001", "a000000000000002", "a000000000000003"
SPANS = [
    _span(A, None, "invoke_agent planner", 0, 6, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}),
    _span(C, A, "chat gpt-4o", 1, 2, {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20}),
    _span(X, A, "execute_tool search", 3, 5, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}),
]  # fmt: skip


def _load(tmp_path: Path, spans: list[dict]):
    p = tmp_path / "spans.json"
    p.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    (tr,) = list(otlp.load(p))
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []
    return tr


def test_the_hand_made_request_as_read(tmp_path):
    tr = _load(tmp_path, SPANS)
    assert [(e.type, e.t, e.t_end) for e in tr.events] == [
        ("orchestrator_decision", 1.0, 2.0),
        ("tool_call", 3.0, None),
        ("tool_result", 5.0, None),
    ]
    assert (tr.costs["tokens_in"], tr.costs["tokens_out"]) == (100, 20)


@pytest.mark.parametrize("bad", [str(2**70), "-5", "soon", "0"])
def test_a_bad_start_time_falls_back_to_the_span_end(tmp_path, bad):
    # read as 0 ns, the chat was put at 1970: t 0 while the tool call came at t 1.7e9
    spans = copy.deepcopy(SPANS)
    spans[1]["startTimeUnixNano"] = bad
    tr = _load(tmp_path, spans)
    assert [e.t for e in tr.events] == [2.0, 3.0, 5.0]
    assert tr.metadata["import"]["bad_values"] == {"span time": 1}


@pytest.mark.parametrize("bad", [-100, "many", 2**70])
def test_a_bad_token_count_is_not_read_and_the_trace_imports(tmp_path, bad):
    # a negative count made the trace invalid and the whole file was skipped
    spans = copy.deepcopy(SPANS)
    spans[1]["attributes"][1] = (
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": str(bad)}}
        if isinstance(bad, int)
        else _attr("gen_ai.usage.input_tokens", bad)
    )
    tr = _load(tmp_path, spans)
    assert tr.events[0].tokens_in is None and tr.events[0].tokens_out == 20
    assert tr.metadata["import"]["bad_values"] == {"gen_ai.usage token count": 1}


def test_spans_in_a_parent_cycle_are_imported(tmp_path):
    # a span that is its own parent vanished (with its tokens); a cycle of two parents left
    # no root at all and the file was "empty or held no log of the format"
    spans = copy.deepcopy(SPANS)
    spans[1]["parentSpanId"] = C
    tr = _load(tmp_path, spans)
    assert [e.type for e in tr.events] == ["orchestrator_decision", "tool_call", "tool_result"]
    spans = copy.deepcopy(SPANS)
    spans[0]["parentSpanId"] = C
    tr = _load(tmp_path, spans)
    assert [e.type for e in tr.events] == ["orchestrator_decision", "tool_call", "tool_result"]
    assert tr.metadata["import"]["bad_values"] == {"span in or under a parent cycle": 3}


def test_caller_and_transfer_attributes_are_spawns_and_handoffs(tmp_path):
    """``gen_ai.transfer.*`` on a tool span (semantic-conventions-genai) spawns its target, once;
    ``gen_ai.caller.*`` on an agent span names its spawner, or none for a workflow."""
    tool = {"gen_ai.operation.name": "execute_tool"}
    P, T1, T2, W, AU = (f"b00000000000000{i}" for i in range(1, 6))
    spans = [
        _span(P, None, "invoke_agent planner", 0, 10, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}),
        _span(T1, P, "execute_tool ask", 1, 3, {**tool, "gen_ai.tool.name": "ask", "gen_ai.transfer.target.name": "researcher", "gen_ai.transfer.mode": "return_to_caller"}),
        _span(AU, P, "invoke_agent auditor", 4, 5, {"gen_ai.agent.name": "auditor", "gen_ai.caller.type": "workflow"}),
        _span(T2, P, "execute_tool transfer_to_writer", 6, 7, {**tool, "gen_ai.tool.name": "transfer_to_writer", "gen_ai.transfer.target.name": "writer", "gen_ai.transfer.mode": "pass_control"}),
        _span(W, None, "invoke_agent writer", 8, 9, {"gen_ai.agent.name": "writer", "gen_ai.caller.type": "agent", "gen_ai.caller.name": "planner"}),
    ]  # fmt: skip
    tr = _load(tmp_path, spans)
    shown = [
        (e.type, e.agent, e.to, (e.attrs or {}).get("kind"))
        for e in tr.events
        if e.type in ("spawn", "return")
    ]
    assert shown == [
        ("spawn", "planner", "researcher", "delegation"),
        ("return", "researcher", "planner", None),
        ("spawn", "planner", "writer", "handoff"),  # once: the writer's own span says the same
    ]


def test_finish_reason_length_is_a_truncated_call_both_ways(tmp_path):
    """``gen_ai.response.finish_reasons`` ["length"] (OTel GenAI) is the runtime's ``truncated``: an
    imported chat span carries it, and an exported cut-off return says it."""
    from orchestrace.core.build import TraceBuilder
    from orchestrace.core.model import Event
    from orchestrace.export.otlp import iter_otlp

    spans = copy.deepcopy(SPANS)
    cut = {
        "key": "gen_ai.response.finish_reasons",
        "value": {"arrayValue": {"values": [{"stringValue": "length"}]}},
    }
    spans[1]["attributes"].append(cut)
    (llm,) = [e for e in _load(tmp_path, spans).events if e.type == "orchestrator_decision"]
    assert llm.attrs["truncated"] is True
    spans[1]["attributes"][-1] = {**cut, "value": {"arrayValue": {"values": [{"stringValue": "stop"}]}}}
    (llm,) = [e for e in _load(tmp_path, spans).events if e.type == "orchestrator_decision"]
    assert "truncated" not in llm.attrs

    b = TraceBuilder()
    b.add(Event(id="e0", t=0.0, type="spawn", agent="orchestrator", to="w"))
    b.add(Event(id="e1", t=1.0, type="return", agent="w", content="cats\ncats and", tokens_out=6, model="m",
                attrs={"truncated": True}), ("e0", "spawn"))  # fmt: skip
    b.add(
        Event(id="e2", t=2.0, type="return", agent="w", content="cats", tokens_out=2, model="m"),
        ("e1", "causal"),
    )
    req = next(iter_otlp([b.trace(trace_id="t", task_id="task")]))
    said = [
        a["value"]
        for rs in req["resourceSpans"]
        for ss in rs["scopeSpans"]
        for s in ss["spans"]
        for a in s["attributes"]
        if a["key"] == "gen_ai.response.finish_reasons"
    ]
    assert said == [{"arrayValue": {"values": [{"stringValue": "length"}]}}]  # the cut-off call only
