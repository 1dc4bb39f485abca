"""Corpus reports: mean and percentiles per metric, trace-length bands, groups, MAS-native coverage.

Our choices:

- **Summary** of a metric over traces: ``n`` (traces with a value), ``mean``, ``p10``, ``p50``,
  ``p90``, ``min``, ``max`` (linear-interpolation percentiles); null values are left out, never
  counted as 0.
- **Bands** (survey recommendation B2): traces of 1-10, 11-100, 101-1000 and >1000 events are
  summarised separately.
- **MAS-native** (survey §9.1: at least three of E1-E4): a dimension is covered when at least one
  trace has a value for one of its data-bearing metrics: E1 ``task_success``; E2
  ``parallel_speedup`` or ``useful_agent_utilization``; E3 ``message_redundancy`` or
  ``debate_consensus``; E4 ``protocol_overhead`` or ``tainted_decisions`` or a corrupted event.
  Metrics that every trace has by definition (critical steps, error amplification's 0) do not count.
- **Robustness margin** (survey B4): mean E1 on clean traces minus mean E1 on perturbed traces of
  the same tasks (paired by ``task_id``; unpaired tasks are ignored).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..core.model import Trace
from .analyze import BANDS, task_success
from .cost import breakdown
from .view import TraceView

DIMENSIONS: dict[str, tuple[str, ...]] = {
    "E1": ("task_success",),
    "E2": ("parallel_speedup", "useful_agent_utilization"),
    "E3": ("message_redundancy", "debate_consensus"),
    "E4": ("protocol_overhead", "tainted_decisions", "corrupted_events"),
}
_TEXT = frozenset(("trace_id", "task_id", "system", "topology", "band"))
BAND_NAMES = tuple(name for _, name in BANDS) + (">1000",)


def summarize(values: Iterable[float | None]) -> dict[str, float | int | None]:
    arr = np.asarray([float(x) for x in values if x is not None], dtype=np.float64)
    if not len(arr):
        return {"n": 0, "mean": None, "p10": None, "p50": None, "p90": None, "min": None, "max": None}
    p10, p50, p90 = np.percentile(arr, [10, 50, 90]).tolist()
    return {
        "n": len(arr),
        "mean": float(arr.mean()),
        "p10": p10,
        "p50": p50,
        "p90": p90,
        "min": float(arr.min()),
        "max": float(arr.max()),
    }


def metric_keys(results: list[dict[str, Any]]) -> list[str]:
    keys: dict[str, None] = {}
    for r in results:
        for k, v in r.items():
            if k not in _TEXT and (v is None or isinstance(v, int | float)):
                keys.setdefault(k)
    return list(keys)


def summary(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {k: summarize(r.get(k) for r in results) for k in metric_keys(results)}


def coverage(results: list[dict[str, Any]]) -> dict[str, bool]:
    """Which of E1-E4 the corpus covers (see module docstring)."""
    cov = {}
    for dim, keys in DIMENSIONS.items():
        cov[dim] = any(
            r.get(k) is not None and not (k == "corrupted_events" and not r.get(k))
            for r in results
            for k in keys
        )
    return cov


def corpus_report(results: list[dict[str, Any]], by: str | None = None) -> dict[str, Any]:
    """Summary over all traces, per band, optionally per ``topology`` or ``system``; coverage."""
    cov = coverage(results)
    out: dict[str, Any] = {
        "traces": len(results),
        "summary": summary(results),
        "bands": {
            name: {"traces": len(rs), "summary": summary(rs)}
            for name in BAND_NAMES
            if (rs := [r for r in results if r.get("band") == name])
        },
        "coverage": cov,
        "mas_native": sum(cov.values()) >= 3,
    }
    if by in ("topology", "system"):
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in results:
            groups[str(r.get(by) or "-")].append(r)
        out["by"] = by
        out["groups"] = {k: {"traces": len(rs), "summary": summary(rs)} for k, rs in sorted(groups.items())}
    return out


def mas_native_line(report: dict[str, Any]) -> str:
    cov = report["coverage"]
    have = [d for d, ok in cov.items() if ok]
    missing = [d for d, ok in cov.items() if not ok]
    verdict = "MAS-native" if report["mas_native"] else "not MAS-native"
    tail = f"; missing {', '.join(missing)}" if missing else ""
    return f"{verdict}: covers {len(have)} of E1-E4 ({', '.join(have) or 'none'}){tail}"


def group_breakdown(views: Iterable[Trace | TraceView], by: str) -> dict[str, dict[str, Any]]:
    """Cost breakdown per agent or role summed over a corpus, with the number of traces per group."""
    acc: dict[str, dict[str, Any]] = {}
    for x in views:
        add_breakdown(acc, x, by)
    return dict(sorted(acc.items()))


def add_breakdown(acc: dict[str, dict[str, Any]], x: Trace | TraceView, by: str) -> None:
    """Add one trace's breakdown to ``acc`` (for streaming a corpus without keeping its traces)."""
    for name, row in breakdown(x, by).items():
        a = acc.setdefault(name, {"traces": 0})
        a["traces"] += 1
        for k, val in row.items():
            a[k] = a.get(k, 0) + val


def robustness_margin(
    clean: Iterable[Trace], perturbed: Iterable[Trace], verifier: Any = None
) -> float | None:
    """Mean E1(clean) - mean E1(perturbed) over tasks present in both sets (null if none)."""

    def by_task(traces: Iterable[Trace]) -> dict[str, list[float]]:
        d: dict[str, list[float]] = defaultdict(list)
        for tr in traces:
            s = task_success(tr, verifier)
            if s is not None:
                d[tr.task_id].append(s)
        return d

    c, p = by_task(clean), by_task(perturbed)
    tasks = sorted(set(c) & set(p))
    if not tasks:
        return None
    return float(np.mean([np.mean(c[t]) for t in tasks]) - np.mean([np.mean(p[t]) for t in tasks]))
