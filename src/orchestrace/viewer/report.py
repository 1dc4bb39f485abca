"""``orchestrace report RUN_DIR``: PNG plots and one HTML page for an analysis or training run.

Inputs (all optional, at least one; searched anywhere under RUN_DIR; docs/viewer.md has examples):

- ``pareto*.json``: accuracy against cost. Either a list of rows, exactly what
  ``orchestrace eval ... --format json`` prints, ``{"method", "accuracy", "mean_samples",
  "questions", "accuracy_ci95"?, "mean_samples_ci95"?, "family"?}``, or an object
  ``{"points": [rows], "x"?: cost key, "y"?: "accuracy", "title"?, "labels"?: {curve: legend label}}``. The cost key is ``x`` if
  given, else the first of ``cost``, ``mean_samples``, ``usd``, ``tokens`` present (other keys,
  e.g. the ``fronts`` of ``orchestrace.learn.stopping.report``, are ignored: the front is recomputed).
  Rows are grouped into curves by ``family``, else by the method name up to its first ``(``,
  ``@``, ``[``, ``=``, ``:`` or space, with a trailing ``-<number>`` read as ``-k``
  (``ac-beta(0.95)`` and ``ac-beta(0.99)`` form one curve, ``fixed-5`` and ``fixed-9`` another).
- ``learning_curve*.json`` (``learning_curves.json`` too): a list of records ``{"step",
  <metric>: number, ..., "run"?, "seed"?}``, or ``{"records": [...], "x"?: "step", "title"?}``,
  or ``{run name: [records]}`` (what ``orchestrace.learn.stopping.report`` writes). The x key is ``x`` if
  given, else the first of ``step``, ``iteration``, ``epoch``, ``episode`` that every record has.
  One panel per metric, one line per ``run`` (or ``method``/``label``); several seeds of a run
  are drawn as their mean with a min-max band.
- ``analysis*.json``: ``{"by_agent": {agent: {"tokens_in", "tokens_out", "usd", "busy_s", ...}}}``
  (the output of ``orchestrace.measure.breakdown``), and/or ``{"traces": [rows]}`` / a list of
  rows from ``orchestrace.measure.analyze`` (shown as a table).
- trace files (``*.jsonl``, ``*.events.jsonl``, ``*.json`` under ``traces/``; optionally
  ``.gz``/``.zst``): per-agent costs are computed from them with ``orchestrace.measure.breakdown``.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..core.errors import LoadError, OrchestraceError
from ..core.paths import make_dirs
from ..core.read import parse_json
from ..core.stats import pareto_front

COST_KEYS = ("cost", "mean_samples", "usd", "tokens")
STEP_KEYS = ("step", "iteration", "epoch", "episode")
GROUP_KEYS = ("run", "method", "label")
_GROUP_SPLIT = re.compile(r"[(@\[=: ]")
_TRAILING_NUMBER = re.compile(r"-\d+(\.\d+)?$")
_TRACE_SUFFIXES = (".jsonl", ".events.jsonl")
_COMPRESSED = ("", ".gz", ".zst")
_CALL_CACHE = ".cache.jsonl"  # runtime.cache.cache_path: the call cache beside a recorded trace


@dataclass
class RunReport:
    html: Path
    pngs: list[Path] = field(default_factory=list)


# ---------------------------------------------------------------- input reading


def _read_json(path: Path) -> Any:
    """The shared JSON reader: one byte-order mark accepted (orjson said "not valid JSON"), the
    place of a mistake and the limits of ``core.limits``."""
    return parse_json(path.read_bytes(), path=str(path))


def _need(cond: bool, path: Path, pointer: str, message: str) -> None:
    if not cond:  # a report input of the wrong shape is bad input (exit 1), as a bad trace is
        raise LoadError("OT010", message, path=str(path), pointer=pointer)


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def read_pareto(path: Path) -> dict[str, Any]:
    """Normalised Pareto input: ``{"x", "y", "title", "rows"}`` (see module docstring)."""
    doc = _read_json(path)
    meta: dict[str, Any] = {}
    if isinstance(doc, dict):
        _need(isinstance(doc.get("points"), list), path, "/points", "expected a list under 'points'")
        meta, rows = doc, doc["points"]
    else:
        _need(isinstance(doc, list), path, "", "expected a list of rows or an object with 'points'")
        rows = doc
    y = meta.get("y", "accuracy")
    x = meta.get("x")
    # a list or object there was an internal error (an unhashable key)
    _need(isinstance(y, str), path, "/y", "'y' must name the row key to plot (a string)")
    _need(x is None or isinstance(x, str), path, "/x", "'x' must name the row key to plot (a string)")
    if x is None:
        x = next((k for k in COST_KEYS if rows and all(k in r for r in rows if isinstance(r, dict))), None)
    _need(x is not None, path, "", f"rows need a cost key: one of {', '.join(COST_KEYS)} (or set 'x')")
    for i, r in enumerate(rows):
        _need(isinstance(r, dict), path, f"/{i}", "each row must be an object")
        _need(_number(r.get(x)) and _number(r.get(y)), path, f"/{i}", f"row needs numbers {x!r} and {y!r}")
    marks = meta.get("marks") or []
    _need(isinstance(marks, list), path, "/marks", "expected a list under 'marks'")
    for i, m in enumerate(marks):
        _need(
            isinstance(m, dict) and _number(m.get(x)) and _number(m.get(y)),
            path,
            f"/marks/{i}",
            f"a mark needs numbers {x!r} and {y!r}",
        )
    labels = meta.get("labels") or {}
    _need(
        isinstance(labels, dict), path, "/labels", "expected an object (curve -> legend label) under 'labels'"
    )
    return {"x": x, "y": y, "title": meta.get("title"), "rows": rows, "marks": marks, "labels": labels}


def read_learning_curve(path: Path) -> dict[str, Any]:
    """Normalised learning-curve input: ``{"x", "title", "records", "shown", "labels"}``."""
    doc = _read_json(path)
    meta: dict[str, Any] = {}
    if isinstance(doc, dict) and "records" in doc:
        _need(isinstance(doc["records"], list), path, "/records", "expected a list under 'records'")
        meta, recs = doc, doc["records"]
    elif isinstance(doc, dict):  # {run name: [records]}
        recs = []
        for name, rows in doc.items():
            _need(isinstance(rows, list), path, f"/{name}", "expected a list of records per run")
            recs.extend({**r, "run": name} if isinstance(r, dict) else r for r in rows)
    else:
        _need(isinstance(doc, list), path, "", "expected a list of records or an object with 'records'")
        recs = doc
    _need(
        meta.get("x") is None or isinstance(meta["x"], str),
        path,
        "/x",
        "'x' must name the record key (a string)",
    )
    x = meta.get("x") or next(
        (k for k in STEP_KEYS if recs and all(isinstance(r, dict) and k in r for r in recs)), "step"
    )
    for i, r in enumerate(recs):
        _need(isinstance(r, dict) and _number(r.get(x)), path, f"/{i}", f"each record needs a number {x!r}")
    shown, labels = meta.get("shown"), meta.get("labels") or {}
    _need(
        shown is None or (isinstance(shown, list) and all(isinstance(n, str) for n in shown)),
        path,
        "/shown",
        "expected a list of run names",
    )
    _need(isinstance(labels, dict), path, "/labels", "expected an object: run name -> legend label")
    return {"x": x, "title": meta.get("title"), "records": recs, "shown": shown, "labels": labels}


def read_analysis(path: Path) -> dict[str, Any]:
    """``{"by_agent": {...}, "traces": [...]}`` from an analysis file (either part may be empty)."""
    doc = _read_json(path)
    if isinstance(doc, list):
        doc = {"traces": doc}
    _need(
        isinstance(doc, dict),
        path,
        "",
        "expected an object with 'by_agent' and/or 'traces', or a list of rows",
    )
    by_agent = doc.get("by_agent") or {}
    traces = doc.get("traces") or []
    _need(isinstance(by_agent, dict), path, "/by_agent", "'by_agent' must map agent names to objects")
    _need(isinstance(traces, list), path, "/traces", "'traces' must be a list of rows")
    for name, row in by_agent.items():
        _need(isinstance(row, dict), path, f"/by_agent/{name}", "each agent maps to an object of numbers")
    for i, row in enumerate(traces):  # [1] drew nothing and exited 0
        _need(isinstance(row, dict), path, f"/traces/{i}", "each trace row must be an object")
    return {"by_agent": by_agent, "traces": traces}


def _is_trace_file(p: Path, run_dir: Path) -> bool:
    name = p.name.lower()
    if any(name.endswith(_CALL_CACHE + c) for c in _COMPRESSED):
        return False
    if any(name.endswith(s + c) for s in _TRACE_SUFFIXES for c in _COMPRESSED):
        return True
    return "traces" in p.relative_to(run_dir).parts[:-1] and any(
        name.endswith(".json" + c) for c in _COMPRESSED
    )


def agent_breakdown_from_traces(paths: list[Path]) -> dict[str, dict[str, float]]:
    """Per-agent totals over every trace of the files (``measure.breakdown`` summed by agent)."""
    from ..core.io import iter_traces
    from ..measure import breakdown

    total: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for p in paths:
        for tr in iter_traces(p):
            for agent, row in breakdown(tr, "agent").items():
                for k, v in row.items():
                    total[agent][k] += v
    return {a: dict(r) for a, r in total.items()}


# ---------------------------------------------------------------- plots


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curve_name(row: dict[str, Any]) -> str:
    if row.get("family"):
        return str(row["family"])
    name = str(row.get("method", "?"))
    base = _GROUP_SPLIT.split(name, 1)[0] or name
    return _TRAILING_NUMBER.sub("-k", base)


#: axis names for the keys a Pareto input uses (another key: its underscores as spaces)
AXIS_NAMES = {
    "mean_samples": "mean samples per question",
    "usd": "cost (USD)",
    "tokens": "tokens",
    "cost": "cost",
    "accuracy": "accuracy",
}
_MARKERS = "osD^vP<>Xph*"


def axis_name(key: str) -> str:
    return AXIS_NAMES.get(key, key.replace("_", " "))


def plain_log_axis(ax: Any) -> None:
    """A log x axis ticked 1, 2, 5, 10, 20, ... in plain numbers (not 10^0, 10^1)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def label_marks(ax: Any, marks: list[tuple[float, float, str]], gap_pt: float = 12.0) -> None:
    """Each mark's label right of it; labels of marks close together are pushed apart vertically
    (with a thin line to their mark) so that none covers another ("1", "2" and "4" printed on top
    of each other between 5 and 6 samples), and kept inside the axes."""
    if not marks:
        return
    ax.figure.canvas.draw()  # the final limits, so data -> pixels is what is drawn
    scale = ax.figure.dpi / 72.0  # pixels per point
    gap = gap_pt * scale
    px = [ax.transData.transform((x, y)) for x, y, _ in marks]
    near = 40 * scale  # labels further apart than this in x cannot meet
    label_y: dict[int, float] = {}
    for i in sorted(range(len(marks)), key=lambda i: px[i][1]):  # bottom up: each clears those below
        below = [label_y[j] for j in label_y if abs(px[j][0] - px[i][0]) < near]
        label_y[i] = max([px[i][1], *(b + gap for b in below)])
    top = ax.get_window_extent().y1 - gap / 2
    done: list[int] = []
    for i in sorted(label_y, key=label_y.__getitem__, reverse=True):  # top down: none above the axes
        above = [label_y[j] - gap for j in done if abs(px[j][0] - px[i][0]) < near]
        label_y[i] = min([label_y[i], top, *above])
        done.append(i)
    for i, (x, y, text) in enumerate(marks):
        dy = (label_y[i] - px[i][1]) / scale
        ax.annotate(
            text, (x, y), xytext=(12, dy), textcoords="offset points", fontsize=9, fontweight="bold",
            va="center", zorder=6,
            arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "#444444", "shrinkA": 0, "shrinkB": 5}
            if abs(dy) > 2 else None,
        )  # fmt: skip


