"""The full metric set of one trace (E1-E4 and safety), and writing it back into ``trace.metrics``.

``analyze(trace)`` returns a flat dict; keys the trace lacks the data for are None. Values we
cannot compute from the events (``protocol_overhead`` without per-event tokens,
``parallel_speedup`` without any time) fall back to the value recorded in the trace's own
``metrics`` under the reference key, if there is one.

**Task success (E1)**: a verifier callable ``verifier(trace) -> float | bool`` if given, else the
recorded ``metrics["task_success"]``, else ``rewards["task_success"]`` or ``rewards["success"]``;
otherwise null. We do not read success off the team reward, whose scale is the system's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.errors import OrchestraceError
from ..core.model import Trace
from ..core.plugins import hook_number
from .amplification import error_amplification
from .collab import Similarity, debate, message_redundancy, messages_per_delegation
from .cost import protocol_overhead, totals
from .parallelism import (
    concurrency,
    critical_path,
    critical_steps,
    parallel_speedup,
    useful_agents,
)
from .safety import safety_metrics
from .view import TraceView, as_view

Verifier = Callable[[Trace], "float | bool | None"]

#: Keys of the reference schema's ``metrics`` map that we compute.
#: our key -> the reference schema's key (``write_metrics`` stores these under the reference name).
#: The schema calls the speed-up T_serial / T_parallel ``parallelism_efficiency``; it is >= 1, so we
#: name it ``parallel_speedup`` and use the schema's name only where the schema needs it.
REFERENCE_KEYS = {
    "task_success": "task_success",
    "parallel_speedup": "parallelism_efficiency",
    "protocol_overhead": "protocol_overhead",
    "error_amplification": "error_amplification",
}
#: The keys every per-trace report carries (JSON output), in order.
REPORT_KEYS = (
    "trace_id",
    "task_success",
    "critical_steps",
    "critical_path_s",
    "serial_work_s",
    "parallel_speedup",
    "max_concurrency",
    "useful_agent_utilization",
    "protocol_overhead",
    "message_redundancy",
    "error_amplification",
    "tainted_decisions",
)
NAMESPACE = "orchestrace."
BANDS = ((10, "1-10"), (100, "11-100"), (1000, "101-1000"))


def band(n_events: int) -> str:
    """Trace-length band (survey B2: 10, 100, 1,000 events): upper bounds 10, 100, 1000, then >1000."""
    for hi, name in BANDS:
        if n_events <= hi:
            return name
    return ">1000"


def success_flag(trace: Trace, channel: str) -> float | None:
    """E1 from a reward channel that is a success flag (``analyze --success-channel``): None
    when the trace lacks it; an error for a value outside [0, 1], which no success rate can
    average (a team reward of -2.5 was reported as task_success -2.5)."""
    v = trace.rewards.get(channel)
    if v is None:
        return None
    if not 0.0 <= v <= 1.0:
        raise OrchestraceError(
            "OT010",
            f"rewards.{channel} of trace {trace.trace_id!r} is {v:g}, not a success flag (0 to 1): "
            "name a success channel or give a --verifier",
        )
    return float(v)


def task_success(trace: Trace, verifier: Verifier | None = None) -> float | None:
    if verifier is not None:
        r = verifier(trace)
        return None if r is None else hook_number(r, verifier, trace.trace_id, "OT010")
    if trace.metrics and trace.metrics.get("task_success") is not None:
        return float(trace.metrics["task_success"])
    for k in ("task_success", "success"):
        if trace.rewards.get(k) is not None:
            return float(trace.rewards[k])
    return None


def analyze(
    x: Trace | TraceView,
    *,
    verifier: Verifier | None = None,
    similar: Similarity | None = None,
    threshold: float = 0.9,
) -> dict[str, Any]:
    """Every metric of one trace as a flat dict (see docs/measure.md for each definition)."""
    v = as_view(x)
    tr = v.trace
    recorded = tr.metrics or {}
    cp = critical_path(v)
    cs = critical_steps(v)
    conc = concurrency(v)
    tot = totals(v)
    useful = useful_agents(v)
    amp = error_amplification(v)
    eff = parallel_speedup(cp["serial_work_s"], cp["length_s"])
    po = protocol_overhead(v)
    out: dict[str, Any] = {
        "trace_id": tr.trace_id,
        "task_id": tr.task_id,
        "system": tr.system,
        "topology": tr.topology,
        "events": v.n,
        "band": band(v.n),
        "task_success": task_success(tr, verifier),
        "critical_steps": cs["critical"],
        "total_steps": cs["total"],
        "step_parallelism": cs["total"] / cs["critical"] if cs["critical"] else None,
        "critical_path_s": cp["length_s"],
        "serial_work_s": cp["serial_work_s"],
        "parallel_speedup": eff if eff is not None else _num(recorded.get("parallelism_efficiency")),
        "wall_clock_s": tot["wall_clock_s"],
        "max_concurrency": conc["max"],
        "mean_concurrency": conc["mean"],
        "spawned_agents": len(useful),
        "useful_agent_utilization": sum(useful.values()) / len(useful) if useful else None,
        "tokens": tot["tokens"],
        "tokens_in": tot["tokens_in"],
        "tokens_out": tot["tokens_out"],
        "usd": tot["usd"],
        "tool_calls": tot["tool_calls"],
        "messages": tot["messages"],
        "protocol_overhead": po if po is not None else _num(recorded.get("protocol_overhead")),
        "tokens_per_delegation": tot["tokens_per_delegation"],
        "message_redundancy": message_redundancy(v, similar=similar, threshold=threshold),
        "messages_per_delegation": messages_per_delegation(v),
        **debate(v),
        "corrupted_events": int(amp["corrupted"]),
        "initial_corrupted": int(amp["initial"]),
        "error_amplification": amp["error_amplification"],
        **safety_metrics(v),
    }
    return out


def _num(x: Any) -> float | None:
    return None if x is None else float(x)


_NOT_METRICS = frozenset(("trace_id", "task_id", "system", "topology", "band"))


def write_metrics(trace: Trace, result: dict[str, Any]) -> Trace:
    """Store a result of ``analyze`` in ``trace.metrics``: reference keys plus ``orchestrace.*`` keys.

    Null values are skipped, so a value already recorded under a reference key is kept when we
    could not compute one. Returns the same trace (changed in place).
    """
    m = dict(trace.metrics or {})
    for k, val in result.items():
        if k in _NOT_METRICS or val is None:
            continue
        m[REFERENCE_KEYS.get(k, NAMESPACE + k)] = float(val)
    trace.metrics = m
    return trace
