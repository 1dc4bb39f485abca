"""``import --workers N``: the same output bytes, notes, report and exit code as in one process,
on a folder of the vendored public logs mixed with broken ones."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import orjson
import pytest
from store_kit import run_cli

from orchestrace import importers
from orchestrace.core.errors import OrchestraceError
from orchestrace.importers import batch

NEW_LAYOUT = "claude-code/test/test_data/real_projects/-experiments-worktrees"


def _record(sid: str, uuid: str, kind: str, text: str, minute: int, **extra: object) -> bytes:
    message = {"role": kind, "content": text if kind == "user" else [{"type": "text", "text": text}]}
    rec = {"type": kind, "sessionId": sid, "uuid": uuid, "timestamp": f"2025-01-01T00:{minute:02d}:00Z"}
    return orjson.dumps({**rec, **extra, "message": message}) + b"\n"


@pytest.fixture
def logs(tmp_path: Path, public_excerpt: Path) -> Path:
    """A real session with new-layout sub-agents; sessions with old-layout agent files beside
    them (one agent of no session here, imported alone); a truncated session, one with an
    unreadable line, one of bookkeeping only, an empty file; beside the folder a file nothing
    recognises; the
    real Codex rollout and one holding only its first record (an error: exit 1)."""
    root = tmp_path / "logs"
    shutil.copytree(public_excerpt / NEW_LAYOUT, root / "new")
    old = root / "old"
    old.mkdir()
    for s in ("s1", "s2"):
        (old / f"{s}.jsonl").write_bytes(
            _record(s, f"{s}-u", "user", "hello", 0) + _record(s, f"{s}-a", "assistant", "hi", 1)
        )
    for aid, s in {"a1": "s1", "a2": "s1", "b1": "s2", "c1": "s9"}.items():
        (old / f"agent-{aid}.jsonl").write_bytes(
            _record(s, f"{aid}-u", "user", "task", 2, isSidechain=True, agentId=aid)
            + _record(s, f"{aid}-a", "assistant", "done", 3, isSidechain=True, agentId=aid)
        )
    cut = _record("t", "t-u", "user", "hello", 0) + _record("t", "t-a", "assistant", "hi", 1)
    (old / "t.jsonl").write_bytes(cut + b'{"type": "user", "sessi')
    (old / "u.jsonl").write_bytes(
        _record("u", "u-u", "user", "hello", 0)
        + b"\xff{not json\n"
        + orjson.dumps({"type": "frobnicate", "sessionId": "u"})  # a record type nobody knows
        + b"\n"
        + _record("u", "u-a", "assistant", "x", 1)
    )
    (old / "w.jsonl").write_bytes(orjson.dumps({"type": "summary", "leafUuid": "x", "summary": "s"}) + b"\n")
    (root / "empty.jsonl").write_bytes(b"")
    (tmp_path / "noise.jsonl").write_bytes(b"\xff\xfe{{{ not a log\n")  # named on the command line
    rollout = next((public_excerpt / "codex").glob("rollout-*.jsonl"))
    (root / "codex").mkdir()
    shutil.copy(rollout, root / "codex" / rollout.name)
    (root / "codex" / "rollout-first-record.jsonl").write_bytes(
        rollout.read_bytes().split(b"\n", 1)[0] + b"\n"
    )
    return root


@pytest.fixture
def pids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One task per file, and every process that runs one writes its pid to a file. This
    process holds its first task until a worker has run one, so the workers surely share the
    import (whatever the machine's load)."""
    folder = tmp_path / "pids"
    folder.mkdir()
    me = os.getpid()
    real = batch._checked_files

    def recorded(group, keep_content, keep_home_paths):  # type: ignore[no-untyped-def]
        (folder / str(os.getpid())).touch()
        deadline = time.monotonic() + 30
        while os.getpid() == me and len(list(folder.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        return real(group, keep_content, keep_home_paths)

    monkeypatch.setattr(batch, "GROUP_BYTES", 1)
    monkeypatch.setattr(batch, "_checked_files", recorded)
    return folder


def test_workers_same_output_notes_and_exit_code(tmp_path: Path, logs: Path, pids: Path, capsys) -> None:
    noise = str(tmp_path / "noise.jsonl")  # named: its "unknown log format" note comes from planning
    runs = {}
    for w in (1, 2, 3):
        out = tmp_path / f"out{w}.jsonl"
        for p in pids.iterdir():
            p.unlink()
        r = run_cli(capsys, "import", str(logs), noise, "-q", "-o", str(out), "--workers", str(w))
        runs[w] = (r.returncode, r.stdout.replace(str(out), "OUT"), r.stderr, out.read_bytes())
        assert len(list(pids.iterdir())) >= 2 if w > 1 else not any(pids.iterdir()), w  # a worker took part
    assert runs[1] == runs[2] == runs[3]
    code, stdout, stderr, data = runs[1]
    assert code == 1 and stdout == "imported 7 trace(s) (1 codex, 6 claude-code) -> OUT\n"
    assert [ln.split(": ")[0] for ln in stderr.replace(f"{tmp_path}/", "").splitlines()] == [
        "warn logs/empty.jsonl",  # from planning, in this process
        "warn noise.jsonl",
        "error logs/codex/rollout-first-record.jsonl",  # from the import, in any process
        "warn logs/old/t.jsonl",
        "warn logs/old/u.jsonl",
        "warn logs/old/w.jsonl",
        "note unknown record types skipped",
    ], stderr
    traces = [orjson.loads(x) for x in data.splitlines()]
    assert [t["trace_id"] for t in traces] == [  # walk order: files sorted, folder by folder
        "codex:019e1625-789d-76c0-80ab-3724b5ddb799",
        "claude-code:ef958aa1-0e93-49f0-bb71-150f63befcd1",
        "claude-code:s9:c1",
        "claude-code:s1",
        "claude-code:s2",
        "claude-code:t",
        "claude-code:u",
    ]
    by_id = {t["trace_id"]: t["metadata"] for t in traces}
    assert by_id["claude-code:s1"]["subagent_ids"] == ["a1", "a2"]
    assert by_id["claude-code:s2"]["subagent_ids"] == ["b1"]
    assert by_id["claude-code:s9:c1"]["standalone_subagent"] is True
    new = next(m for t, m in by_id.items() if t.startswith("claude-code:ef958aa1"))
    assert new["subagent_logs"] == 6


def test_workers_same_report_and_progress(logs: Path, pids: Path) -> None:
    planned = importers.plan(importers.walk([logs]))
    assert len(batch._groups(planned)) == len(planned)  # a task per file (GROUP_BYTES = 1)
    results = []
    for w in (1, 2, 3):
        said: list[tuple[str, str, str]] = []
        done: list[str] = []
        report = importers.Report()
        for p in pids.iterdir():
            p.unlink()
        n = importers.import_files(
            planned,
            str(logs.parent / f"api{w}.jsonl"),
            notify=lambda *a, said=said: said.append(a),
            report=report,
            done=done.append,
            workers=w,
        )
        assert done == [f for f, _ in planned]  # the progress bar moves once per file, in order
        results.append((n, said, report))
    assert results[0] == results[1] == results[2]
    n, said, report = results[0]
    assert n == report.traces == 7 and report.failed == 1
    assert report.per_format == {"claude-code": 6, "codex": 1}
    assert report.unknown == {"frobnicate": 1}
    assert [(os.path.relpath(f, logs), level) for f, level, _ in said] == [
        ("codex/rollout-first-record.jsonl", "error"),
        ("old/t.jsonl", "warn"),
        ("old/u.jsonl", "warn"),
        ("old/w.jsonl", "warn"),
    ]


def test_workers_must_be_positive(tmp_path: Path, logs: Path, capsys) -> None:
    out = tmp_path / "out.jsonl"
    for bad in ("0", "-2"):
        r = run_cli(capsys, "import", str(logs), "-o", str(out), "--workers", bad)
        assert r.returncode == 2 and "--workers" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not out.exists()
    with pytest.raises(OrchestraceError) as e:
        importers.import_files(importers.plan(importers.walk([logs])), str(out), workers=0)
    assert e.value.code == "OT010" and not out.exists()


def test_default_workers_only_for_large_jsonl_imports(tmp_path: Path, logs: Path) -> None:
    planned = importers.plan(importers.walk([logs]))
    assert sum(os.path.getsize(f) for f, _ in planned) < importers.PARALLEL_MIN_BYTES
    assert importers.import_processes(planned, "o.jsonl", None, load=0.0) == 1  # small: this process
    assert importers.import_processes(planned, "o.jsonl", 2) == 2  # asked for: always
    assert importers.import_processes(planned[:1], "o.jsonl", 8) == 1  # one file: nothing to share
    many = [(f"{i}.log", "x") for i in range(8 * (os.cpu_count() or 1) + 1)]
    assert importers.import_processes(many, "o.jsonl", 100_000) == 4 * (
        os.cpu_count() or 1
    )  # at most 4 per CPU
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as f:
        f.truncate(importers.PARALLEL_MIN_BYTES)
    many = [(str(big), "claude-code"), *planned]
    cpus = len(os.sched_getaffinity(0))
    assert importers.import_processes(many, "o.jsonl.zst", None, load=0.0) == min(cpus, len(many))
    assert importers.import_processes(many, "o.jsonl", None, load=cpus - 0.5) == 1  # one core left: ours
    assert importers.import_processes(many, "o.json", 4) == 1  # one trace out: nothing to share
    assert importers.import_processes(many, "o.events.jsonl", 4) == 1
