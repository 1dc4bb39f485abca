"""The core: trace model, formats, validation and the graph. Depends on nothing else of ours."""

from .build import TraceBuilder
from .errors import Finding, InvalidTrace, LoadError, OrchestraceError
from .io import EventLogWriter, dumps, iter_traces, load, load_one, loads, save
from .model import (
    EDGE_TYPES,
    EVENT_TYPES,
    SCHEMA_VERSION,
    TOPOLOGIES,
    Edge,
    Event,
    Trace,
    event_from_dict,
    event_to_dict,
    trace_from_dict,
    trace_to_dict,
)

__all__ = [
    "EDGE_TYPES",
    "EVENT_TYPES",
    "SCHEMA_VERSION",
    "TOPOLOGIES",
    "Edge",
    "Event",
    "EventLogWriter",
    "Finding",
    "InvalidTrace",
    "LoadError",
    "OrchestraceError",
    "Trace",
    "TraceBuilder",
    "dumps",
    "event_from_dict",
    "event_to_dict",
    "iter_traces",
    "load",
    "load_one",
    "loads",
    "save",
    "trace_from_dict",
    "trace_to_dict",
]