def plot_pareto(data: dict[str, Any], out: Path) -> Path:
    fig = pareto_plot(data)
    fig.savefig(out, bbox_inches="tight")
    _pyplot().close(fig)
    return out


def pareto_plot(data: dict[str, Any]) -> Any:
    """Accuracy against cost, read at a glance: each method's own front as a line and its other
    settings as pale dots, the overall Pareto front, labels a reader knows (``labels`` of the input,
    axis names, not raw keys) and numbered marks apart. The 95% CIs are not drawn (error bars on
    every point overlapped into an unreadable block): the legend gives their typical width and the
    HTML table each one."""
    from matplotlib.lines import Line2D

    plt = _pyplot()
    x, y = data["x"], data["y"]
    names = data.get("labels") or {}
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in data["rows"]:
        groups[curve_name(r)].append(r)
    fig, ax = plt.subplots(figsize=(10.5, 5.2), dpi=110)  # the legend sits right of the axes
    cmap = plt.get_cmap("tab10")
    pale = False
    for k, (name, rows) in enumerate(sorted(groups.items())):
        colour, marker = cmap(k % 10), _MARKERS[k % len(_MARKERS)]
        own = pareto_front([(r[x], r[y]) for r in rows])
        rest = [r for r in rows if (r[x], r[y]) not in set(own)]
        if rest:
            pale = True
            ax.scatter(
                [r[x] for r in rest], [r[y] for r in rest], color=colour, marker=marker, s=14, alpha=0.3
            )
        ax.plot([p[0] for p in own], [p[1] for p in own], "-" if len(own) > 1 else "", marker=marker, ms=5,
                lw=1.4, color=colour, label=str(names.get(name, name)))  # fmt: skip
    front = pareto_front([(r[x], r[y]) for r in data["rows"]])
    ax.step([p[0] for p in front], [p[1] for p in front], where="post", color="black", lw=1.0, ls="--",
            label="Pareto front (all methods)")  # fmt: skip
    handles, _ = ax.get_legend_handles_labels()
    if pale:
        handles.append(Line2D([], [], ls="", marker="o", ms=4, color="#777777", alpha=0.4,
                              label="pale: a method's other settings (off its own front)"))  # fmt: skip
    widths = [
        (r[f"{y}_ci95"][1] - r[f"{y}_ci95"][0]) / 2 for r in data["rows"] if _interval(r.get(f"{y}_ci95"))
    ]
    if widths:
        handles.append(Line2D([], [], ls="", label=f"95% CI of {axis_name(y)}: about ±{sorted(widths)[len(widths) // 2]:.2g}"
                              " (median; each in the table)"))  # fmt: skip
    marks = data.get("marks", [])
    for m in marks:  # e.g. the policy files the main job wrote, numbered as it prints them
        name = str(m.get("mark", "?"))
        what = ", ".join(
            str(m[k]) if k == "method" else Path(str(m[k])).name for k in ("method", "path") if k in m
        )
        handles.append(ax.scatter(m[x], m[y], marker="*", s=200, color="#d62728", edgecolors="black",
                                  linewidths=0.6, zorder=5, label=f"{name}: {what}" if what else name))  # fmt: skip
    xs = [r[x] for r in data["rows"]]
    log = min(xs) > 0 and max(xs) / min(xs) >= 10
    if log:  # the cheap end, where the methods differ, is not squeezed into a tenth of the axis
        plain_log_axis(ax)
    ax.set_xlabel(axis_name(x) + (" (log scale)" if log else ""))
    ax.set_ylabel(axis_name(y))
    ax.set_title(data.get("title") or f"{axis_name(y).capitalize()} against {axis_name(x)}")
    ax.grid(alpha=0.3)
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    fig.tight_layout()
    label_marks(ax, [(m[x], m[y], str(m.get("mark", "?"))) for m in marks])
    return fig


