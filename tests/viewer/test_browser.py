"""The viewer page in real headless Chromium: loads clean, draws lanes and the critical path,
shows details on click, executes nothing from the trace, opens and pans a 100,000-event trace (its speed: bench/viewer_bench.py)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from orchestrace.core.io import load_one
from orchestrace.core.model import Edge, Event, Trace, derived_costs
from orchestrace.core.validate import validate_trace
from orchestrace.gen import generate
from orchestrace.measure import critical_path
from orchestrace.viewer import write_html

CP_RGB = (255, 107, 0)  # the critical path colour of viewer.js


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


def distinct(img: np.ndarray) -> int:
    flat = img.reshape(-1, 3).astype(np.int64)
    return len(np.unique(flat[:, 0] * 65536 + flat[:, 1] * 256 + flat[:, 2]))


def near(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 30) -> int:
    return int((np.abs(img - np.asarray(rgb)).max(axis=2) <= tol).sum())


@pytest.fixture(scope="module")
def example_html(tmp_path_factory, reference_example) -> Path:
    return write_html(load_one(reference_example), tmp_path_factory.mktemp("view") / "example.html")


def test_example_loads_with_lanes_and_critical_path(open_page, example_html, reference_example):
    o = open_page(example_html)
    api = "window.__orchestrace"
    assert o.page.evaluate(f"{api}.lanes()") == ["orchestrator", "planner_1", "executor_1", "browser.search"]
    # every event, e1..e8, by hand (see test_payload: the explicit chain plus the orchestrator's order)
    assert o.page.evaluate(f"{api}.criticalPath()") == [f"e{k}" for k in range(1, 9)]
    frame = o.page.evaluate(f"{api}.draw()")
    assert frame["events"] == 8 and frame["cp"] == 8 and frame["edges"] == 8
    assert frame["lanes"] == [0, 3]
    assert frame["taint"] == 2  # e6 -> e7 (browser.search -> executor_1), e7 -> e8 (-> orchestrator)
    assert o.page.title() == "orchestrace · demo-trace-001"
    assert o.errors == [] and o.dialogs == []
    assert o.requests == [example_html.as_uri()]  # offline: nothing but the file itself


def test_generated_trace_lanes_and_critical_path(open_page, tmp_path):
    from orchestrace.viewer import lane_order

    tr = generate(seed=3, size=150, topology="hierarchical", width=3)
    o = open_page(write_html(tr, tmp_path / "gen.html"))
    lanes = o.page.evaluate("window.__orchestrace.lanes()")
    assert lanes == lane_order(tr)[0] and sorted(lanes) == sorted(tr.agents())
    assert lanes[0] == "orchestrator" and lanes[1] == "manager_0_0"  # managers under the root
    cp = o.page.evaluate("window.__orchestrace.criticalPath()")
    assert cp == [tr.events[i].id for i in critical_path(tr)["path"]] and len(cp) > 10
    frame = o.page.evaluate("window.__orchestrace.draw()")
    assert frame["cp"] > 0 and frame["events"] > 50 and frame["edges"] > 0
    assert o.errors == []


def test_screenshot_is_not_blank_and_shows_the_critical_path(open_page, example_html, tmp_path):
    o = open_page(example_html)
    png = o.page.screenshot(path=str(tmp_path / "example.png"))
    img = pixels(png)
    assert img.std() > 8 and distinct(img) > 100  # a blank page: std 0, one colour
    assert near(img, CP_RGB) > 500  # the orange path and rings
    # the path is a line: orange half-way between consecutive events on it (e4 -> e5, e5 -> e6)
    for a, b in (("e4", "e5"), ("e5", "e6")):
        pa, pb = (o.page.evaluate(f"window.__orchestrace.locate('{e}')") for e in (a, b))
        mx, my = round((pa["x"] + pb["x"]) / 2), round((pa["y"] + pb["y"]) / 2)
        assert near(img[my - 1 : my + 2, mx - 1 : mx + 2], CP_RGB, tol=40) > 0, (a, b)
    o.page.uncheck("#show-cp")
    assert near(pixels(o.page.screenshot()), CP_RGB) < 50  # and it is the critical path that is orange
    assert o.errors == []


def test_click_on_an_event_shows_its_details(open_page, example_html):
    o = open_page(example_html)
    pos = o.page.evaluate("window.__orchestrace.locate('e6')")
    o.page.mouse.move(pos["x"], pos["y"])
    tip = o.page.locator("#tip")
    assert tip.is_visible() and "e6  tool_result" in tip.inner_text()
    o.page.mouse.click(pos["x"], pos["y"])
    assert o.page.evaluate("window.__orchestrace.selected()") == "e6"
    text = o.page.locator("#details").inner_text()
    for want in ("e6", "tool_result", "browser.search", "untrusted source", "result_hash", "false"):
        assert want in text, want
    assert "executor_1" in text  # e5 (its input) and e7 (its output) are listed
    # follow the input edge to e5
    o.page.locator("#details button.ev", has_text="e5").click()
    assert o.page.evaluate("window.__orchestrace.selected()") == "e5"
    assert "tool_call" in o.page.locator("#details").inner_text()
    # an empty spot clears the selection
    o.page.mouse.click(900, 700)
    assert o.page.evaluate("window.__orchestrace.selected()") is None
    assert o.errors == []


def test_graph_view_click(open_page, example_html):
    o = open_page(example_html)
    o.page.click("#tab-graph")
    assert o.page.evaluate("window.__orchestrace.view()") == "graph"
    frame = o.page.evaluate("window.__orchestrace.draw()")
    assert frame["events"] == 8 and frame["edges"] == 8 and frame["cp"] == 7  # 7 links between 8 nodes
    pos = o.page.evaluate("window.__orchestrace.locate('e4')")
    o.page.mouse.click(pos["x"], pos["y"])
    text = o.page.locator("#details").inner_text()
    assert "e4" in text and "message" in text and "planner_1" in text and "plan_summary_hash" in text
    assert near(pixels(o.page.screenshot()), CP_RGB) > 300
    assert o.errors == []


def test_credit_is_a_colour_scale(open_page, tmp_path):
    tr = generate(seed=4, size=40, topology="centralized")
    tr.events[0].credit = {"grpo/agent": 2.0}
    tr.events[-1].credit = {"grpo/agent": -2.0}
    o = open_page(write_html(tr, tmp_path / "credit.html"))
    options = o.page.eval_on_selector_all("#colour option", "els => els.map(e => e.value)")
    assert options == ["type", "tokens", "cost", "credit:grpo/agent"]
    o.page.evaluate("window.__orchestrace.colour('credit:grpo/agent')")
    assert "credit:grpo/agent: -2" in o.page.locator("#legend").inner_text()
    o.page.uncheck("#show-cp")
    o.page.uncheck("#show-edges")
    o.page.uncheck("#show-taint")

    def colour_at(eid: str) -> tuple[int, ...]:
        pos = o.page.evaluate(f"window.__orchestrace.locate('{eid}')")
        img = pixels(o.page.screenshot())
        return tuple(int(c) for c in img[round(pos["y"]), round(pos["x"])])

    # +max is the green end of the diverging scale (27,120,55), -max the purple end (118,42,131)
    assert max(abs(a - b) for a, b in zip(colour_at(tr.events[0].id), (27, 120, 55), strict=True)) < 40
    assert max(abs(a - b) for a, b in zip(colour_at(tr.events[-1].id), (118, 42, 131), strict=True)) < 40
    assert o.errors == []


XSS = [
    "<img src=x onerror=window.__pwned=1>",
    "<script>window.__pwned=1</script>",
    "</script><script>window.__pwned=1</script>",
    "javascript:window.__pwned=1",
    '"><svg onload="window.__pwned=1"></svg>',
    '<iframe src="javascript:window.__pwned=1"></iframe>',
    "\u2028</script>\u2029<script>alert(1)</script>",
]


def xss_trace() -> Trace:
    boss, worker = "<img src=x onerror=window.__pwned=1>", "</script><b onmouseover=alert(1)>w"
    ev = [
        Event(
            id="<script>window.__pwned=1</script>",
            t=0,
            t_end=1,
            type="orchestrator_decision",
            agent=boss,
            content=XSS[0],
            role=XSS[4],
        ),
        Event(id="s1", t=1, t_end=2, type="spawn", agent=boss, to=worker, content=XSS[1]),
        Event(
            id="javascript:alert(1)",
            t=2,
            t_end=3,
            type="tool_call",
            agent=worker,
            tool=XSS[3],
            content=XSS[2],
            content_ref=XSS[3],
        ),
        Event(
            id="r1",
            t=3,
            t_end=4,
            type="tool_result",
            agent=worker,
            tool=XSS[3],
            content=XSS[5],
            trusted=False,
            attrs={"<b>": XSS[0], "url": XSS[3]},
        ),
        Event(
            id="m1",
            t=4,
            t_end=5,
            type="return",
            agent=worker,
            to=boss,
            content=XSS[6],
            credit={"<img src=x onerror=alert(1)>": 1.0},
        ),
        Event(id="a1", t=5, t_end=6, type="aggregate", agent=boss, content=XSS[1], model=XSS[0]),
    ]
    edges = [
        Edge(ev[0].id, "s1", "spawn"),
        Edge("s1", ev[2].id, "causal"),
        Edge(ev[2].id, "r1", "return"),
        Edge("r1", "m1", "causal"),
        Edge("m1", "a1", "return"),
    ]
    return Trace(
        trace_id=XSS[1],
        task_id=XSS[0],
        system=XSS[4],
        events=ev,
        edges=edges,
        costs=derived_costs(ev),
        metadata={"note": XSS[2]},
    )


def test_xss_trace_executes_nothing(open_page, tmp_path):
    tr = xss_trace()
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []
    o = open_page(write_html(tr, tmp_path / "xss.html"))
    p = o.page
    p.evaluate("window.__orchestrace.colour('credit:<img src=x onerror=alert(1)>')")
    for e in tr.events:  # details of every event, by a real click and hover
        pos = p.evaluate("(id) => window.__orchestrace.locate(id)", e.id)
        p.mouse.move(pos["x"], pos["y"])
        p.mouse.click(pos["x"], pos["y"])
        assert p.evaluate("window.__orchestrace.selected()") == e.id
        for b in p.locator("#details button.ev").all():
            b.hover()
    p.mouse.move(60, 200)  # lane-name tooltip
    p.click("#tab-graph")
    p.evaluate("window.__orchestrace.draw()")
    p.fill("#find", "javascript:alert(1)")
    p.press("#find", "Enter")
    text = p.locator("#details").inner_text()
    assert text.startswith("javascript:alert(1)\ntool_call")  # found by id; its strings shown as text
    assert "content_ref\tjavascript:window.__pwned=1" in text
    p.evaluate("window.__orchestrace.select('m1')")
    assert XSS[6].replace("\u2028", "").replace("\u2029", "")[:9] in p.locator(
        "#details pre"
    ).inner_text().replace("\u2028", "").replace("\u2029", "")
    p.evaluate("window.__orchestrace.select('a1')")
    assert "<script>window.__pwned=1</script>" in p.locator("#details pre").inner_text()  # as text
    p.wait_for_timeout(200)
    assert p.evaluate("typeof window.__pwned") == "undefined"
    assert o.dialogs == []
    assert p.evaluate("document.querySelectorAll('img, svg, iframe, b, object, embed').length") == 0
    assert p.evaluate("document.scripts.length") == 2
    assert p.title() == "orchestrace · " + XSS[1]
    assert all(r.startswith("file://") for r in o.requests)
    assert o.errors == []


@pytest.fixture(scope="module")
def big_html(tmp_path_factory) -> Path:
    tr = generate(seed=11, size=100_000, topology="hierarchical", width=6)
    assert len(tr.events) >= 100_000
    return write_html(tr, tmp_path_factory.mktemp("big") / "big.html")


def test_100k_events_render_and_pan(open_page, big_html, tmp_path):
    # correctness only: how fast the first frame and the pans are is bench/viewer_bench.py's job
    o = open_page(big_html, timeout=120_000)
    p = o.page
    assert p.evaluate("window.__orchestrace.lanes().length") > 1000
    first = p.evaluate("window.__orchestrace.draw()")
    assert first["events"] > 500 and first["cp"] > 0
    img = pixels(p.screenshot(path=str(tmp_path / "big.png")))
    assert img.std() > 8 and distinct(img) > 100
    # pan and zoom (each call draws one frame and waits for its pixels)
    moves = ["zoom(3)", "pan(-200, 0)", "pan(-200, 0)", "pan(200, 0)", "pan(200, 0)", "zoom(0.5)"]
    frames = [p.evaluate(f"window.__orchestrace.{m}") for m in moves * 2]
    frames += [p.evaluate(f"window.__orchestrace.pan(0, {dy})") for dy in (-240, -240, 240, 240)]
    assert all(f["events"] > 0 for f in frames[:12])  # horizontal moves stay on the orchestrator's events
    img = pixels(p.screenshot(path=str(tmp_path / "big-panned.png")))
    assert img.std() > 8 and distinct(img) > 100
    assert o.errors == []


def degenerate_traces() -> dict[str, Trace]:
    one = [Event(id="only", t=0, type="message", agent="solo")]
    same_t = [Event(id=f"s{k}", t=5.0, type="tool_call", agent=f"a{k % 2}", tool="t") for k in range(6)]
    ordinal = [
        Event(id=f"o{k}", t=k, type="message", agent="a" if k % 2 else "b", to="b" if k % 2 else "a")
        for k in range(5)
    ]
    backwards = [
        Event(id="b0", t=2, t_end=1, type="tool_call", agent="w"),
        Event(id="b1", t=3, type="return", agent="w"),
    ]
    return {
        name: Trace(
            trace_id=name,
            task_id="k",
            events=ev,
            costs=derived_costs(ev),
            edges=[Edge(ev[0].id, ev[-1].id, "causal")] if len(ev) > 1 else [],
        )
        for name, ev in {"one": one, "same_t": same_t, "ordinal": ordinal, "backwards": backwards}.items()
    }


#: marks the first (whole-trace) view draws: one per event, events of a lane at one time share one
#: (an event that ends before it starts, invalid anyway, may fall outside the view: not counted)
MARKS = {"one": 1, "same_t": 2, "ordinal": 5, "backwards": None}


def test_degenerate_traces_render(open_page, tmp_path):
    for name, tr in degenerate_traces().items():
        check_small_trace(open_page(write_html(tr, tmp_path / f"{name}.html")), tr, MARKS[name])


def check_small_trace(o, tr: Trace, marks: int | None) -> None:
    p = o.page
    drawn = p.evaluate("window.__orchestrace.draw()")["events"]
    assert (drawn == marks) if marks is not None else drawn >= 1, (tr.trace_id, drawn)
    pos = p.evaluate("(id) => window.__orchestrace.locate(id)", tr.events[-1].id)
    p.mouse.click(pos["x"], pos["y"])
    last = tr.events[-1]
    same_spot = {e.id for e in tr.events if (e.agent, e.t, e.t_end) == (last.agent, last.t, last.t_end)}
    assert p.evaluate("window.__orchestrace.selected()") in same_spot  # overlapping marks: one of them
    p.click("#tab-graph")
    assert p.evaluate("window.__orchestrace.draw()")["events"] == len(tr.events)
    p.keyboard.press("f")
    assert o.errors == []


def test_real_claude_code_session(open_page, tmp_path, public_excerpt):
    """A real Claude Code session with sub-agents (public test data), content kept."""
    from orchestrace.importers import load as import_log
    from orchestrace.viewer import lane_order

    session = (
        public_excerpt
        / "claude-code/test/test_data/real_projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"
    )
    tr = next(import_log(session, keep_content=True))
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []
    o = open_page(write_html(tr, tmp_path / "cc.html"))
    p = o.page
    assert p.evaluate("window.__orchestrace.lanes()") == lane_order(tr)[0]
    assert len(lane_order(tr)[0]) == len(tr.agents()) >= 5
    frame = p.evaluate("window.__orchestrace.draw()")
    assert frame["cp"] > 0 and frame["taint"] > 0  # tool results are untrusted in this log
    ev = next(e for e in tr.events if e.type == "tool_result" and e.content and len(e.content.strip()) > 40)
    span = (ev.t_end or ev.t) - ev.t + 2.0  # zoom in until it stands apart from its neighbours
    pos = p.evaluate("([id, span]) => window.__orchestrace.locate(id, span)", [ev.id, span])
    p.mouse.click(pos["x"], pos["y"])
    assert p.evaluate("window.__orchestrace.selected()") == ev.id
    assert p.locator("#details pre").first.inner_text().strip()[:40] == ev.content.strip()[:40]
    assert o.errors == []
