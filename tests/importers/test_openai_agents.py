"""OpenAI Agents SDK: live runs through the real Runner (scripted model, no network) recorded by
the tracing processor, and import of the SDK's exported span items."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

if not os.environ.get("CI"):  # under CI it must run (requirements.txt pins openai-agents)
    pytest.importorskip("agents", reason="openai-agents not installed (requirements.txt)")

from agents import (  # noqa: E402
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    ModelResponse,
    RunConfig,
    Runner,
    Usage,
    function_tool,
    input_guardrail,
    set_trace_processors,
    set_tracing_disabled,
    trace,
)
from agents.models.interface import Model  # noqa: E402
from agents.tracing import generation_span  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402

from orchestrace import importers  # noqa: E402
from orchestrace.core.io import load  # noqa: E402
from orchestrace.core.validate import validate_trace  # noqa: E402
from orchestrace.importers.agents_processor import OrchestraceProcessor  # noqa: E402
from orchestrace.importers.openai_agents import convert  # noqa: E402


def _msg(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="m", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )  # fmt: skip


def _call(name: str, args: str, cid: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", name=name, arguments=args, call_id=cid, id=cid)


class ScriptedModel(Model):
    """Plays a fixed list of responses, recording a generation span per call like real models do."""

    def __init__(self, script: list[list], usage: tuple[int, int]) -> None:
        self.script = list(script)
        self.usage = usage

    async def get_response(
        self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, **kw
    ):
        out = self.script.pop(0)
        with generation_span(
            model="scripted-1", usage={"input_tokens": self.usage[0], "output_tokens": self.usage[1]}
        ):
            pass
        u = Usage(
            requests=1, input_tokens=self.usage[0], output_tokens=self.usage[1], total_tokens=sum(self.usage)
        )
        return ModelResponse(output=out, usage=u, response_id=None)

    def stream_response(self, *a, **kw):  # pragma: no cover - not used
        raise NotImplementedError


@function_tool
def run_tests(path: str) -> str:
    """Run the tests under a path."""
    raise RuntimeError("2 tests failed")


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return "def f(): pass"


@input_guardrail
async def no_secrets(ctx, agent, user_input) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered="password" in str(user_input))


@pytest.fixture
def processor(tmp_path: Path):
    set_tracing_disabled(False)
    proc = OrchestraceProcessor(str(tmp_path / "live.jsonl"), raw_out=str(tmp_path / "raw.jsonl"))
    set_trace_processors([proc])  # replaces the OpenAI backend exporter: nothing leaves the machine
    yield proc
    set_trace_processors([])
    set_tracing_disabled(True)


def _team():
    coder = Agent(
        name="coder", instructions="fix", tools=[read_file, run_tests],
        model=ScriptedModel([[_call("read_file", '{"path": "a.py"}', "c1")], [_call("run_tests", '{"path": "."}', "c2")], [_msg("done")]], (50, 5)),
    )  # fmt: skip
    triage = Agent(
        name="triage", instructions="route", handoffs=[coder], input_guardrails=[no_secrets],
        model=ScriptedModel([[_call("transfer_to_coder", "{}", "h1")]], (30, 2)),
    )  # fmt: skip
    return triage


def _errors(tr) -> list[str]:
    return [str(f) for f in validate_trace(tr) if f.severity == "error"]


def test_live_run_with_handoff_and_tools(processor: OrchestraceProcessor, tmp_path: Path) -> None:
    with trace("fix-bug", group_id="g1"):
        result = asyncio.run(Runner.run(_team(), "fix the bug", run_config=RunConfig(tracing_disabled=False)))
    assert result.final_output == "done"
    (tr,) = processor.traces
    assert _errors(tr) == []
    kinds = [(e.type, e.agent, e.to, e.tool) for e in tr.events if e.type != "orchestrator_decision"]
    assert ("spawn", "triage", "coder", None) in kinds  # handoff = delegation
    assert [k[3] for k in kinds if k[0] == "tool_call"] == ["read_file", "run_tests"]
    failed = [e for e in tr.events if e.type == "tool_result" and e.tool == "run_tests"]
    assert failed[0].status == "error"
    llm = [e for e in tr.events if e.type == "orchestrator_decision"]
    assert [e.agent for e in llm] == ["triage", "coder", "coder", "coder"]
    assert tr.costs["tokens_in"] == 30 + 3 * 50 and tr.costs["tokens_out"] == 2 + 3 * 5
    assert tr.task_id == "fix-bug" and tr.metadata["group_id"] == "g1"
    # the processor also wrote the trace and the raw SDK items; importing the items gives it back
    assert load(tmp_path / "live.jsonl")[0].trace_id == tr.trace_id
    raw = tmp_path / "raw.jsonl"
    assert importers.detect(raw) == "openai-agents"
    (again,) = list(importers.load(raw))
    assert [(e.type, e.agent, e.tool) for e in again.events] == [(e.type, e.agent, e.tool) for e in tr.events]


def test_guardrail_trip_is_a_safety_event(processor: OrchestraceProcessor) -> None:
    with pytest.raises(InputGuardrailTripwireTriggered):
        with trace("leak"):
            asyncio.run(
                Runner.run(_team(), "my password is hunter2", run_config=RunConfig(tracing_disabled=False))
            )
    (tr,) = processor.traces
    assert _errors(tr) == []
    safety = [e for e in tr.events if e.type == "safety_event"]
    assert len(safety) == 1 and safety[0].attrs["guardrail"] == "no_secrets"


def test_disabled_tracing_records_nothing(processor: OrchestraceProcessor) -> None:
    set_tracing_disabled(True)
    asyncio.run(Runner.run(_team(), "fix the bug"))
    assert processor.traces == []


def test_import_exported_items_with_agent_as_tool(tmp_path: Path) -> None:
    """Items as the SDK backend exporter uploads them ({"data": [...]}), hand-written."""
    t = "2026-01-01T00:00:{:02d}+00:00"
    items = [
        {"object": "trace", "id": "trace_1", "workflow_name": "research", "group_id": None, "metadata": None},
        {"object": "trace.span", "id": "s1", "trace_id": "trace_1", "parent_id": None, "started_at": t.format(0), "ended_at": t.format(9), "span_data": {"type": "agent", "name": "lead"}, "error": None},
        {"object": "trace.span", "id": "s2", "trace_id": "trace_1", "parent_id": "s1", "started_at": t.format(1), "ended_at": t.format(2), "span_data": {"type": "generation", "model": "gpt-x", "usage": {"input_tokens": 10, "output_tokens": 4}}, "error": None},
        {"object": "trace.span", "id": "s3", "trace_id": "trace_1", "parent_id": "s1", "started_at": t.format(2), "ended_at": t.format(7), "span_data": {"type": "function", "name": "searcher", "input": "{}", "output": "ok"}, "error": None},
        {"object": "trace.span", "id": "s4", "trace_id": "trace_1", "parent_id": "s3", "started_at": t.format(3), "ended_at": t.format(6), "span_data": {"type": "agent", "name": "searcher"}, "error": None},
        {"object": "trace.span", "id": "s5", "trace_id": "trace_1", "parent_id": "s4", "started_at": t.format(4), "ended_at": t.format(5), "span_data": {"type": "response", "response_id": "r", "usage": {"input_tokens": 3, "output_tokens": 1}}, "error": None},
        {"object": "trace.span", "id": "s6", "trace_id": "trace_1", "parent_id": "s1", "started_at": t.format(8), "ended_at": t.format(8), "span_data": {"type": "custom", "name": "turn", "data": {"usage": {"input_tokens": 13}}}, "error": None},
        {"object": "trace.span", "id": "s7", "trace_id": "trace_1", "parent_id": "s1", "started_at": t.format(8), "ended_at": t.format(9), "span_data": {"type": "speech", "model": "tts"}, "error": None},
    ]  # fmt: skip
    f = tmp_path / "export.json"
    f.write_text(json.dumps({"data": items}))
    (tr,) = list(importers.load(f))
    assert _errors(tr) == []
    assert [(e.type, e.agent, e.to, e.t) for e in tr.events] == [
        ("orchestrator_decision", "lead", None, 1.0),
        ("tool_call", "lead", None, 2.0),
        ("spawn", "lead", "searcher", 3.0),
        ("orchestrator_decision", "searcher", None, 4.0),
        ("return", "searcher", "lead", 6.0),
        ("tool_result", "lead", None, 7.0),
    ]
    assert tr.costs["tokens"] == 18  # the custom turn span's totals are not counted again
    assert tr.metadata["import"]["unknown_records"] == {"span speech": 1}
    assert convert(items)[0].trace_id == "openai-agents:trace_1"