def _interval(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(_number(b) for b in v)


def _metrics(records: list[dict[str, Any]], x: str) -> list[str]:
    skip = {x, "seed", *GROUP_KEYS}
    keys: dict[str, None] = {}
    for r in records:
        for k, v in r.items():
            if k not in skip and _number(v):
                keys[k] = None
    return list(keys)


def _group(r: dict[str, Any]) -> str:
    return next((str(r[k]) for k in GROUP_KEYS if k in r), "run")


#: Learning curves drawn at most: more lines than this cannot be told apart (the HTML table lists every run).
MAX_RUNS = 6


def shown_runs(data: dict[str, Any]) -> list[str]:
    """The runs a learning-curve plot draws: the input's ``shown`` list if it names runs that have
    records, else every run (sorted); at most ``MAX_RUNS`` either way."""
    present = {_group(r) for r in data["records"]}
    shown = [n for n in data.get("shown") or [] if n in present] or sorted(present)
    return shown[:MAX_RUNS]


def plot_learning_curve(data: dict[str, Any], out: Path) -> Path:
    plt = _pyplot()
    x, recs = data["x"], data["records"]
    metrics = _metrics(recs, x)
    if not metrics:
        raise LoadError("OT010", "learning-curve records carry no numeric metric besides the x key")
    groups, total = shown_runs(data), len({_group(r) for r in recs})
    recs = [r for r in recs if _group(r) in groups]
    metrics = [m for m in metrics if any(_number(r.get(m)) for r in recs)]
    labels = data.get("labels") or {}
    cols = min(3, len(metrics))
    rows = math.ceil(len(metrics) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), dpi=110, squeeze=False)
    cmap = plt.get_cmap("tab10")
    for m, ax in zip(metrics, axes.flat, strict=False):
        for k, g in enumerate(groups):
            by_x: dict[float, list[float]] = defaultdict(list)
            for r in recs:
                if _group(r) == g and _number(r.get(m)):
                    by_x[r[x]].append(float(r[m]))
            if not by_x:
                continue
            xs = sorted(by_x)
            mean = [sum(by_x[v]) / len(by_x[v]) for v in xs]
            colour = cmap(k % 10)
            ax.plot(xs, mean, color=colour, lw=1.5, label=str(labels.get(g, g)))
            if any(len(by_x[v]) > 1 for v in xs):
                ax.fill_between(
                    xs, [min(by_x[v]) for v in xs], [max(by_x[v]) for v in xs], color=colour, alpha=0.18
                )
        ax.set_title(m.replace("_", " "), fontsize=10)
        ax.set_xlabel(x)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.axis("off")
    if data.get("title"):
        fig.suptitle(data["title"])
    fig.tight_layout()
    if len(groups) > 1 or total > len(groups):  # one legend for every panel, below them (outside the data)
        handles = {h.get_label(): h for a in axes.flat for h in a.get_lines()}
        fig.legend(list(handles.values()), list(handles), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=min(3, len(handles)), fontsize=8,
                   title=None if total == len(groups) else f"{len(groups)} of {total} runs (all in the table)")  # fmt: skip
    fig.savefig(out, bbox_inches="tight")
    plt.close(fig)
    return out


