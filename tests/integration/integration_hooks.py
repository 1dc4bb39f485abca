"""Reward hooks the integration tests name in TOML specs (``integration_hooks:clean_finish``)."""

from __future__ import annotations

from orchestrace.core.model import Trace


def clean_finish(trace: Trace) -> float:
    """A stand-in outcome verifier for logs that record none: 1 when no tool call of the run
    failed, else the fraction of tool results that succeeded."""
    results = [e for e in trace.events if e.type == "tool_result"]
    if not results:
        return 1.0
    return sum(e.status != "error" for e in results) / len(results)
