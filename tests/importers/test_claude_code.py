"""Claude Code importer against every real session file of the public sample."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrace import importers
from orchestrace.cli import app
from orchestrace.core.errors import OrchestraceError
from orchestrace.core.io import load
from orchestrace.core.validate import validate_trace
from orchestrace.importers import claude_code as cc


def errors_of(trace) -> list[str]:
    return [str(f) for f in validate_trace(trace) if f.severity == "error"]


TEAM = "real_projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"


@pytest.fixture(scope="module")
def root(data: Path) -> Path:
    return data / "claude-code" / "test" / "test_data"


@pytest.fixture(scope="module")
def imported(root: Path) -> dict[str, object]:
    """Every session (and orphan sub-agent file) of the sample, imported once."""
    out: dict[str, object] = {}
    for path, fmt in importers.plan(importers.walk([root])):
        if fmt != "claude-code":
            continue
        try:
            out[path] = next(cc.load(path))
        except OrchestraceError as e:
            out[path] = e
    return out


def _records(path: Path) -> list[dict]:
    recs = []
    for line in path.read_bytes().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict):
            recs.append(r)
    return recs


def _subagent_files(session: Path) -> dict[str, Path]:
    """Sub-agent files of a session, found independently of the importer."""
    sid = session.stem
    found = {p.stem[len("agent-") :]: p for p in (session.parent / sid / "subagents").rglob("agent-*.jsonl")}
    for p in session.parent.glob("agent-*.jsonl"):
        recs = _records(p)
        if recs and recs[0].get("sessionId") == sid:
            found[p.stem[len("agent-") :]] = p
    return {k: v for k, v in found.items() if v.stat().st_size}


def test_every_nonempty_session_imports_and_validates(root: Path, imported: dict) -> None:
    assert len(imported) >= 80
    skipped = {Path(p).name for p, t in imported.items() if isinstance(t, OrchestraceError)}
    # only logs without a single user/assistant record are refused (with OT006)
    assert skipped == {
        "away_summary.jsonl",
        "system_model_change.jsonl",
        "4e27c414-a885-46a0-b5c8-d58e1417377d.jsonl",
        "a95fea4a-b88a-4e49-ac07-4cc323d8700c.jsonl",
    }
    for p, tr in imported.items():
        if not isinstance(tr, OrchestraceError):
            assert errors_of(tr) == [], p  # negative times and costs included (OT107)


def test_spawns_and_returns_match_subagent_files(root: Path, imported: dict) -> None:
    checked = 0
    for p, tr in imported.items():
        session = Path(p)
        if isinstance(tr, OrchestraceError) or session.name.startswith("agent-"):
            continue
        files = _subagent_files(session)
        if not files:
            continue
        checked += 1
        spawned = Counter(
            e.attrs["agent_id"] for e in tr.events if e.type == "spawn" and "agent_id" in (e.attrs or {})
        )
        assert set(spawned) >= set(files), p
        assert all(n == 1 for n in spawned.values()), p
        spawns = [e for e in tr.events if e.type == "spawn"]
        returns = [e for e in tr.events if e.type == "return"]
        assert len(returns) == len(spawns), p
        # every return goes back to the agent that spawned its sender
        spawner = {e.to: e.agent for e in spawns}
        assert all(r.to == spawner[r.from_] for r in returns), p
    assert checked == 9  # 2 new layout, 4 old layout, teammates, async agents, workflow


def test_token_totals_equal_source_sums(root: Path, imported: dict) -> None:
    """Sum over unique API messages (largest streamed value per field) of main + sub-agent files."""
    for p, tr in imported.items():
        if isinstance(tr, OrchestraceError):
            continue
        session = Path(p)
        files = [session] + (
            [] if session.name.startswith("agent-") else list(_subagent_files(session).values())
        )
        usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for f in files:
            for r in _records(f):
                m = r.get("message")
                if isinstance(m, dict) and isinstance(m.get("usage"), dict) and r.get("type") == "assistant":
                    u = usage[m.get("id") or r.get("requestId") or r.get("uuid")]
                    for k in (
                        "input_tokens",
                        "output_tokens",
                        "cache_read_input_tokens",
                        "cache_creation_input_tokens",
                    ):
                        u[k] = max(u[k], int(m["usage"].get(k) or 0))
        expected_out = sum(u["output_tokens"] for u in usage.values())
        expected_in = sum(
            u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
            for u in usage.values()
        )
        assert tr.costs["tokens_out"] == expected_out, p
        assert tr.costs["tokens_in"] == expected_in, p
        assert tr.costs["tokens"] == expected_in + expected_out, p


def test_teammates_session(root: Path, imported: dict) -> None:
    tr = imported[str(root / TEAM)]
    raw = (root / TEAM).read_text()
    spawns = [e for e in tr.events if e.type == "spawn"]
    assert [e.to for e in spawns] == ["alice", "bob", "carol", "alice2", "bob2", "carol2"]
    assert all(e.tool == "Agent" and e.agent == "main" for e in spawns)
    returns = [e for e in tr.events if e.type == "return"]
    assert sorted(r.from_ for r in returns) == sorted(e.to for e in spawns)
    sends = [e for e in tr.events if e.tool == "SendMessage"]
    assert [(e.type, e.to) for e in sends] == [("message", "alice"), ("message", "bob"), ("message", "carol")]
    decisions = Counter(e.tool for e in tr.events if e.type == "orchestrator_decision" and e.agent == "main")
    assert decisions["TaskCreate"] == len(re.findall(r'"name":"TaskCreate"', raw)) == 6
    assert decisions["TaskUpdate"] == len(re.findall(r'"name":"TaskUpdate"', raw))
    # sub-agent work hangs under its spawn and returns after it
    for s in spawns:
        own = [e for e in tr.events if e.agent == s.to]
        assert own and min(e.t for e in own) >= s.t
        assert own[-1].type == "return"
    # the sub-agents' own tool calls are there (alice's round-1 log has 33 tool_use blocks)
    alice_file = next((root / TEAM).parent.glob("ef958aa1-*/subagents/agent-a4ca7529859c158c2.jsonl"))
    n_alice = alice_file.read_text().count('"type":"tool_use"')
    assert sum(1 for e in tr.events if e.agent == "alice" and e.type == "tool_call") == n_alice
    assert tr.topology == "centralized"


def test_errors_become_status_error(root: Path, imported: dict) -> None:
    """The tool calls whose result the log marks is_error (main and sub-agent files) are exactly
    the calls with an event of status error (a tool result, or the call or return it finishes)."""
    n_err = 0
    for p, tr in imported.items():
        if isinstance(tr, OrchestraceError):
            continue
        session = Path(p)
        files = [session] + (
            [] if session.name.startswith("agent-") else list(_subagent_files(session).values())
        )
        failed = set()
        for f in files:
            for r in _records(f):
                m = r.get("message")
                if r.get("type") == "user" and isinstance(m, dict) and isinstance(m.get("content"), list):
                    failed |= {b.get("tool_use_id") for b in m["content"]
                               if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("is_error") is True}  # fmt: skip
        assert {e.call_id for e in tr.events if e.status == "error" and e.call_id} == failed, p
        n_err += len(failed)
    assert n_err == 58  # in the sample's 89 imported sessions


def test_privacy_by_default_and_redaction(tmp_path: Path) -> None:
    secret_url = "postgres://admin:hunter2secret@db.internal:5432/app"
    recs = [
        {"type": "user", "uuid": "u1", "sessionId": "s1", "timestamp": "2026-01-01T00:00:00Z",
         "message": {"role": "user", "content": f"connect to {secret_url} with key sk-ant-api03-abcdefghijklmnopqrstuvwxyz"}},
        {"type": "assistant", "uuid": "a1", "sessionId": "s1", "timestamp": "2026-01-01T00:00:02Z",
         "message": {"id": "m1", "role": "assistant", "model": "claude-x",
                     "content": [{"type": "tool_use", "id": "t1", "name": "Bash",
                                  "input": {"command": "curl -H 'Authorization: Bearer abcdef1234567890xyz' x"}}],
                     "usage": {"input_tokens": 10, "output_tokens": 5}}},
        {"type": "user", "uuid": "u2", "sessionId": "s1", "timestamp": "2026-01-01T00:00:03Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True}]}},
    ]  # fmt: skip
    f = tmp_path / "s1.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    private = next(cc.load(f))
    assert errors_of(private) == []
    assert all(e.content is None for e in private.events)
    prompt = recs[0]["message"]["content"]
    assert private.events[0].content_ref == "sha256:" + hashlib.sha256(prompt.encode()).hexdigest()
    kept = next(cc.load(f, keep_content=True))
    text = "\n".join(e.content or "" for e in kept.events)
    assert "hunter2secret" not in text and "sk-ant-api03" not in text and "abcdef1234567890xyz" not in text
    assert "postgres://admin:[REDACTED]@db.internal" in text
    result = next(e for e in kept.events if e.type == "tool_result")
    assert result.status == "error" and result.call_id == "t1"
    assert kept.costs["tokens"] == 15


def test_truncated_empty_and_unknown_records_via_cli(root: Path, tmp_path: Path) -> None:
    src = root / "real_projects/-src-experiments-claude_p/256ba646-2c15-437a-98e9-4171aafd030e.jsonl"
    logs = tmp_path / "logs"
    logs.mkdir()
    data = src.read_bytes()
    (logs / "cut.jsonl").write_bytes(data[: len(data) - 300])  # last line cut mid-record
    (logs / "empty.jsonl").write_bytes(b"")
    lines = data.splitlines()
    first = json.loads(lines[0])
    novel = {**first, "type": "hologram-snapshot", "uuid": "zz"}
    (logs / "novel.jsonl").write_bytes(b"\n".join([*lines, json.dumps(novel).encode()]) + b"\n")
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(app, ["import", str(logs), "-o", str(out)])
    assert res.exit_code == 0, res.output
    msgs = res.stderr if hasattr(res, "stderr") else res.output
    assert "empty.jsonl: empty file" in msgs
    assert "cut.jsonl: truncated" in msgs
    assert "hologram-snapshot: 1" in msgs
    traces = load(out)
    assert len(traces) == 2
    cut = next(t for t in traces if t.metadata["source"].endswith("cut.jsonl"))
    assert cut.metadata["import"]["truncated"] is True


def test_standalone_subagent_file(root: Path, tmp_path: Path) -> None:
    """An old-layout sub-agent file whose session is gone still imports on its own."""
    src = next(
        (root / "real_projects/-Users-dain-workspace-coderabbit-review-helper").glob("agent-668b5ac2.jsonl")
    )
    dst = tmp_path / src.name
    shutil.copy(src, dst)
    assert not cc.covered(dst)
    tr = next(cc.load(dst))
    assert errors_of(tr) == [] and tr.metadata["standalone_subagent"] is True


def test_rejected_tool_use_is_a_human_intervention(root: Path, imported: dict) -> None:
    """Each tool_result carrying Claude Code's rejection text is the user refusing: 7 in the sample."""
    n_src = 0
    n_ev = 0
    for p, tr in imported.items():
        if isinstance(tr, OrchestraceError):
            continue
        n_src += sum(
            "doesn't want to proceed with this tool use" in line for line in Path(p).read_text().splitlines()
        )
        n_ev += sum(
            1
            for e in tr.events
            if e.type == "human_intervention" and e.attrs.get("kind") == "rejected_tool_use"
        )
    assert n_ev == n_src == 7


