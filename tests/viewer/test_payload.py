"""The page's data: lanes, critical path, taint, escaping, the page skeleton (no browser)."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import orjson
import pytest

from orchestrace.core.io import load_one
from orchestrace.core.model import Edge, Event, Trace, derived_costs
from orchestrace.core.validate import validate_trace
from orchestrace.gen import generate
from orchestrace.viewer import build_payload, embed_json, lane_order, render_html


@pytest.fixture(scope="module")
def example(reference_example):
    return load_one(reference_example)


def test_lanes_follow_the_spawn_tree(example):
    # orchestrator spawns planner_1 then executor_1; browser.search is a root of its own
    lanes, parent = lane_order(example)
    assert lanes == ["orchestrator", "planner_1", "executor_1", "browser.search"]
    assert parent == [-1, 0, 0, -1]


def test_nested_spawns_sit_under_their_parent():
    ev = [
        Event(id="a", t=0, type="spawn", agent="root", to="m2"),
        Event(id="b", t=1, type="spawn", agent="root", to="m1"),
        Event(id="c", t=2, type="spawn", agent="m1", to="w"),
        Event(id="d", t=3, type="message", agent="w", to="m1"),
        Event(id="e", t=4, type="return", agent="m1", to="root"),
        Event(id="f", t=5, type="return", agent="m2", to="root"),
    ]
    tr = Trace(trace_id="t", task_id="k", events=ev, costs=derived_costs(ev))
    assert not [f for f in validate_trace(tr) if f.severity == "error"]
    # first appearance would give root, w, m1, m2; the tree gives root, m2, m1, w
    assert lane_order(tr) == (["root", "m2", "m1", "w"], [-1, 0, 0, 2])


def test_example_payload_critical_path_and_taint(example):
    p = build_payload(example)
    ids = p["id"]
    # e1 -> e2 -> e3 (orchestrator's own order) -> e4 (message) -> e5 -> e6 -> e7 -> e8: every event
    assert [ids[i] for i in p["cp"]] == [f"e{k}" for k in range(1, 9)]
    assert p["cp_method"] == "orchestrace.measure.critical_path"
    # e6 (browser.search result, trusted: false) taints e7 (causal) and e8 (aggregate)
    assert [ids[i] for i in p["taint_src"]] == ["e6"]
    assert [ids[i] for i in p["tainted"]] == ["e7", "e8"]
    assert {(ids[s], ids[d]) for s, d in zip(p["taint_es"], p["taint_ed"], strict=True)} >= {
        ("e6", "e7"),
        ("e7", "e8"),
    }
    assert p["lane"] == [0, 0, 0, 1, 2, 3, 2, 0]
    assert p["n"] == 8 and len(p["es"]) == 8


def test_credit_columns_and_content_truncation():
    tr = generate(seed=2, size=30, topology="centralized")
    tr.events[0].credit = {"grpo/agent": 0.25, "loo/agent": -1.0}
    tr.events[3].credit = {"grpo/agent": -0.5}
    tr.events[1].content = "x" * 50
    p = build_payload(tr, max_content=10)
    assert p["credit"]["grpo/agent"][0] == 0.25 and p["credit"]["grpo/agent"][3] == -0.5
    assert p["credit"]["grpo/agent"][1] is None
    assert p["credit"]["loo/agent"][0] == -1.0
    assert p["content"]["1"] == "x" * 10 and p["truncated"] == [1]


def test_embed_json_escapes_markup_characters():
    nasty = {"a": "</script><script>alert(1)</script>", "b": "&amp; <!-- \u2028 \u2029 -->"}
    text = embed_json(nasty)
    assert not set("<>&") & set(text)
    assert "\u2028" not in text and "\u2029" not in text
    assert json.loads(text) == nasty


def test_page_has_one_script_and_a_matching_csp(example):
    page = render_html(example)
    assert len(re.findall(r"<script\b", page)) == 2  # the JSON data block and our script
    assert re.search(r"<script[^>]*\bsrc=", page) is None and "http://" not in page and "https://" not in page
    data = re.search(r'<script type="application/json" id="trace-data">(.*?)</script>', page, re.S).group(1)
    assert orjson.loads(data)["trace"]["trace_id"] == "demo-trace-001"
    script = re.search(r"<script>(.*)</script>", page, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in page
    assert "default-src 'none'" in page


def test_page_survives_trace_strings_that_look_like_template_markers(example):
    example.events[0].content = "__DATA__ __SCRIPT__ __CSP__"
    page = render_html(example)
    data = re.search(r'id="trace-data">(.*?)</script>', page, re.S).group(1)
    assert orjson.loads(data)["content"]["0"] == "__DATA__ __SCRIPT__ __CSP__"


def test_payload_is_deterministic():
    a = render_html(generate(seed=5, size=80, topology="hierarchical"))
    b = render_html(generate(seed=5, size=80, topology="hierarchical"))
    assert a == b


def test_edges_reference_events(example):
    tr = Trace(
        trace_id="x",
        task_id="y",
        events=[
            Event(id="a", t=0, type="message", agent="p", to="q"),
            Event(id="b", t=1, type="message", agent="q"),
        ],
        edges=[Edge("a", "b", "message")],
    )
    p = build_payload(tr)
    assert (p["es"], p["ed"], p["et"]) == ([0], [1], [3])


def test_uniform_columns_are_sent_once(example):
    p = build_payload(example)
    # no event of the example has t_end, tokens, cost, status error, turn, tool model or parent
    assert p["uniform"] == {
        "has_end": 0,
        "tin": None,
        "tout": None,
        "cost": None,
        "err": 0,
        "turn": None,
        "s_model": -1,
        "s_call_id": -1,
        "s_parent": -1,
    }
    assert not set(p["uniform"]) & set(p)
    assert len(p["trusted"]) == 8 and len(p["s_tool"]) == 8  # columns that vary stay columns
