"""Every validation rule has a fixture that trips it, with the expected code and location."""

from __future__ import annotations

import copy
import json
import math

import pytest

from orchestrace.core.read import RawTrace
from orchestrace.core.validate import check_raw


@pytest.fixture()
def base(reference_example) -> dict:
    return json.loads(reference_example.read_text())


def _codes(d) -> list[tuple[str, str | None]]:
    items, _ = check_raw(RawTrace(d, "<t>"))
    return [(f.code, f.pointer) for f in items]


def _mutate(base: dict, fn) -> dict:
    d = copy.deepcopy(base)
    fn(d)
    return d


def _set(path: str, value):
    def f(d):
        *head, last = path.strip("/").split("/")
        o = d
        for p in head:
            o = o[int(p)] if isinstance(o, list) else o[p]
        if isinstance(o, list):
            o[int(last)] = value
        else:
            o[last] = value

    return f


def _del(path: str):
    def f(d):
        *head, last = path.strip("/").split("/")
        o = d
        for p in head:
            o = o[int(p)] if isinstance(o, list) else o[p]
        del o[last]

    return f


CASES = [
    # structural
    ("missing trace_id", _del("/trace_id"), "OT101", ""),
    ("missing costs.tokens", _del("/costs/tokens"), "OT101", "/costs"),
    ("event missing t", _del("/events/2/t"), "OT101", "/events/2"),
    ("t is a string", _set("/events/2/t", "3"), "OT102", "/events/2/t"),
    ("t is a bool", _set("/events/2/t", True), "OT102", "/events/2/t"),
    ("unknown top-level", _set("/extra_field", 1), "OT103", "/extra_field"),
    ("bad event type", _set("/events/1/type", "teleport"), "OT104", "/events/1/type"),
    ("bad edge type", _set("/edges/0/type", "msg"), "OT104", "/edges/0/type"),
    ("bad topology", _set("/topology", "ring"), "OT104", "/topology"),
    ("bad status", _set("/events/4/status", "failed"), "OT104", "/events/4/status"),
    ("empty id", _set("/events/0/id", ""), "OT105", "/events/0/id"),
    ("empty trace id", _set("/trace_id", ""), "OT105", "/trace_id"),
    ("no events", _set("/events", []), "OT106", "/events"),
    ("negative t", _set("/events/0/t", -1), "OT107", "/events/0/t"),
    ("negative cost", _set("/costs/tokens", -5), "OT107", "/costs/tokens"),
    ("negative tokens_in", _set("/events/4/tokens_in", -1), "OT107", "/events/4/tokens_in"),
    ("edge with extra key", _set("/edges/0/weight", 2), "OT108", "/edges/0/weight"),
    ("reward not a number", _set("/rewards/team", "high"), "OT102", "/rewards/team"),
    ("trusted not bool", _set("/events/5/trusted", "no"), "OT102", "/events/5/trusted"),
    # semantic
    ("duplicate id", _set("/events/3/id", "e2"), "OT201", "/events/3/id"),
    ("dangling edge", _set("/edges/2/dst", "e99"), "OT202", "/edges/2/dst"),
    (
        "edge backwards in time",
        _set("/edges/7", {"src": "e8", "dst": "e7", "type": "aggregate"}),
        "OT204",
        "/edges/7",
    ),
    ("acts before spawn", _set("/events/3/t", 0.5), "OT205", "/events/3"),
    ("return to wrong agent", _set("/events/6/to", "planner_1"), "OT206", "/events/6/to"),
    ("result without call", _set("/events/4/type", "message"), "OT207", "/events/5"),
    ("non-finite reward", _set("/rewards/team", math.inf), "OT208", "/rewards/team"),
    ("non-finite t", _set("/events/2/t", math.nan), "OT208", "/events/2/t"),
    ("unknown recipient", _set("/events/3/to", "ghost"), "OT209", "/events/3/to"),
    ("ends before start", _set("/events/4/t_end", 1.0), "OT210", "/events/4/t_end"),
]


@pytest.mark.parametrize("name,fn,code,pointer", CASES, ids=[c[0] for c in CASES])
def test_rule_trips(base, name, fn, code, pointer):
    found = _codes(_mutate(base, fn))
    assert (code, pointer) in found, found


def test_clean_example_has_no_findings(base):
    assert _codes(base) == []


def test_cycle_between_simultaneous_events(base):
    def f(d):
        d["events"][1]["t"] = d["events"][2]["t"] = 1
        d["edges"].append({"src": "e3", "dst": "e2", "type": "causal"})
        d["edges"].append({"src": "e2", "dst": "e3", "type": "temporal"})

    found = _codes(_mutate(base, f))
    assert any(c == "OT203" for c, _ in found), found


