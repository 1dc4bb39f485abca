"""One name and one number per taint count in analyze, ``orchestrace safety`` and the viewer."""

from __future__ import annotations

import json

from tracekit import ev, mk
from typer.testing import CliRunner

from orchestrace.cli import app
from orchestrace.core.io import save
from orchestrace.core.validate import validate_trace
from orchestrace.measure import analyze
from orchestrace.viewer.payload import build_payload


def _trace():
    # w calls an external tool whose result (r1, untrusted) flows into w's return and o's aggregate
    return mk(
        [
            ev("d1", 0, "orchestrator_decision", "o"),
            ev("s1", 0.5, "spawn", "o", to="w"),
            ev("c1", 1, "tool_call", "w", tool="web", call_id="1"),
            ev("r1", 2, "tool_result", "web", tool="web", call_id="1", trusted=False),
            ev("w1", 3, "return", "w", to="o"),
            ev("g1", 4, "aggregate", "o"),
        ],
        [
            ("d1", "s1", "spawn"),
            ("s1", "c1", "spawn"),
            ("c1", "r1", "tool_dependency"),
            ("r1", "w1", "causal"),
            ("w1", "g1", "return"),
        ],
    )


def test_taint_counts_agree_everywhere(tmp_path):
    tr = _trace()
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []
    # by hand: 1 source (r1); tainted events w1, g1 (2); decisions d1, s1, c1, g1 of which g1 is
    # tainted (1); reach (1 + 2) / 6 events = 0.5; tainted decision fraction 1 / 4
    expected = {"untrusted_sources": 1, "tainted_events": 2, "tainted_decisions": 1, "taint_reach": 0.5}
    r = analyze(tr)
    assert {k: r[k] for k in expected} == expected and r["tainted_decision_fraction"] == 0.25
    save(tr, tmp_path / "t.json")
    out = CliRunner().invoke(app, ["safety", str(tmp_path / "t.json"), "--format", "json"])
    assert out.exit_code == 0, out.output
    (row,) = json.loads(out.stdout)
    assert {k: row[k] for k in expected} == expected
    text = CliRunner().invoke(app, ["safety", str(tmp_path / "t.json")]).stdout
    assert "1 untrusted source(s), 2 tainted event(s) of which 1 decision(s)" in text
    p = build_payload(tr)
    assert (len(p["taint_src"]), len(p["tainted"]), p["tainted_decisions"]) == (1, 2, 1)
