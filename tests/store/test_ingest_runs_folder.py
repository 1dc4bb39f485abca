"""``ingest runs/`` on what the runtime and the main job leave in a folder: a recording, its
byte-identical replay, their call caches, a policy and a report."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from orchestrace.cli import app
from orchestrace.runtime.runner import replay, run
from orchestrace.store.db import query


def test_ingest_a_runs_folder_stores_a_replay_once_and_skips_what_is_not_a_trace(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    rec = run("debate", str(runs / "debate-s1.events.jsonl"), backend={"kind": "scripted"}, seed=1)
    again, _ = replay(rec.path)
    assert (runs / "debate-s1.events.jsonl").read_bytes() == Path(again.path).read_bytes()
    (runs / "stop" / "report").mkdir(parents=True)
    (runs / "stop" / "policy.json").write_text(json.dumps({"activation": "tanh", "budget": 8}))
    (runs / "stop" / "report" / "report.json").write_text(json.dumps({"train_banks": ["capitals"]}))
    # 6 files: 2 traces (recording, replay); 2 call caches, 1 policy, 1 report are not traces
    store = str(tmp_path / "t.duckdb")
    r = CliRunner().invoke(app, ["ingest", str(runs), "--store", store])
    assert r.exit_code == 0, r.output
    assert "skipped 4 file(s) that are not traces" in r.output
    assert "1 new, 0 replaced, 0 unchanged trace(s), 1 duplicate(s)" in r.output
    assert "invalid" not in r.output and "OT310" not in r.output
    n = len(rec.trace.events)
    assert query(store, "SELECT trace_id, count(*) AS n FROM events GROUP BY trace_id").to_pylist() == [
        {"trace_id": "debate-s1", "n": n}
    ]
