"""Route traces <-> Delegate training data, and the delegate decision's feature function.

A run of the ``route`` program (``orchestrace.runtime.programs.route``) is one Delegate episode:
its config holds the query (``question``, ``group``, ``question_id``) and the models it may route
to; the agent that answered (``model:NAME``) is the action; the answer's quality (``attrs.quality``
on the return, else the answer checked against the config's ``gold``) and its price (``cost_usd``)
are the outcome. :func:`delegate_features` is what a policy sees, in training (``DelegateEnv``
computes ``query_features`` of the same text and group), offline evaluation and live runs.

The Delegate env replays every model's outcome on a query, so a training set needs, per query,
one run per model: :func:`route_to_traces` writes such a set from a ``RouteData`` table and
:func:`route_data_from_traces` reads any such set back (``train delegate --traces``); the table
round-trips exactly, so ``--source`` and ``--traces`` train the same policy.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.errors import BadInput
from ...core.model import Trace
from ...core.paths import make_dirs
from ...runtime.programs.route import AGENT_PREFIX
from ..datasets import RouteData
from .delegate import query_features

ROUTE_PROGRAM = "route"
DEFAULT_MODELS = ["small", "large"]  # the route program's default, when a config names none


@dataclass(frozen=True)
class RouteRun:
    """One recorded route run: the query, the models offered, the one that answered and how well."""

    path: str
    question_id: str
    question: str
    group: str
    models: list[str]
    model: str
    quality: float
    cost_usd: float
    response: str | None
    data: str | None  # the table the trace was written from (``route_to_traces``), if any
    data_index: int | None  # and the query's position in it


def route_config(tr: Trace, path: str = "<trace>") -> dict[str, Any]:
    """The route program's config of a trace; a clear error when the trace is not a route run."""
    rt = (tr.metadata or {}).get("runtime")
    rt = rt if isinstance(rt, dict) else {}  # not an object (a string: an internal error): no program
    if rt.get("program") != ROUTE_PROGRAM:
        raise BadInput(
            "OT614",
            f"trace {tr.trace_id!r} is not a run of the route program (metadata.runtime.program is "
            f"{rt.get('program')!r}); a delegate trainer needs the query and the model that answered",
            path=path,
            pointer="/metadata/runtime/program",
        )
    cfg = rt.get("config") or {}
    if not isinstance(cfg, dict):
        raise BadInput("OT614", f"the route run's config is a {type(cfg).__name__}, not an object", path=path,
                       pointer="/metadata/runtime/config")  # fmt: skip
    if not isinstance(cfg.get("question"), str):
        raise BadInput("OT614", "the route run has no question in its config", path=path,
                       pointer="/metadata/runtime/config/question")  # fmt: skip
    models = cfg.get("models", DEFAULT_MODELS)
    # a string was read as its letters, one model each; a list of lists was unhashable
    if not isinstance(models, list) or not models or not all(isinstance(m, str) and m for m in models):
        raise BadInput("OT614", f"the route run's models must be a non-empty list of names, got {models!r:.60}",
                       path=path, pointer="/metadata/runtime/config/models")  # fmt: skip
    for key in ("question_id", "group", "gold", "data"):
        v = cfg.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, str | int)):
            raise BadInput("OT614", f"the route run's {key} must be a string, got {v!r:.60}", path=path,
                           pointer=f"/metadata/runtime/config/{key}")  # fmt: skip
    return cfg


def delegate_features(tr: Trace, path: str = "<trace>") -> np.ndarray:
    """What a delegate policy sees: :func:`query_features` of the run's question and group."""
    cfg = route_config(tr, path)
    return query_features(cfg["question"], str(cfg.get("group", "")))


