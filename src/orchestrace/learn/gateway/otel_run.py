"""OpenTelemetry spans of a program run in the trainer's process (``train team --program``) go to
that program's gateway run directly, as each span ends: no exporter, no endpoint, nothing to
flush before the run ends, and concurrent runs kept apart by the context each program was started
in (:data:`service.CURRENT_RUN`), where one global exporter could not tell them apart.

The trainer adds :class:`RunSpanProcessor` to the global SDK tracer provider when the program's
module has imported the SDK; a program with a provider of its own adds it there itself.
"""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from .service import CURRENT_RUN


def span_dict(span: ReadableSpan) -> dict[str, Any]:
    """A finished SDK span as the OTLP importer reads one (hex ids, seconds, plain attributes)."""
    ctx, parent = span.context, span.parent
    return {
        "trace": format(ctx.trace_id, "032x") if ctx is not None else "",
        "id": format(ctx.span_id, "016x") if ctx is not None else "",
        "parent": format(parent.span_id, "016x") if parent is not None else "",
        "name": span.name,
        "start": span.start_time / 1e9 if span.start_time else None,
        "end": span.end_time / 1e9 if span.end_time else None,
        "attrs": {k: list(v) if isinstance(v, tuple) else v for k, v in (span.attributes or {}).items()},
        "status": span.status.status_code.value if span.status is not None else None,
        "links": [],
        "resource": dict(span.resource.attributes) if span.resource is not None else {},
    }


class RunSpanProcessor(SpanProcessor):
    """Each span that ends inside a program run goes to that run (others are not ours)."""

    def on_end(self, span: ReadableSpan) -> None:
        target = CURRENT_RUN.get()
        if target is None:
            return
        gateway, run_id = target
        gateway.otel_spans(run_id, [span_dict(span)])


_installed = threading.Lock()
_processor: RunSpanProcessor | None = None


def install_run_span_processor() -> bool:
    """Add :class:`RunSpanProcessor` to the global tracer provider once per process; False when
    that provider is not the SDK's (no provider set yet: the API's no-op one)."""
    global _processor
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        return False
    with _installed:
        if _processor is None:
            _processor = RunSpanProcessor()
            provider.add_span_processor(_processor)
    return True
