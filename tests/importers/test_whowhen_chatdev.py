"""Who&When and ChatDev importers on every file of the public data."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from orchestrace import importers
from orchestrace.core.validate import validate_trace
from orchestrace.importers import chatdev, whowhen


def _errors(trace) -> list[str]:
    return [str(f) for f in validate_trace(trace) if f.severity == "error"]


def test_all_who_and_when_runs(data: Path) -> None:
    files = sorted((data / "who-and-when" / "Who&When").glob("*/*.json"))
    assert len(files) == 158
    for f in files:
        assert importers.detect(f) == "who-and-when"
        tr = next(whowhen.load(f))
        assert _errors(tr) == [], f
        src = json.loads(f.read_text())
        assert len(tr.events) == len(src["history"])  # one event per step
        steps = [e.attrs["step"] for e in tr.events]
        assert steps == list(range(len(src["history"])))
        gold = [e for e in tr.events if e.attrs.get("gold_mistake")]
        assert [e.attrs["step"] for e in gold] == [int(src["mistake_step"])]
        assert tr.metadata["labels"]["mistake_agent"] == src["mistake_agent"]
        assert tr.rewards == {"team": 0.0}
        assert tr.metrics == {"task_success": 0.0}  # every Who&When run is a failure


def test_magentic_one_mapping(data: Path) -> None:
    tr = next(whowhen.load(data / "who-and-when" / "Who&When" / "Hand-Crafted" / "1.json"))
    # hand-checked from the file: step 0 human, 1-2 thoughts, 3 delegation to WebSurfer, 4 WebSurfer
    assert [e.type for e in tr.events[:5]] == [
        "human_intervention",
        "orchestrator_decision",
        "orchestrator_decision",
        "message",
        "message",
    ]
    assert (tr.events[3].agent, tr.events[3].to) == ("Orchestrator", "WebSurfer")
    assert (tr.events[4].agent, tr.events[4].to) == ("WebSurfer", "Orchestrator")
    assert any(x.src == "e3" and x.dst == "e4" and x.type == "message" for x in tr.edges)
    assert tr.topology == "centralized" and tr.system == "magentic-one"
    assert all(e.content is None and e.content_ref.startswith("sha256:") for e in tr.events)


def test_all_chatdev_logs(data: Path) -> None:
    logs = sorted((data / "chatdev" / "WareHouse").glob("*/*.log"))
    assert len(logs) == 7
    for f in logs:
        assert importers.detect(f) == "chatdev"
        tr = next(chatdev.load(f))
        assert _errors(tr) == [], f
        text = f.read_text(errors="replace")
        usage = re.findall(r"prompt_tokens: (\d+)\ncompletion_tokens: (\d+)", text)
        assert tr.costs["tokens_in"] == sum(int(a) for a, _ in usage)
        assert tr.costs["tokens_out"] == sum(int(b) for _, b in usage)


def test_chatdev_sequential_runs_are_not_parallel(data: Path) -> None:
    """A ChatDev run is a sequential role-play: each phase's chat starts from the chain's
    decision and ends in its conclusion (or the next phase), so no time is counted twice."""
    from orchestrace.measure import analyze

    for f in sorted((data / "chatdev" / "WareHouse").glob("*/*.log")):
        r = analyze(next(chatdev.load(f)))
        assert r["serial_work_s"] == r["critical_path_s"] == r["wall_clock_s"], f
        assert r["parallel_speedup"] == 1.0, f
    # hand-checked: LifeSimulator's log spans 16:42:36 to 16:51:17 (521 s, as [Post Info] says)
    f = next((data / "chatdev" / "WareHouse").glob("LifeSimulator*/*.log"))
    tr = next(chatdev.load(f))
    assert analyze(tr)["critical_path_s"] == 521.0
    concl = [i for i, e in enumerate(tr.events) if e.type == "aggregate"]
    into = {int(x.dst[1:]): x for x in tr.edges if x.type == "aggregate"}
    assert concl and all(tr.events[int(into[i].src[1:])].type == "message" for i in concl)


def test_chatdev_post_info_and_phases(data: Path) -> None:
    f = next((data / "chatdev" / "WareHouse").glob("LifeSimulator*/*.log"))
    tr = next(chatdev.load(f))
    # the [Post Info] block of this run says cost=$0.028969 and duration=521.00s
    assert tr.costs["usd"] == 0.028969
    assert tr.costs["reported_duration_s"] == 521.0
    assert tr.metadata["post_info"]["num_total_tokens"] == tr.costs["tokens"]
    phases = [
        e.attrs["phase"]
        for e in tr.events
        if e.type == "orchestrator_decision" and e.attrs.get("kind") == "phase"
    ]
    assert phases[:2] == ["DemandAnalysis", "LanguageChoose"]
    roles = Counter(e.agent for e in tr.events if e.type == "message")
    assert {"Chief Executive Officer", "Programmer", "Code Reviewer"} <= set(roles)