def _quality(attrs: dict[str, Any], content: str | None, gold: Any, path: str, pointer: str) -> float:
    if "quality" in attrs:
        q = attrs["quality"]  # float("abc") was an internal error, "0.5" read silently, NaN kept
        if isinstance(q, bool) or not isinstance(q, int | float) or not math.isfinite(q):
            raise BadInput("OT614", f"attrs.quality must be a finite number, got {q!r:.60}", path=path,
                           pointer=pointer + "/attrs/quality")  # fmt: skip
        return float(q)
    if isinstance(gold, str):
        from ...runtime.programs.vote import first_line

        return float(first_line(content) == first_line(gold))
    raise BadInput("OT614", "the answer has no outcome: no attrs.quality on it and no gold in the config",
                   path=path, pointer=pointer)  # fmt: skip


def run_from_trace(tr: Trace, path: str = "<trace>") -> RouteRun:
    cfg = route_config(tr, path)
    idx = [
        i for i, e in enumerate(tr.events) if e.type == "return" and (e.agent or "").startswith(AGENT_PREFIX)
    ]
    ok = [i for i in idx if tr.events[i].status in (None, "ok")]
    if not ok:
        raise BadInput("OT614", "the route run has no model answer (no ok return of a model:NAME agent)", path=path,
                       pointer="/events")  # fmt: skip
    i = ok[-1]
    e = tr.events[i]
    models = cfg.get("models", DEFAULT_MODELS)
    return RouteRun(
        path=path,
        question_id=str(cfg.get("question_id", tr.task_id)),
        question=cfg["question"],
        group=str(cfg.get("group", "")),
        models=list(models),
        model=(e.agent or "").removeprefix(AGENT_PREFIX),
        quality=_quality(e.attrs or {}, e.content, cfg.get("gold"), path, f"/events/{i}"),
        cost_usd=float(e.cost_usd or 0.0),
        response=e.content,
        data=cfg.get("data"),
        data_index=cfg.get("data_index") if isinstance(cfg.get("data_index"), int) else None,
    )


