"""Export to the published minimal schema (strictly valid) and to our own JSONL."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

import msgspec

from ..core.errors import OrchestraceError
from ..core.io import save
from ..core.model import REQUIRED_COSTS, Trace, derived_costs


def _stderr(msg: str) -> None:
    print(f"warning: {msg}", file=sys.stderr)


def to_survey(trace: Trace, warn: Callable[[str], None] = _stderr) -> Trace:
    """A copy that validates under the reference schema.

    Event extensions stay (the reference allows extra event fields). The top level is closed
    there, so ``schema_version`` is dropped and ``metadata`` is dropped with a warning; missing
    required costs are derived from the events.
    """
    costs = dict(trace.costs)
    if any(k not in costs for k in REQUIRED_COSTS):
        d = derived_costs(trace.events)
        for k in REQUIRED_COSTS:
            costs.setdefault(k, d[k])
    if trace.metadata:
        warn(
            f"{trace.trace_id}: top-level metadata ({', '.join(sorted(trace.metadata))}) dropped: the reference schema is closed at the top level"
        )
    return msgspec.structs.replace(trace, costs=costs, schema_version=None, metadata=None)


def export_survey(
    traces: Iterable[Trace], out: str, warn: Callable[[str], None] = _stderr, **options: object
) -> int:
    _no_options("survey", options)
    return save([to_survey(t, warn) for t in traces], out)


def export_jsonl(traces: Iterable[Trace], out: str, **options: object) -> int:
    _no_options("jsonl", options)
    return save(list(traces), out)


def _no_options(target: str, options: dict[str, object]) -> None:
    """An --opt these exports do not read is a mistake to say, not to ignore."""
    if options:
        raise OrchestraceError(
            "OT020", f"the {target} export takes no options, got {', '.join(map(repr, options))}"
        )
