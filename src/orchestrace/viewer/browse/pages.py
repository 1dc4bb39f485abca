"""The browser's pages, rendered on the server as HTML and SVG with no script at all.

Every string that comes from a trace, a store or a run folder goes through ``esc`` (text and
attribute values alike), and the Content-Security-Policy allows our one stylesheet (by hash)
and nothing else: no script runs on these pages even if something slipped through. The trace
page itself is the viewer's page (``viewer.html``), with its own policy.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import html
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from .data import BY_KEY, COLUMNS, PAGE_SIZE, Bar, Column, Compared, Histogram, Listing, Query, Store
from .runs import Run, Side, held_out_pairs

STYLE = """
body{font:13px system-ui,sans-serif;margin:0;color:#1d2330;background:#fafbfc}
header{background:#1d2330;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:baseline}
header a{color:#cfe0ff;text-decoration:none}header b{font-size:15px}
main{padding:12px 16px}h1{font-size:17px;margin:6px 0 10px}h2{font-size:14px;margin:16px 0 6px}
table{border-collapse:collapse;background:#fff}td,th{border-bottom:1px solid #e3e6ea;padding:3px 7px;text-align:left;white-space:nowrap}
th a{color:#1d2330}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.diverged td{background:#fff1e6}.notice{background:#fff6d6;border:1px solid #e8d48a;padding:6px 10px;margin-bottom:10px}
.error{background:#fde8e8;border:1px solid #e4a4a4;padding:10px 14px}
form.filters{display:flex;flex-wrap:wrap;gap:8px 14px;align-items:end;margin-bottom:10px}
form.filters label{display:flex;flex-direction:column;font-size:11px;color:#555}
.hists{display:flex;flex-wrap:wrap;gap:10px;margin-bottom:10px}
.hist{background:#fff;border:1px solid #e3e6ea;padding:4px 6px;font-size:11px}
.hist .range{display:flex;justify-content:space-between;color:#666}
.pager{margin:8px 0;display:flex;gap:12px}.muted{color:#777}.text{white-space:pre-wrap;max-width:46em;overflow-wrap:anywhere}
svg text{font:11px system-ui,sans-serif}
"""


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


CSP = (
    "default-src 'none'; script-src 'none'; "
    f"style-src '{_sha256(STYLE)}'; img-src data:; base-uri 'none'; form-action 'self'"
)


def esc(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def href(path: str, params: dict[str, Any] | None = None) -> str:
    q = urlencode({k: v for k, v in (params or {}).items() if v is not None}, doseq=True)
    return esc(path + ("?" + q if q else ""))


def layout(title: str, body: str, *, runs: bool = False) -> str:
    nav = '<a href="/">traces</a>' + (' <a href="/runs">training runs</a>' if runs else "")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>"
        f"<body><header><b>orchestrace</b>{nav}</header><main>{body}</main></body></html>"
    )


def error_page(status: int, message: str, *, runs: bool = False) -> str:
    what = {400: "Bad request", 404: "Not found", 421: "Misdirected request", 405: "Method not allowed"}
    body = f'<h1>{esc(what.get(status, "Error"))}</h1><p class="error">{esc(message)}</p><p><a href="/">back to the list</a></p>'
    return layout(f"orchestrace · {status}", body, runs=runs)


def fmt(col: Column | None, v: Any) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    kind = col.kind if col else "num"
    if kind == "int":
        return f"{int(v):,}"
    if kind == "usd":
        return f"{v:.4f}"
    if kind == "num":
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, dt.date):
        return v.isoformat()
    return str(v)


# ---------------------------------------------------------------- list


def list_page(store: Store, q: Query, lst: Listing, *, runs: bool) -> str:
    parts = [f"<h1>{esc(store.path)}</h1>"]
    if store.notice:
        parts.append(f'<p class="notice">{esc(store.notice)}</p>')
    parts.append(_filters(store, q))
    parts.append(_hists(lst.histograms))
    first = (q.page - 1) * PAGE_SIZE
    shown = f"{first + 1:,}-{first + len(lst.rows):,}" if lst.rows else "none"
    parts.append(
        f'<p id="count">{lst.total:,} trace(s) match; showing {shown} '
        f'<span class="muted">({lst.seconds * 1000:.0f} ms)</span></p>'
    )
    parts.append('<form method="get" action="/compare"><table id="traces"><thead><tr><th>pick</th>')
    for c in COLUMNS:
        desc = not q.desc if q.sort == c.key else c.kind != "text"
        arrow = (" ▼" if q.desc else " ▲") if q.sort == c.key else ""
        link = href("/", q.params(sort=c.key, desc=desc, page=1))
        parts.append(f'<th><a href="{link}" data-col="{c.key}">{esc(c.label)}{arrow}</a></th>')
    parts.append("<th>fork of</th></tr></thead><tbody>")
    for r in lst.rows:
        tid = r["trace_id"]
        cells = [f'<td><input type="checkbox" name="pick" value="{esc(tid)}"></td>']
        for c in COLUMNS:
            text = esc(fmt(c, r[c.key]))
            if c.key == "trace_id":
                text = f'<a href="{href("/trace", {"id": tid})}">{text}</a>'
            cls = ' class="n"' if c.kind in ("int", "num", "usd") else ""
            cells.append(f'<td{cls} data-col="{c.key}">{text}</td>')
        parent = r.get("parent_id")
        cells.append(
            f'<td><a class="cmp-parent" href="{href("/compare", {"a": parent, "b": tid})}">compare with {esc(parent)}</a></td>'
            if parent
            else "<td></td>"
        )
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append('</tbody></table><p><button type="submit">compare the two picked</button></p></form>')
    pages = max(1, -(-lst.total // PAGE_SIZE))
    nav = []
    if q.page > 1:
        nav.append(f'<a rel="prev" href="{href("/", q.params(page=q.page - 1))}">previous</a>')
    nav.append(f"<span>page {q.page:,} of {pages:,}</span>")
    if q.page < pages:
        nav.append(f'<a rel="next" href="{href("/", q.params(page=q.page + 1))}">next</a>')
    parts.append('<div class="pager">' + "".join(nav) + "</div>")
    return layout("orchestrace · traces", "".join(parts), runs=runs)


def _filters(store: Store, q: Query) -> str:
    def select(name: str, values: list[str], current: str | None) -> str:
        opts = ['<option value="">any</option>'] + [
            f'<option value="{esc(v)}"{" selected" if v == current else ""}>{esc(v)}</option>' for v in values
        ]
        return f'<label>{name}<select name="{name}">{"".join(opts)}</select></label>'

    def field(name: str, label: str, value: Any, kind: str = "text") -> str:
        v = "" if value is None else value
        return f'<label>{label}<input type="{kind}" name="{name}" value="{esc(v)}"></label>'

    return (
        '<form class="filters" method="get" action="/">'
        + select("system", [s for s in store.systems if s is not None], q.system)
        + select("status", [s for s in store.statuses if s is not None], q.status)
        + field("date_from", "from date", q.date_from, "date")
        + field("date_to", "to date", q.date_to, "date")
        + field("reward_min", "team reward ≥", q.reward_min)
        + field("reward_max", "team reward ≤", q.reward_max)
        + field("text", "text in ids, task, tool names", q.text, "search")
        + f'<input type="hidden" name="sort" value="{esc(q.sort)}">'
        + f'<input type="hidden" name="desc" value="{"1" if q.desc else "0"}">'
        + '<button type="submit">filter</button> <a href="/">clear</a></form>'
    )


def _hists(hists: list[Histogram]) -> str:
    out = ['<div class="hists" id="distributions">']
    for h in hists:
        col = BY_KEY.get(h.key)
        label = col.label if col else h.key
        w, ht = 150, 36
        bars = []
        top = max(h.counts, default=0) or 1
        bw = w / max(len(h.counts), 1)
        for i, n in enumerate(h.counts):
            bh = ht * n / top
            tip = f"{h.labels[i]}: {n:,}" if h.key in ("system", "status") else f"{n:,}"
            bars.append(
                f'<rect x="{i * bw:.1f}" y="{ht - bh:.1f}" width="{max(bw - 1, 1):.1f}" height="{bh:.1f}" '
                f'fill="#5b8def"><title>{esc(tip)}</title></rect>'
            )
        if h.key in ("system", "status"):
            foot = ", ".join(f"{esc(lab)} {n:,}" for lab, n in zip(h.labels, h.counts, strict=True))
            foot = f'<div class="cats">{foot}</div>' if foot else ""
        else:
            lo, hi = (h.labels + ["", ""])[:2]
            miss = f" · {h.missing:,} without" if h.missing else ""
            foot = f'<div class="range"><span>{esc(lo)}</span><span>{esc(hi)}{miss}</span></div>'
        out.append(
            f'<div class="hist" data-col="{esc(h.key)}"><div>{esc(label)}</div>'
            f'<svg width="{w}" height="{ht}" role="img">{"".join(bars)}</svg>{foot}</div>'
        )
    out.append("</div>")
    return "".join(out)


# ---------------------------------------------------------------- compare


COMPARED = (
    "events",
    "agents",
    "tokens",
    "usd",
    "wall_clock_s",
    "critical_path_s",
    "parallel_speedup",
    "critical_steps",
    "team_reward",
    "errors",
)


def compare_page(c: Compared, sa: dict[str, Any], sb: dict[str, Any], *, runs: bool) -> str:
    a, b = c.a, c.b
    parts = [f"<h1>compare {esc(a.trace_id)} and {esc(b.trace_id)}</h1>"]
    parts.append(
        f'<p><a href="{href("/trace", {"id": a.trace_id})}">open A</a> · '
        f'<a href="{href("/trace", {"id": b.trace_id})}">open B</a> · '
        f'<a href="{href("/compare", {"a": b.trace_id, "b": a.trace_id})}">swap</a></p>'
    )
    if c.fork_index is not None:
        parts.append(
            f'<p id="fork">fork point: event #{c.fork_index} '
            f"({esc(a.events[c.fork_index].id) if c.fork_index < len(a.events) else ''}); "
            f"B's times shifted by {c.offset:+.3f} s to align it</p>"
        )
    if c.first_diverging is None:
        parts.append('<p id="diverge">the two traces have the same events</p>')
    else:
        i = c.first_diverging
        ea = a.events[i] if i < len(a.events) else None
        eb = b.events[i] if i < len(b.events) else None
        parts.append(f'<p id="diverge">first diverging event: #{i}: A {esc(_ev(ea))} · B {esc(_ev(eb))}</p>')
    parts.append(
        '<table id="metrics"><thead><tr><th>metric</th><th>A</th><th>B</th><th>B − A</th></tr></thead><tbody>'
    )
    for k in COMPARED:
        col = BY_KEY.get(k)
        va, vb = sa.get(k), sb.get(k)
        diff = vb - va if isinstance(va, int | float) and isinstance(vb, int | float) else None
        label = col.label if col else k
        sign = "+" if diff is not None and diff > 0 else ""
        parts.append(
            f'<tr data-metric="{k}"><td>{esc(label)}</td><td class="n">{esc(fmt(col, va))}</td>'
            f'<td class="n">{esc(fmt(col, vb))}</td><td class="n">{sign}{esc(fmt(col, diff))}</td></tr>'
        )
    parts.append("</tbody></table>")
    parts.append("<h2>timeline (A above B in each agent's lane)</h2>" + _timeline(c))
    parts.append(_divergence_table(c))
    return layout(f"orchestrace · compare {a.trace_id} / {b.trace_id}", "".join(parts), runs=runs)


def _ev(e: Any) -> str:
    if e is None:
        return "(no event: the trace ends)"
    return f"{e.id} {e.type} by {e.agent}" + (f": {e.content[:120]}" if isinstance(e.content, str) else "")


def _timeline(c: Compared) -> str:
    bars = c.bars_a + c.bars_b
    t0 = min((x.t for x in bars), default=0.0)
    t1 = max((x.t_end for x in bars), default=1.0)
    span = (t1 - t0) or 1.0
    left, width, lane_h = 170, 900, 26
    lanes = {name: k for k, name in enumerate(c.lanes)}
    h = lane_h * len(lanes) + 30

    def x(t: float) -> float:
        return left + width * (t - t0) / span

    out = [f'<svg id="timeline" width="{left + width + 20}" height="{h}" role="img">']
    for name, k in lanes.items():
        y = k * lane_h
        out.append(f'<text class="lane" x="4" y="{y + 16}">{esc(name[:26])}</text>')
        out.append(
            f'<line x1="{left}" x2="{left + width}" y1="{y + lane_h - 1}" y2="{y + lane_h - 1}" stroke="#e3e6ea"/>'
        )
    for row, (group, colour) in enumerate(((c.bars_a, "#5b8def"), (c.bars_b, "#2eaa6e"))):
        cls, who = ("a", "A") if row == 0 else ("b", "B")
        if len(group) > MAX_BARS:  # one rect per busy stretch of pixels, not per event
            for lane, diverged, x0, x1, n in _stretches(group, x):
                y = lanes[lane] * lane_h + 2 + row * 11
                out.append(
                    f'<rect class="{cls} merged" x="{x0}" y="{y}" width="{max(x1 - x0, 1)}" height="9" '
                    f'fill="{"#ff6b00" if diverged else colour}"><title>{who} {n:,} events</title></rect>'
                )
            continue
        for bar in group:
            y = lanes[bar.lane] * lane_h + 2 + row * 11
            fill = "#ff6b00" if bar.diverged else colour
            w = max(x(bar.t_end) - x(bar.t), 1.5)
            out.append(
                f'<rect class="{cls}" x="{x(bar.t):.1f}" y="{y}" width="{w:.1f}" height="9" '
                f'fill="{fill}"><title>{who} {esc(bar.label)} {bar.t:.3f}-{bar.t_end:.3f} s</title></rect>'
            )
    if c.first_diverging is not None:
        src = c.bars_b if c.first_diverging < len(c.bars_b) else c.bars_a
        if c.first_diverging < len(src):
            xd = x(src[c.first_diverging].t)
            out.append(
                f'<line id="diverge-mark" x1="{xd:.1f}" x2="{xd:.1f}" y1="0" y2="{h - 24}" stroke="#d00" stroke-width="2"/>'
            )
            out.append(
                f'<text x="{max(xd + 3, left + 60):.1f}" y="{h - 10}" fill="#d00">first diverging event</text>'
            )
    out.append(
        f'<text x="{left}" y="{h - 10}">{t0:.2f} s</text><text x="{left + width - 40}" y="{h - 10}">{t1:.2f} s</text>'
    )
    out.append("</svg>")
    return "".join(out)


#: above this many events a trace's timeline is drawn as busy stretches (a few thousand rects at
#: most, whatever the trace's size) instead of one rect per event
MAX_BARS = 3000


def _stretches(bars: list[Bar], x: Any) -> list[tuple[str, bool, int, int, int]]:
    """(lane, diverged, first pixel, last pixel, events) of each run of touching whole pixels."""
    spans: dict[tuple[str, bool], list[tuple[int, int]]] = {}
    for b in bars:
        spans.setdefault((b.lane, b.diverged), []).append((int(x(b.t)), int(math.ceil(x(b.t_end)))))
    out = []
    for (lane, diverged), got in spans.items():
        got.sort()
        x0, x1, n = got[0][0], got[0][1], 0
        for a, b in got:
            if a > x1 + 1:
                out.append((lane, diverged, x0, x1, n))
                x0, x1, n = a, b, 0
            x1, n = max(x1, b), n + 1
        out.append((lane, diverged, x0, x1, n))
    return out


def _divergence_table(c: Compared) -> str:
    """The events around the first difference, A and B side by side, as text."""
    if c.first_diverging is None:
        return ""
    i = c.first_diverging
    lo, hi = max(0, i - 3), i + 6
    rows = []
    for k in range(lo, min(hi, max(len(c.a.events), len(c.b.events)))):
        ea = c.a.events[k] if k < len(c.a.events) else None
        eb = c.b.events[k] if k < len(c.b.events) else None
        cls = ' class="diverged"' if k >= i else ""
        rows.append(
            f'<tr{cls}><td class="n">{k}</td><td class="text">{esc(_ev(ea))}</td><td class="text">{esc(_ev(eb))}</td></tr>'
        )
    return (
        '<h2>events around the first difference</h2><table id="events"><thead><tr><th>#</th><th>A</th><th>B</th></tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table>"
    )


# ---------------------------------------------------------------- training runs


def runs_page(runs: list[Run]) -> str:
    items = "".join(
        f'<li><a href="{href("/run", {"r": k})}">{esc(r.name)}</a> '
        f'<span class="muted">{len(r.iterations)} iteration(s) · {esc(r.folder)}</span></li>'
        for k, r in enumerate(runs)
    )
    body = "<h1>training runs</h1>" + (f"<ul>{items}</ul>" if runs else "<p>none given (ui --run FOLDER)</p>")
    return layout("orchestrace · training runs", body, runs=True)


@dataclass(frozen=True)
class Listed:
    """One trace file of an iteration, as its listing shows it."""

    kind: str  # training or held-out
    position: int  # in the iteration's files: /run/trace?f=
    name: str  # the trace id, or the file name when it does not load
    stored: bool  # the store holds this trace id
    error: str | None = None  # why the file does not load


def run_page(k: int, run: Run, chosen: int | None, listing: list[Listed] | None) -> str:
    parts = [f'<h1>training run {esc(run.name)}</h1><p class="muted">{esc(run.folder)}</p>']
    parts.append('<h2>learning curves (click a point for that iteration\'s traces)</h2><div class="hists">')
    for name, pts in run.curves().items():
        parts.append(_curve(k, name, pts, chosen))
    parts.append("</div>")
    if chosen is not None and listing is not None:
        parts.append(f'<h2 id="iteration">iteration {chosen}: {len(listing)} trace(s)</h2>')
        parts.append(
            '<table id="iteration-traces"><thead><tr><th>kind</th><th>trace</th><th>in the store</th></tr></thead><tbody>'
        )
        for t in listing:
            if t.error is not None:
                parts.append(
                    f'<tr class="unreadable"><td>{esc(t.kind)}</td><td>{esc(t.name)}</td><td>{esc(t.error)}</td></tr>'
                )
                continue
            link = href("/run/trace", {"r": k, "it": chosen, "f": t.position})
            store_link = (
                f'<a href="{href("/trace", {"id": t.name})}">open from the store</a>' if t.stored else ""
            )
            parts.append(
                f'<tr><td>{esc(t.kind)}</td><td><a href="{link}">{esc(t.name)}</a></td><td>{store_link}</td></tr>'
            )
        parts.append("</tbody></table>")
    parts.append(_pairs(k, run))
    return layout(f"orchestrace · run {run.name}", "".join(parts), runs=True)


def _curve(k: int, name: str, pts: list[tuple[int, float]], chosen: int | None) -> str:
    w, h, pad = 260, 110, 24
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5

    def px(i: float) -> float:
        return pad + (w - 2 * pad) * ((i - x0) / (x1 - x0) if x1 > x0 else 0.5)

    def py(v: float) -> float:
        return h - pad - (h - 2 * pad) * (v - y0) / (y1 - y0)

    line = " ".join(f"{px(i):.1f},{py(v):.1f}" for i, v in pts)
    dots = "".join(
        f'<a href="{href("/run", {"r": k, "it": i})}"><circle class="point" data-iteration="{i}" cx="{px(i):.1f}" cy="{py(v):.1f}" '
        f'r="{6 if i == chosen else 4}" fill="{"#ff6b00" if i == chosen else "#5b8def"}"><title>iteration {i}: {v:.4g}</title></circle></a>'
        for i, v in pts
    )
    return (
        f'<div class="hist curve" data-curve="{esc(name)}"><div>{esc(name)}</div>'
        f'<svg width="{w}" height="{h}" role="img"><polyline points="{line}" fill="none" stroke="#5b8def"/>{dots}'
        f'<text x="2" y="12">{y1:.3g}</text><text x="2" y="{h - pad + 4}">{y0:.3g}</text>'
        f'<text x="{pad}" y="{h - 4}">it {x0}</text><text x="{w - pad - 24}" y="{h - 4}">it {x1}</text></svg></div>'
    )


def _pairs(k: int, run: Run) -> str:
    got = held_out_pairs(run)
    if got is None:
        return "<h2>held-out before / after</h2><p>fewer than two evaluated iterations with held-out runs</p>"
    first, last, pairs = got
    return (
        f"<h2>held-out before / after: iteration {first.number} and {last.number}</h2>"
        f'<p><a href="{href("/run/pairs", {"r": k})}">{len(pairs)} held-out run(s) side by side</a></p>'
    )


def pairs_page(k: int, run: Run, first: int, last: int, rows: list[tuple[str, int, Side, int, Side]]) -> str:
    parts = [
        f"<h1>held-out runs of {esc(run.name)}: iteration {first} (before) and {last} (after)</h1>",
        '<table id="pairs"><thead><tr><th>held-out run</th><th>before</th><th>after</th></tr></thead><tbody>',
    ]
    for name, pa, a, pb, b in rows:
        parts.append(
            f"<tr><td>{esc(name)}</td><td>{_side(k, first, pa, a)}</td><td>{_side(k, last, pb, b)}</td></tr>"
        )
    parts.append("</tbody></table>")
    return layout(f"orchestrace · {run.name} held-out", "".join(parts), runs=True)


def _side(k: int, it: int, pos: int, s: Side) -> str:
    answers = "".join(f"<div><b>{esc(a)}</b>: {esc(t[:300])}</div>" for a, t in s.answers.items())
    link = href("/run/trace", {"r": k, "it": it, "f": pos})
    reward = "" if s.reward is None else f" · team reward {s.reward:g}"
    return (
        f'<div class="text"><a href="{link}">{esc(s.trace.trace_id)}</a>{esc(reward)}'
        f"<div>final: {esc(s.final)}</div>{answers}</div>"
    )
