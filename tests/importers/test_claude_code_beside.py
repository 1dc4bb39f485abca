"""Old-layout sub-agent files (agent-<id>.jsonl beside the sessions): each is matched to its
session, and a folder's agent files are read once for all its sessions, not once per session."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from orchestrace.importers import claude_code as cc


def _record(sid: str, uuid: str, kind: str, text: str, minute: int, **extra: object) -> bytes:
    message = {"role": kind, "content": text if kind == "user" else [{"type": "text", "text": text}]}
    rec = {"type": kind, "sessionId": sid, "uuid": uuid, "timestamp": f"2025-01-01T00:{minute:02d}:00Z"}
    return orjson.dumps({**rec, **extra, "message": message}) + b"\n"


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    for s in ("s1", "s2", "s3"):
        (folder / f"{s}.jsonl").write_bytes(
            _record(s, f"{s}-u", "user", "hello", 0) + _record(s, f"{s}-a", "assistant", "hi", 1)
        )
    owners = {"a1": "s1", "a2": "s1", "b1": "s2", "c1": "s9"}  # c1 belongs to no session here
    for aid, s in owners.items():
        (folder / f"agent-{aid}.jsonl").write_bytes(
            _record(s, f"{aid}-u", "user", "task", 2, isSidechain=True, agentId=aid)
            + _record(s, f"{aid}-a", "assistant", "done", 3, isSidechain=True, agentId=aid)
        )
    return folder


def test_agents_matched_and_heads_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _folder(tmp_path)
    cc._sessions_of_agents.cache_clear()
    reads: list[str] = []
    real = cc.first_json_lines

    def counting(path, k=5):  # type: ignore[no-untyped-def]
        reads.append(Path(path).name)
        return real(path, k)

    monkeypatch.setattr(cc, "first_json_lines", counting)
    got = {}
    for s in ("s1", "s2", "s3"):
        (tr,) = cc.load(folder / f"{s}.jsonl")
        got[s] = sorted(e.attrs["agent_id"] for e in tr.events if e.type == "spawn")
    assert got == {"s1": ["a1", "a2"], "s2": ["b1"], "s3": []}
    assert sorted(reads) == ["agent-a1.jsonl", "agent-a2.jsonl", "agent-b1.jsonl", "agent-c1.jsonl"]


def test_a_changed_agent_file_is_read_again(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    cc._sessions_of_agents.cache_clear()
    (tr,) = cc.load(folder / "s3.jsonl")
    assert not [e for e in tr.events if e.type == "spawn"]
    agent = folder / "agent-c1.jsonl"
    agent.write_bytes(agent.read_bytes().replace(b'"s9"', b'"s3","note":"moved"'))
    (tr,) = cc.load(folder / "s3.jsonl")
    assert [e.attrs["agent_id"] for e in tr.events if e.type == "spawn"] == ["c1"]