def route_data_from_traces(pattern: str | Sequence[str], name: str | None = None) -> RouteData:
    """``train delegate --traces``: the quality / cost table of the route runs under ``pattern``
    (every query needs one run per offered model; every run must offer the same models)."""
    from ...core.io import load_one
    from ..stopping.traces import trace_paths

    runs = [run_from_trace(load_one(p), p) for p in trace_paths(pattern)]
    models = runs[0].models
    by_q: dict[str, dict[str, RouteRun]] = {}
    for r in runs:
        if r.models != models:
            raise BadInput("OT618", f"the run offers models {r.models}, {runs[0].path} offers {models}; "
                           "one delegate policy routes among one set of models", path=r.path)  # fmt: skip
        if r.model not in models:
            raise BadInput(
                "OT614", f"the answer came from {r.model!r}, not one of the offered {models}", path=r.path
            )
        seen = by_q.setdefault(r.question_id, {})
        if r.model in seen:
            raise BadInput("OT616", f"query {r.question_id!r} was answered by {r.model!r} in two traces "
                           f"({seen[r.model].path})", path=r.path)  # fmt: skip
        seen[r.model] = r
    for qid, seen in by_q.items():
        missing = [m for m in models if m not in seen]
        if missing:
            any_run = next(iter(seen.values()))
            raise BadInput(
                "OT614",
                f"query {qid!r} has no run with {', '.join(missing)}: the Delegate env replays every model's "
                "outcome, so record one run per model (--set default=MODEL)",
                path=any_run.path,
            )
    rows = list(by_q.values())
    if all(r[models[0]].data_index is not None for r in rows):  # written from a table: its order
        rows.sort(key=lambda r: (r[models[0]].data or "", r[models[0]].data_index))
    first = [r[models[0]] for r in rows]
    responses = [[r[m].response for m in models] for r in rows]
    names = sorted({r.data or "traces" for r in first})
    return RouteData(
        name or "+".join(names),
        [r.question_id for r in first],
        [r.question for r in first],
        [r.group for r in first],
        list(models),
        np.array([[r[m].quality for m in models] for r in rows], dtype=np.float64),
        np.array([[r[m].cost_usd for m in models] for r in rows], dtype=np.float64),
        responses=responses if all(x is not None for row in responses for x in row) else None,  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class LoggedRoute:
    """One routed run as a logged bandit sample: what the router saw, what it chose, the chance it
    had of choosing it (1 for a greedy or default choice), and the outcome."""

    path: str
    features: np.ndarray
    action: int
    prob: float
    quality: float
    cost_usd: float


def logged_routes(pattern: str | Sequence[str]) -> tuple[list[str], list[LoggedRoute]]:
    """``train delegate --traces --logged``: every route run under ``pattern`` as it happened (the
    models offered, and per run the features, the model that answered and its chance); runs must
    offer the same models."""
    from ...core.io import load_one
    from ..stopping.traces import trace_paths

    models: list[str] | None = None
    first = ""
    out = []
    for p in trace_paths(pattern):
        tr = load_one(p)
        r = run_from_trace(tr, p)
        if models is None:
            models, first = r.models, p
        elif r.models != models:
            raise BadInput("OT618", f"the run offers models {r.models}, {first} offers {models}; "
                           "one delegate policy routes among one set of models", path=p)  # fmt: skip
        if r.model not in models:
            raise BadInput(
                "OT614", f"the answer came from {r.model!r}, not one of the offered {models}", path=p
            )
        prob = 1.0
        for i, e in enumerate(tr.events):
            a = e.attrs or {}
            if (
                e.type == "orchestrator_decision"
                and a.get("decision") == "should_delegate"
                and a.get("sampled")
            ):
                chance = a.get("prob", 0.0)  # float("abc") was an internal error
                if (
                    a.get("value") != AGENT_PREFIX + r.model
                    or isinstance(chance, bool)
                    or not isinstance(chance, int | float)
                    or not 0.0 < chance <= 1.0
                ):
                    raise BadInput("OT614", "the sampled delegate decision does not match the model that answered "
                                   "or has no probability in (0, 1]", path=p, pointer=f"/events/{i}")  # fmt: skip
                prob = float(a["prob"])
        out.append(
            LoggedRoute(p, delegate_features(tr, p), models.index(r.model), prob, r.quality, r.cost_usd)
        )
    return list(models or []), out


def route_to_traces(data: RouteData, out_dir: str) -> list[str]:
    """One route trace per (query, model): the model's logged answer, quality and price; returns the paths."""
    from ...runtime.recorder import Recorder

    make_dirs(out_dir)
    paths = []
    for q, qid in enumerate(data.ids):
        for j, m in enumerate(data.models):
            cfg = {"question": data.texts[q], "group": data.groups[q], "question_id": qid, "models": data.models,
                   "default": m, "data": data.name, "data_index": q}  # fmt: skip
            path = os.path.join(out_dir, f"{_safe(qid)}.{j}.events.jsonl")
            meta = {"runtime": {"program": ROUTE_PROGRAM, "config": cfg, "source": f"data:{data.name}"}}
            resp = data.responses[q][j] if data.responses is not None else None
            with Recorder(path, task_id=data.texts[q], trace_id=f"route-{qid}-{j}", topology="centralized",
                          metadata=meta, clock="logical") as rec:  # fmt: skip
                agent = AGENT_PREFIX + m
                rec.spawn(agent, role="model", parent=rec.root_agent)
                rec.decision("delegate", [agent])
                msg = rec.message(data.texts[q], to=agent)
                last = rec.ret(resp, frm=agent, role="model", model=m, cost_usd=float(data.cost[q, j]), after=[msg],
                               attrs={"quality": float(data.quality[q, j])})  # fmt: skip
                rec.despawn(agent, parent=rec.root_agent, after=[last])
                rec.stop("answered")
            paths.append(path)
    return paths


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