def test_no_text_leaks_without_keep_content(root: Path) -> None:
    """Serialized without --keep-content, the trace holds none of the prompts, messages, commands."""
    from orchestrace.core.io import dumps

    src = root / TEAM
    blob = dumps(next(cc.load(src))).decode()
    secrets = []
    for r in _records(src):
        m = r.get("message")
        for blk in m.get("content", []) if isinstance(m, dict) and isinstance(m.get("content"), list) else []:
            if isinstance(blk, dict) and blk.get("type") == "tool_use":
                secrets += [v for v in blk["input"].values() if isinstance(v, str) and len(v) > 40]
            if isinstance(blk, dict) and blk.get("type") == "text" and len(blk.get("text", "")) > 40:
                secrets.append(blk["text"])
    assert len(secrets) == 40
    assert not [s for s in secrets if s[:40] in blob]
    assert dumps(next(cc.load(src, keep_content=True))).decode().count(secrets[0][:40]) >= 1


def test_trust_rule_on_real_sessions(imported: dict) -> None:
    """Web and MCP results are untrusted and external; own-action acknowledgements are trusted;
    prompts are trusted, so a session with a prompt always carries trust information."""
    from orchestrace.measure import safety_metrics

    seen: Counter[tuple[str, bool, bool]] = Counter()
    for tr in imported.values():
        if isinstance(tr, OrchestraceError):
            continue
        calls = {e.call_id: e for e in tr.events if e.type == "tool_call"}
        for e in tr.events:
            if e.type == "human_intervention" and e.attrs.get("kind") == "prompt":
                assert e.trusted is True
            if e.type != "tool_result" or e.call_id not in calls:
                continue
            ext = bool(e.attrs and e.attrs.get("external"))
            seen[(e.tool, bool(e.trusted), ext)] += 1
            assert e.trusted is (e.tool in cc.OWN_ACTION_TOOLS)
            if e.tool in ("WebFetch", "WebSearch") or e.tool.startswith("mcp__"):
                assert ext and e.trusted is False
            elif ext:  # only network commands besides the web tools
                assert e.tool == "Bash"
        if any(e.type == "human_intervention" for e in tr.events):
            assert safety_metrics(tr)["tainted_decisions"] is not None
    # the sample has web tools, local reads and edits (counts are the sample's, see the files)
    assert seen[("WebFetch", False, True)] > 0 and seen[("WebSearch", False, True)] > 0
    assert seen[("Read", False, False)] > 0 and seen[("Edit", True, False)] > 0


@pytest.mark.parametrize(
    ("tool", "command", "expected"),
    [
        ("Bash", "curl -s https://example.org", True),
        ("Bash", "cd x && wget https://example.org/a", True),
        ("Bash", "git fetch origin", True),
        ("Bash", "gh pr view 3", True),
        ("Bash", "git status", False),
        ("Bash", "echo curling", False),
        ("Bash", "python http_server.py", False),
        ("mcp__github__get_issue", None, True),
        ("WebSearch", None, True),
        ("Read", None, False),
    ],
)
def test_external_tool_rule(tool: str, command: str | None, expected: bool) -> None:
    assert cc.external(tool, {"command": command} if command else {}) is expected