def test_cycle_with_backward_edge_is_reported_as_cycle_and_time(base):
    def f(d):
        d["edges"].append({"src": "e8", "dst": "e1", "type": "causal"})

    codes = {c for c, _ in _codes(_mutate(base, f))}
    assert {"OT203", "OT204"} <= codes


def test_all_findings_collected_not_just_first(base):
    def f(d):
        d["events"][0]["t"] = -1
        d["events"][1]["type"] = "bogus"
        d["edges"][0]["dst"] = "nope"
        del d["trace_id"]

    codes = {c for c, _ in _codes(_mutate(base, f))}
    assert {"OT107", "OT104", "OT202", "OT101"} <= codes


def test_tool_pairing_by_call_id(base):
    def f(d):
        d["events"][4]["call_id"] = "c1"
        d["events"][5]["call_id"] = "c2"

    assert ("OT207", "/events/5") in _codes(_mutate(base, f))

    def g(d):
        d["events"][4]["call_id"] = "c1"
        d["events"][5]["call_id"] = "c1"

    assert _codes(_mutate(base, g)) == []


def test_listing_is_capped_but_counted(base):
    d = copy.deepcopy(base)
    d["events"] = [{"id": f"x{i}", "t": -1, "type": "message", "agent": "a"} for i in range(500)]
    d["edges"] = []
    items, dropped = check_raw(RawTrace(d, "<t>"), max_findings=50)
    assert len(items) == 50 and dropped == 450


def test_acting_after_despawn(base):
    # spec 1.2 names acting after despawn among the lifecycle rules; nothing caught it
    gone = {"id": "d1", "t": 4.5, "type": "despawn", "agent": "orchestrator", "to": "executor_1"}
    d = _mutate(base, lambda d: d["events"].insert(5, gone))
    assert _codes(d) == [("OT211", "/events/7")]  # e7, executor_1's return at t=6
    # spawned again before it acts: alive; its own events at the despawn's instant: not after it
    again = {"id": "s9", "t": 5.5, "type": "spawn", "agent": "orchestrator", "to": "executor_1"}
    assert _codes(_mutate(d, lambda d: d["events"].insert(7, again))) == []
    assert _codes(_mutate(base, lambda d: d["events"].insert(5, {**gone, "t": 6}))) == []


def test_return_from_an_agent_no_spawn_starts(base):
    # a trace that spawns its agents, and a return from one it never spawned: valid, said nothing
    d = _mutate(base, lambda d: d["events"][6].update(agent="ghost", **{"from": "ghost"}))
    assert _codes(d) == [("OT212", "/events/6")]
    items, _ = check_raw(RawTrace(d, "<t>"))
    assert items[0].severity == "warning"
    # a fixed team (no spawn at all): returns need no spawn
    fixed = _mutate(
        base, lambda d: d.update(events=[e for e in d["events"] if e["type"] != "spawn"], edges=[])
    )
    assert "OT212" not in {c for c, _ in _codes(fixed)}


def test_second_result_for_one_call_and_spawn_without_target(base):
    # both were valid with nothing said: a repeated result (a retry? a lost call?) and a spawn
    # whose child no count can see (r_parallel, utilisation and lifecycles skip it)
    def second_result(d):
        d["events"][4]["call_id"] = d["events"][5]["call_id"] = "c1"
        d["events"].insert(6, {**d["events"][5], "id": "e6b", "t": 5.5})

    assert _codes(_mutate(base, second_result)) == [("OT213", "/events/6")]
    d = _mutate(base, lambda d: d["events"][1].pop("to"))
    assert ("OT214", "/events/1") in _codes(d)
    items, _ = check_raw(RawTrace(d, "<t>"))
    assert {f.severity for f in items if f.code in ("OT213", "OT214")} == {"warning"}


def test_a_spawn_cycle_is_acting_before_spawn(base):
    """a spawns b, then b spawns a: a's spawn is its action before it is spawned (it was valid,
    spawn events were not counted as acting)."""

    def f(d):
        d["events"] = [
            {"id": "e1", "t": 0, "type": "spawn", "agent": "a", "to": "b"},
            {"id": "e2", "t": 1, "type": "spawn", "agent": "b", "to": "a"},
        ]
        d["edges"] = [{"src": "e1", "dst": "e2", "type": "spawn"}]

    assert ("OT205", "/events/0") in _codes(_mutate(base, f))
