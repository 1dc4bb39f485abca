"""import_files writes only traces that validate, as the very JSON that was validated."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from orchestrace import importers
from orchestrace.core.io import dumps
from orchestrace.core.model import Edge, Event, Trace


def _trace(tid: str, t1: float) -> Trace:
    events = [
        Event(id="e0", t=0.0, type="message", agent="a"),
        Event(id="e1", t=t1, type="message", agent="a"),
    ]
    return Trace(
        trace_id=tid,
        task_id="task",
        events=events,
        edges=[Edge("e0", "e1", "temporal")],
        costs={"tokens": 0, "wall_clock_s": 1.0},
    )


def test_invalid_traces_are_reported_and_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = _trace("good", 1.0)
    backwards = _trace("backwards", 1.0)
    backwards.events[0].t = 2.0  # the edge e0 -> e1 now goes back in time (OT204)
    nan_time = _trace("nan", float("nan"))  # written as null: a type error
    fake = SimpleNamespace(load=lambda path, keep_content=False: iter([backwards, good, nan_time]))
    monkeypatch.setitem(importers.registry._cache, "fake-format", fake)
    log = tmp_path / "log.jsonl"
    log.write_text("{}\n")
    out = tmp_path / "out.jsonl"
    said: list[tuple[str, str]] = []
    report = importers.Report()
    importers.import_files(
        [(str(log), "fake-format")],
        str(out),
        notify=lambda p, lvl, msg: said.append((lvl, msg)),
        report=report,
    )
    assert out.read_bytes() == dumps(good) + b"\n"
    assert report.failed == 2 and report.traces == 1
    assert [lvl for lvl, _ in said] == ["error", "error"]
    assert "trace backwards does not validate" in said[0][1] and "OT204" in said[0][1]
    assert "trace nan does not validate" in said[1][1]


def test_collector_thresholds_restored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """import_files collects young objects rarely while it runs, and gives the caller's
    thresholds back, also when the import fails midway."""
    import gc

    seen: list[tuple[int, int, int]] = []

    def load(path: str, keep_content: bool = False) -> Iterator[Trace]:
        seen.append(gc.get_threshold())
        yield _trace("good", 1.0)
        raise RuntimeError("importer bug")

    monkeypatch.setitem(importers.registry._cache, "fake-format", SimpleNamespace(load=load))
    log = tmp_path / "log.jsonl"
    log.write_text("{}\n")
    old = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        with pytest.raises(RuntimeError):
            importers.import_files([(str(log), "fake-format")], str(tmp_path / "out.jsonl"))
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*old)
    assert seen == [(10_000, 10, 10)]


def test_claude_code_files_sharing_a_session_id_get_distinct_trace_ids(tmp_path: Path) -> None:
    """Files not named after the session their records carry (copies, fixtures, resumed logs)
    became traces of one id, and ingest refused all but the first (OT310, exit 1)."""
    import orjson

    from orchestrace.store import ingest

    def session(sid: str, text: str) -> bytes:
        recs = [
            {"type": "user", "uuid": f"{text}-u", "sessionId": sid, "timestamp": "2026-01-01T00:00:00Z",
             "message": {"role": "user", "content": text}},
            {"type": "assistant", "uuid": f"{text}-a", "sessionId": sid, "timestamp": "2026-01-01T00:00:01Z",
             "message": {"id": f"m-{text}", "role": "assistant", "content": [{"type": "text", "text": "ok"}]}},
        ]  # fmt: skip
        return b"".join(orjson.dumps(r) + b"\n" for r in recs)

    logs = tmp_path / "project"
    logs.mkdir()
    (logs / "s1.jsonl").write_bytes(session("s1", "first"))
    (logs / "resumed.jsonl").write_bytes(session("s1", "second"))
    (logs / "copy.jsonl").write_bytes(session("s1", "third"))
    out = tmp_path / "out.jsonl"
    planned = importers.plan(importers.walk([logs]))
    assert importers.import_files(planned, str(out), workers=1) == 3
    ids = sorted(orjson.loads(line)["trace_id"] for line in out.read_bytes().splitlines())
    assert ids == ["claude-code:s1", "claude-code:s1:copy", "claude-code:s1:resumed"]
    rep = ingest(str(tmp_path / "s.duckdb"), [str(out)], measure=False)
    assert (rep.inserted, rep.failures) == (3, [])


def test_the_note_about_unreadable_lines_names_them(tmp_path: Path) -> None:
    """It said only "2 unreadable line(s) skipped"; the lines were in the trace's metadata."""
    good = (
        b'{"type":"user","uuid":"u1","sessionId":"s","timestamp":"2026-01-01T00:00:00Z",'
        b'"message":{"role":"user","content":"hi"}}\n'
    )
    log = tmp_path / "s.jsonl"
    log.write_bytes(
        good + b"{not json\n" + good.replace(b"u1", b"u2") + b"[1, 2\n" + good.replace(b"u1", b"u3")
    )
    said: list[tuple[str, str]] = []
    planned = importers.plan([str(log)])
    importers.import_files(
        planned, str(tmp_path / "out.jsonl"), workers=1, notify=lambda f, lv, m: said.append((lv, m))
    )
    assert said == [("warn", "2 unreadable line(s) skipped (line 2, 4)")]
