"""`orchestrace ui` in real headless Chromium: the list sorts and filters, a trace opens in the
viewer, a fork is compared with its parent, a training run's point opens its iteration, and the
viewer tests' XSS payloads stay text on every page. One server and one browser for all."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrace.measure import critical_path
from orchestrace.viewer import lane_order

from .browse_kit import N_GEN
from .test_browser import XSS


@pytest.fixture()
def page(browser, browse_server) -> Any:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=browse_server)
    p = ctx.new_page()
    p.errors, p.dialogs = [], []
    p.on("console", lambda m: p.errors.append(m.text) if m.type == "error" else None)
    p.on("pageerror", lambda e: p.errors.append(str(e)))
    p.on("dialog", lambda d: (p.dialogs.append(d.message), d.dismiss()))
    yield p
    ctx.close()


def follow(p: Any, selector: str) -> None:
    """Click a link or button and wait for the page it leads to (a click alone returns before
    the next page has loaded, and the old page's cells would be read)."""
    with p.expect_navigation():
        p.click(selector)


def column(p: Any, key: str) -> list[str]:
    return p.locator(f"#traces tbody td[data-col={key}]").all_inner_texts()


def test_list_sorts_filters_and_shows_distributions(page) -> None:
    p = page
    p.goto("/")
    assert p.locator("#count").inner_text().startswith(f"{N_GEN + 3} trace(s) match")
    assert p.locator("#distributions .hist").count() == 12  # date, 9 numeric columns, system, status
    assert "success" in p.locator("#distributions [data-col=status]").inner_text()
    follow(p, "#traces th a[data-col=usd]")  # numbers sort largest first
    usd = [float(x) for x in column(p, "usd")]
    assert usd == sorted(usd, reverse=True) and usd[0] > usd[-1]
    follow(p, "#traces th a[data-col=usd]")  # again: the other way
    assert [float(x) for x in column(p, "usd")] == sorted(usd)
    p.select_option("select[name=system]", "orchestrace.runtime")
    follow(p, "form.filters button")
    assert sorted(column(p, "trace_id")) == ["debate-s7", "debate-s7~e8~fbf64543"]
    assert "sort=usd" in p.url and "desc=0" in p.url  # the filter keeps the sort
    p.goto("/")
    p.fill("input[name=text]", "gen-0")
    p.fill("input[name=reward_min]", "1")
    follow(p, "form.filters button")
    ids = column(p, "trace_id")
    assert ids and all(i.startswith("gen-0") for i in ids)
    assert set(column(p, "team_reward")) == {"1"}
    assert p.errors == [] and p.dialogs == []


def test_a_trace_opens_in_the_viewer_from_the_store(page, browse_world) -> None:
    p = page
    p.goto("/?text=gen-03")
    follow(p, "#traces a:text-is('gen-03')")
    p.wait_for_function("window.__orchestrace !== undefined")
    tr = next(t for t in browse_world.gen if t.trace_id == "gen-03")
    assert p.evaluate("window.__orchestrace.lanes()") == lane_order(tr)[0]
    assert p.title() == "orchestrace · gen-03"
    cp = p.evaluate("window.__orchestrace.criticalPath()")
    assert cp == [tr.events[i].id for i in critical_path(tr)["path"]] and len(cp) > 3
    assert p.errors == []


def test_a_fork_is_compared_with_its_parent(page, browse_world) -> None:
    p = page
    parent, child = browse_world.parent, browse_world.child
    k = child.metadata["fork"]["index"]
    p.goto("/?system=orchestrace.runtime")
    follow(p, "a.cmp-parent")
    assert p.locator("#fork").inner_text().startswith(f"fork point: event #{k} ({parent.events[k].id})")
    diverge = p.locator("#diverge").inner_text()
    assert diverge.startswith(f"first diverging event: #{k}: A {parent.events[k].id} return")
    assert f"B {child.events[k].id} human_intervention" in diverge
    assert p.locator("#diverge-mark").count() == 1
    events = p.locator("#metrics tr[data-metric=events] td").all_inner_texts()
    assert events == [
        "events",
        str(len(parent.events)),
        str(len(child.events)),
        f"+{len(child.events) - len(parent.events)}",
    ]
    lanes = p.locator("#timeline text.lane").evaluate_all("els => els.map(e => e.textContent)")
    assert {"human", *parent.agents()} <= set(lanes)
    assert p.locator("#timeline rect.a").count() == len(parent.events)
    assert p.locator("#timeline rect.b").count() == len(child.events)
    assert p.locator("#events tr.diverged").first.inner_text().startswith(str(k))
    assert p.errors == []


def test_a_learning_curve_point_lists_its_iteration(page) -> None:
    p = page
    p.goto("/runs")
    follow(p, "a:text-is('team-run')")
    assert p.locator(".curve").count() == 3  # eval_team_accuracy, train_loss, train_reward
    follow(p, "[data-curve=eval_team_accuracy] circle[data-iteration='1']")
    assert p.locator("#iteration").inner_text() == "iteration 1: 5 trace(s)"
    rows = p.locator("#iteration-traces tbody tr").all_inner_texts()
    assert [r.split("\t")[:2] for r in rows] == [
        ["training", "train-1-0"],
        ["training", "train-1-1"],
        ["training", XSS[1]],
        ["held-out", "eval-1-q0"],
        ["held-out", "eval-1-q1"],
    ]
    follow(p, "a:text-is('train-1-0')")
    p.wait_for_function("window.__orchestrace !== undefined")
    assert p.title() == "orchestrace · train-1-0"
    p.goto("/run/pairs?r=0")
    cells = p.locator("#pairs tbody tr").first.locator("td").all_inner_texts()
    assert (
        cells[0] == "q0-g0" and "final: answer q0 wrong" in cells[1] and "final: answer q0 right" in cells[2]
    )
    assert p.errors == []


@pytest.mark.parametrize(
    "path",
    [
        "/?text=%3Cscript%3E",
        "/compare?a=gen-00&b=%3Cscript%3Ewindow.__pwned%3D1%3C%2Fscript%3E",
        "/run?r=0&it=1",
        "/run/pairs?r=0",
    ],
)
def test_xss_payloads_stay_text_in_every_view(page, path) -> None:
    p = page
    p.goto(path)
    text = p.locator("main").inner_text()
    shown = {
        "/?": [XSS[1], XSS[0], XSS[4]],  # trace id, task, system
        "/compare": [XSS[1], XSS[0]],  # its id, the content of its first event
        "/run?": [XSS[1]],
        "/run/pairs": [XSS[0]],  # a held-out final answer
    }
    for key, strings in shown.items():
        if path.startswith(key):
            for s in strings:
                assert s in text, (path, s)
    p.wait_for_timeout(100)
    assert p.evaluate("typeof window.__pwned") == "undefined"
    assert (
        p.evaluate(
            "document.querySelectorAll('script, img, iframe, object, embed, main b[onmouseover]').length"
        )
        == 0
    )
    assert p.dialogs == [] and p.errors == []
