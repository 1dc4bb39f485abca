"""opencode storage importer: the public sample and a storage with a sub-agent (task) session."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrace import importers
from orchestrace.core.validate import validate_trace
from orchestrace.importers import opencode


def _errors(tr) -> list[str]:
    return [str(f) for f in validate_trace(tr) if f.severity == "error"]


def test_opencode_sample(data: Path) -> None:
    f = data / "claude-code/test/fixtures/opencode/session/test-project/test-session.json"
    assert importers.detect(f) == "opencode"
    (tr,) = list(opencode.load(f))
    assert _errors(tr) == []
    # hand-read: msg-001 user at 0 s, msg-002 assistant at +1 s with 100 in, 50 + 10 reasoning out, $0.01
    assert [(e.type, e.t) for e in tr.events] == [("human_intervention", 0.0), ("message", 1.0)]
    assert (tr.events[1].tokens_in, tr.events[1].tokens_out, tr.events[1].cost_usd) == (100, 60, 0.01)
    assert tr.costs["usd"] == 0.01


def _w(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def test_task_tool_spawns_child_session(tmp_path: Path) -> None:
    s = tmp_path / "storage"
    t = 1_750_000_000_000
    _w(s / "session/p/ses_a.json", {"id": "ses_a", "projectID": "p", "time": {"created": t}})
    _w(
        s / "session/p/ses_b.json",
        {"id": "ses_b", "projectID": "p", "parentID": "ses_a", "time": {"created": t + 2000}},
    )
    _w(
        s / "message/ses_a/msg_1.json",
        {"id": "msg_1", "sessionID": "ses_a", "role": "user", "time": {"created": t}},
    )
    _w(
        s / "part/msg_1/prt_1.json",
        {"id": "prt_1", "messageID": "msg_1", "type": "text", "text": "audit the repo"},
    )
    _w(
        s / "message/ses_a/msg_2.json",
        {
            "id": "msg_2",
            "sessionID": "ses_a",
            "role": "assistant",
            "time": {"created": t + 1000, "completed": t + 9000},
            "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 20, "write": 0}},
        },
    )
    _w(
        s / "part/msg_2/prt_2.json",
        {
            "id": "prt_2",
            "messageID": "msg_2",
            "type": "tool",
            "tool": "task",
            "callID": "c1",
            "state": {
                "status": "completed",
                "input": {"prompt": "look at a.py", "subagent_type": "general"},
                "output": "a.py ok",
                "time": {"start": t + 1500, "end": t + 8000},
            },
        },
    )
    _w(
        s / "part/msg_2/prt_3.json",
        {
            "id": "prt_3",
            "messageID": "msg_2",
            "type": "tool",
            "tool": "bash",
            "callID": "c2",
            "state": {
                "status": "error",
                "input": {"command": "make"},
                "error": "exit 2",
                "time": {"start": t + 8500, "end": t + 8600},
            },
        },
    )
    _w(
        s / "message/ses_b/msg_3.json",
        {"id": "msg_3", "sessionID": "ses_b", "role": "user", "time": {"created": t + 2000}},
    )
    _w(
        s / "message/ses_b/msg_4.json",
        {
            "id": "msg_4",
            "sessionID": "ses_b",
            "role": "assistant",
            "time": {"created": t + 3000},
            "tokens": {"input": 7, "output": 3, "cache": {}},
        },
    )
    _w(s / "part/msg_4/prt_4.json", {"id": "prt_4", "messageID": "msg_4", "type": "text", "text": "a.py ok"})
    planned = importers.plan(importers.walk([s]))
    assert [Path(p).name for p, _ in planned] == ["ses_a.json"]  # the child comes with its parent
    (tr,) = list(opencode.load(s / "session/p/ses_a.json"))
    assert _errors(tr) == []
    assert [(e.type, e.agent, e.to, e.t) for e in tr.events] == [
        ("human_intervention", "user", "opencode", 0.0),
        ("spawn", "opencode", "subagent-1", 1.5),
        ("message", "opencode", "subagent-1", 2.0),
        ("message", "subagent-1", None, 3.0),
        ("return", "subagent-1", "opencode", 8.0),
        ("tool_call", "opencode", None, 8.5),
        ("tool_result", "opencode", None, 8.6),
    ]
    assert tr.events[-1].status == "error" and tr.events[1].role == "general"
    assert (tr.costs["tokens_in"], tr.costs["tokens_out"]) == (37, 8)
