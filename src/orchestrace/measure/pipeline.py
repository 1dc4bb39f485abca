"""What ``orchestrace analyze`` computes over many files: every trace's metrics, locally or as Ray
tasks, then the corpus report (and per-agent/role/type sums) over the files that did not fail.

A file that fails part-way counts for nothing, as validate's verdict is per file: its traces'
metrics are dropped at the end, so the caller can stream traces (and write them) one at a time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec

from ..core.model import Trace
from .analyze import analyze
from .corpus import corpus_report
from .cost import breakdown
from .view import TraceView

#: breakdowns summed per group (``--by``); topology and system group the corpus report instead
GROUP_BY = ("agent", "role", "type")


class MeasuredTrace(NamedTuple):
    """One trace's metrics; ``file`` is the index of its input file, ``groups`` its breakdown."""

    file: int
    trace: Trace
    metrics: dict[str, Any]
    groups: dict[str, dict[str, Any]] | None


@dataclass
class CorpusAnalysis:
    """The metrics of every trace of the files that did not fail, their corpus report, and the
    per-group sums when grouped by agent, role or type."""

    traces: list[dict[str, Any]]
    corpus: dict[str, Any]
    groups: dict[str, dict[str, Any]] | None


@dataclass
class Repeats:
    """Trace ids met more than once in one input, compared as ``ingest`` compares them (id and
    content, whatever the key order). ``duplicates`` counts later copies with the same content (a
    recording and its byte-identical replay): analysed once, as ingest stores them once.
    ``conflicts`` holds (trace id, file index of the first, file index of the later) for a later
    trace with the same id and different content: ingest refuses it (OT310), analyze measures it as
    a trace of its own and the caller warns."""

    duplicates: int = 0
    conflicts: list[tuple[str, int, int]] = field(default_factory=list)
    seen: dict[str, tuple[bytes, int]] = field(default_factory=dict)  # trace id -> (digest, file)


def distinct_traces(traces: Iterable[tuple[int, Trace]], repeats: Repeats) -> Iterator[tuple[int, Trace]]:
    """The (file index, trace) pairs without the later copies of a trace already met (``Repeats``)."""
    for i, tr in traces:
        digest = hashlib.blake2b(msgspec.json.encode(tr, order="sorted"), digest_size=16).digest()
        first = repeats.seen.get(tr.trace_id)
        if first is None:
            repeats.seen[tr.trace_id] = (digest, i)
        elif first[0] == digest:
            repeats.duplicates += 1
            continue
        else:
            repeats.conflicts.append((tr.trace_id, first[1], i))
        yield i, tr


def measure_traces(
    traces: Iterable[tuple[int, Trace]],
    failed: Container[int],
    *,
    verifier: Callable[[Trace], Any] | None = None,
    by: str | None = None,
    ray: str | None = None,
    repeats: Repeats | None = None,
) -> Iterator[MeasuredTrace]:
    """Metrics of (file index, trace) pairs in order, one trace in memory at a time locally;
    with ``ray`` (an address or "local") the traces are analysed as Ray tasks, in order, so the
    results equal the local ones. ``failed`` holds the files known to have failed. A trace met
    again with the same id and content is measured once; ``repeats`` collects what was met twice."""
    traces = distinct_traces(traces, repeats if repeats is not None else Repeats())
    if ray is None:
        pairs: Iterator[tuple[int, Trace, dict[str, Any]]] = (
            (i, tr, analyze(TraceView(tr), verifier=verifier)) for i, tr in traces
        )
    else:
        from ..parallel import parallel_imap

        batch = [(i, tr) for i, tr in traces]
        batch = [(i, tr) for i, tr in batch if i not in failed]
        done = parallel_imap(_analyze_one, [tr for _, tr in batch], ray=ray, args=(verifier,), batch=16)
        pairs = ((i, tr, r) for (i, tr), r in zip(batch, done, strict=True))
    for i, tr, r in pairs:
        yield MeasuredTrace(i, tr, r, breakdown(TraceView(tr), by) if by in GROUP_BY else None)  # type: ignore[arg-type]


def corpus_analysis(
    measured: Iterable[tuple[int, dict[str, Any], dict[str, dict[str, Any]] | None]],
    failed: Container[int],
    by: str | None = None,
) -> CorpusAnalysis | None:
    """(file, metrics, groups) of each measured trace -> the analysis over the files that did not
    fail; None when no trace is left."""
    results: list[dict[str, Any]] = []
    acc: dict[str, dict[str, Any]] = {}
    for i, r, groups in measured:
        if i in failed:
            continue
        results.append(r)
        for name, row in (groups or {}).items():
            a = acc.setdefault(name, {"traces": 0})
            a["traces"] += 1
            for k, val in row.items():
                a[k] = a.get(k, 0) + val
    if not results:
        return None
    report = corpus_report(results, by if by in ("topology", "system") else None)
    groups_out: dict[str, dict[str, Any]] | None = None
    if by in GROUP_BY:
        groups_out = dict(sorted(acc.items()))
        report["by"] = by
        report["groups"] = groups_out
    return CorpusAnalysis(results, report, groups_out)


def _analyze_one(trace: Trace, verifier: Callable[[Trace], float] | None) -> dict[str, Any]:
    return analyze(TraceView(trace), verifier=verifier)