def plot_agent_costs(by_agent: dict[str, dict[str, Any]], out: Path, top: int = 25) -> Path:
    """Horizontal bars per agent: tokens (in/out stacked), USD and busy seconds, top agents by tokens."""
    plt = _pyplot()

    def val(row: dict[str, Any], k: str) -> float:
        v = row.get(k)
        return float(v) if _number(v) else 0.0

    agents = sorted(
        by_agent,
        key=lambda a: (
            -(val(by_agent[a], "tokens_in") + val(by_agent[a], "tokens_out") or val(by_agent[a], "tokens"))
        ),
    )[:top]
    agents.reverse()
    panels = [("tokens", ("tokens_in", "tokens_out")), ("USD", ("usd",)), ("busy seconds", ("busy_s",))]
    panels = [(t, ks) for t, ks in panels if any(val(by_agent[a], k) for a in agents for k in ks)]
    if not panels:
        panels = [("tokens", ("tokens",))]
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(4.2 * len(panels) + 1.5, 0.32 * len(agents) + 1.6),
        dpi=110,
        squeeze=False,
        sharey=True,
    )
    names = [a if len(a) <= 28 else a[:27] + "…" for a in agents]
    for ax, (title, keys) in zip(axes[0], panels, strict=True):
        left = [0.0] * len(agents)
        for k, key in enumerate(keys):
            vals = [val(by_agent[a], key) for a in agents]
            ax.barh(names, vals, left=left, color=("#364fc7", "#74c0fc", "#2b8a3e")[k % 3], label=key)
            left = [a + b for a, b in zip(left, vals, strict=True)]
        ax.set_title(title, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        if len(keys) > 1:
            ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"cost by agent (top {len(agents)} of {len(by_agent)} by tokens)", fontsize=11)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


