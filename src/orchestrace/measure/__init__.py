"""Metrics of orchestration traces: E1-E4 (survey §9.1), critical path, Critical Steps, safety.

Pure functions trace -> numbers. Build a ``TraceView`` once to share arrays between metrics;
every function also accepts a plain ``Trace``. Definitions the survey leaves open are ours and
documented in each module and in docs/measure.md.
"""

from .amplification import corrupted, error_amplification
from .analyze import REFERENCE_KEYS, REPORT_KEYS, analyze, band, task_success, write_metrics
from .collab import debate, message_redundancy, messages_per_delegation
from .corpus import (
    add_breakdown,
    corpus_report,
    coverage,
    group_breakdown,
    mas_native_line,
    robustness_margin,
    summarize,
)
from .cost import breakdown, coordination_mask, protocol_overhead, totals
from .parallelism import (
    concurrency,
    concurrency_profile,
    critical_path,
    critical_steps,
    kimi_critical_steps,
    kimi_total_steps,
    parallel_speedup,
    step_weights,
    useful_agent_utilization,
    useful_agents,
)
from .safety import safety_metrics, taint, taint_flows, untrusted_sources
from .view import TraceView, as_view

__all__ = [
    "REFERENCE_KEYS",
    "REPORT_KEYS",
    "TraceView",
    "add_breakdown",
    "analyze",
    "as_view",
    "band",
    "breakdown",
    "concurrency",
    "concurrency_profile",
    "coordination_mask",
    "corpus_report",
    "corrupted",
    "coverage",
    "critical_path",
    "critical_steps",
    "debate",
    "error_amplification",
    "group_breakdown",
    "kimi_critical_steps",
    "kimi_total_steps",
    "mas_native_line",
    "message_redundancy",
    "messages_per_delegation",
    "parallel_speedup",
    "protocol_overhead",
    "robustness_margin",
    "safety_metrics",
    "step_weights",
    "summarize",
    "taint",
    "taint_flows",
    "task_success",
    "totals",
    "untrusted_sources",
    "useful_agent_utilization",
    "useful_agents",
    "write_metrics",
]