# ---------------------------------------------------------------- the report


def _table(rows: list[dict[str, Any]], keys: list[str]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        if isinstance(v, list | dict):
            return html.escape(orjson.dumps(v).decode())
        return html.escape("" if v is None else str(v))

    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
    body = "".join("<tr>" + "".join(f"<td>{cell(r.get(k))}</td>" for k in keys) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _keys(rows: list[dict[str, Any]], limit: int = 14) -> list[str]:
    out: dict[str, None] = {}
    for r in rows:
        for k in r:
            out[k] = None
    return list(out)[:limit]


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"><figcaption>{html.escape(path.name)}</figcaption></figure>'


_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#1d2330;padding:0 16px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12.5px;margin:8px 0}td,th{border:1px solid #e1e3e8;padding:3px 7px;text-align:left}
th{background:#f4f5f7}figure{margin:10px 0}img{max-width:100%;border:1px solid #eee}figcaption,.src{color:#6b7385;font-size:12px}"""


def default_report_dir(run: Path) -> Path:
    """``RUN_DIR/report``, or RUN_DIR itself when it is already a ``report`` folder (the main job
    writes its JSON to ``runs/stop/report/``: ``report runs/stop`` and ``report runs/stop/report``
    both write ``runs/stop/report/report.html``)."""
    return run if run.name == "report" else run / "report"


def build_report(run_dir: str | Path, out: str | Path | None = None) -> RunReport:
    """Read the run's JSON (and traces), write PNGs and ``report.html`` into ``out``."""
    run = Path(run_dir)
    if run.is_file():  # a trace: `view` draws one
        raise OrchestraceError(
            "OT001",
            "is a file: report reads a run folder (e.g. runs/stop); `orchestrace view` draws one trace",
            path=str(run),
        )
    if not run.is_dir():
        raise OrchestraceError("OT001", "run directory not found", path=str(run))
    dest = Path(out) if out is not None else default_report_dir(run)
    make_dirs(dest)
    files = sorted(p for p in run.rglob("*") if p.is_file())
    pareto = [p for p in files if p.name.startswith("pareto") and p.suffix == ".json"]
    curves = [p for p in files if p.name.startswith("learning_curve") and p.suffix == ".json"]
    analyses = [p for p in files if p.name.startswith("analysis") and p.suffix == ".json"]
    traces = [p for p in files if _is_trace_file(p, run)]
    if not (pareto or curves or analyses or traces):
        raise OrchestraceError(
            "OT001",
            "no report inputs: expected pareto*.json, learning_curve*.json, analysis*.json or trace files "
            "(*.jsonl, traces/*.json); see docs/viewer.md",
            path=str(run),
        )
    res = RunReport(html=dest / "report.html")
    sections: list[str] = []

    def png(src: Path, kind: str) -> Path:
        if src.parent.resolve() == dest.resolve():  # beside the main job's own plots: do not clobber them
            return dest / f"report_{src.stem}.png"
        stem = src.relative_to(run).with_suffix("").as_posix().replace("/", "__")
        return dest / f"{kind}__{stem}.png" if stem != kind else dest / f"{kind}.png"

    for p in pareto:
        data = read_pareto(p)
        img = plot_pareto(data, png(p, "pareto"))
        res.pngs.append(img)
        front = pareto_front([(r[data["x"]], r[data["y"]]) for r in data["rows"]])
        rows = sorted(data["rows"], key=lambda r: (curve_name(r), r[data["x"]]))
        sections.append(
            f"<h2>Accuracy against cost</h2><p class=src>{html.escape(str(p.relative_to(run)))} · "
            f"{len(rows)} points · curves: {html.escape(', '.join(sorted({curve_name(r) for r in rows})))} · "
            f"Pareto front: {len(front)} points</p>{_img(img, 'Pareto curves')}" + _table(rows, _keys(rows))
        )
    for p in curves:
        data = read_learning_curve(p)
        img = plot_learning_curve(data, png(p, "learning_curve"))
        res.pngs.append(img)
        last = _last_per_group(data)
        sections.append(
            f"<h2>Learning curves</h2><p class=src>{html.escape(str(p.relative_to(run)))} · "
            f"{len(data['records'])} records</p>{_img(img, 'learning curves')}"
            + "<p>Last record of each run:</p>"
            + _table(last, _keys(last))
        )
    by_agent: dict[str, dict[str, Any]] = {}
    trace_rows: list[dict[str, Any]] = []
    for p in analyses:
        a = read_analysis(p)
        for agent, row in a["by_agent"].items():
            acc = by_agent.setdefault(agent, {})
            for k, v in row.items():
                if _number(v):
                    acc[k] = acc.get(k, 0.0) + v
        trace_rows.extend(r for r in a["traces"] if isinstance(r, dict))
    if traces:
        for agent, row in agent_breakdown_from_traces(traces).items():
            acc = by_agent.setdefault(agent, {})
            for k, v in row.items():
                acc[k] = acc.get(k, 0.0) + v
    if by_agent:
        img = plot_agent_costs(by_agent, dest / "agent_costs.png")
        res.pngs.append(img)
        rows = [
            {"agent": a, **r}
            for a, r in sorted(by_agent.items(), key=lambda kv: -float(kv[1].get("tokens", 0)))
        ]
        src = ", ".join(str(p.relative_to(run)) for p in [*analyses, *traces][:6])
        sections.append(
            f"<h2>Cost by agent</h2><p class=src>{html.escape(src)}</p>{_img(img, 'cost by agent')}"
            + _table(rows[:200], _keys(rows))
        )
    if trace_rows:
        sections.append("<h2>Per-trace metrics</h2>" + _table(trace_rows[:500], _keys(trace_rows, 16)))
    title = f"orchestrace report · {run.name}"
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p class=src>{html.escape(str(run))}</p>{''.join(sections)}</body></html>"
    )
    res.html.write_text(page, encoding="utf-8")
    return res


def _last_per_group(data: dict[str, Any]) -> list[dict[str, Any]]:
    x = data["x"]
    last: dict[tuple[str, Any], dict[str, Any]] = {}
    for r in data["records"]:
        key = (_group(r), r.get("seed"))
        if key not in last or r[x] >= last[key][x]:
            last[key] = r
    return [last[k] for k in sorted(last, key=lambda k: (k[0], str(k[1])))]
