"""The OpenAI Agents SDK's own structure (tool calls, handoffs, agents run as tools) merged into the
gateway run's trace, span by span as the SDK opens and closes them.

Two ways in: :class:`RunSpans`, an SDK tracing processor for programs that run in the trainer's
process (``train team --program``), finds the run from the context the program was started in;
:class:`PostSpans`, for a team running in a process of its own against ``orchestrace serve``,
posts each span to ``<base_url>/../agents-sdk/spans`` (add it with
``agents.add_trace_processor(PostSpans(base_url))``).
"""

from __future__ import annotations

import threading
from typing import Any

import httpx

try:  # the processor needs the SDK (seconds to import: this module is imported only with it)
    from agents.tracing import TracingProcessor as _Base
except ImportError:  # pragma: no cover - exercised only without openai-agents
    _Base = object  # type: ignore[assignment,misc]

from .service import CURRENT_RUN


class _Spans(_Base):  # type: ignore[misc,valid-type]
    def send(self, phase: str, item: dict[str, Any]) -> None:
        raise NotImplementedError

    def on_trace_start(self, trace: Any) -> None:
        return None

    def on_trace_end(self, trace: Any) -> None:
        return None

    def on_span_start(self, span: Any) -> None:
        item = span.export()
        if item:
            self.send("start", item)

    def on_span_end(self, span: Any) -> None:
        item = span.export()
        if item:
            self.send("end", item)

    def shutdown(self) -> None:
        return None

    def force_flush(self) -> None:
        return None


class RunSpans(_Spans):
    """Spans of a program started with :data:`CURRENT_RUN` set go to that gateway run."""

    def send(self, phase: str, item: dict[str, Any]) -> None:
        target = CURRENT_RUN.get()
        if target is not None:
            gateway, run_id = target
            gateway.framework_span(run_id, phase, item)


class PostSpans(_Spans):
    """Spans posted to the gateway run of ``base_url`` (``http://HOST:PORT/runs/RUN/v1``)."""

    def __init__(self, base_url: str, timeout: float = 10.0) -> None:
        self.url = base_url.rstrip("/").removesuffix("/v1") + "/agents-sdk/spans"
        self.timeout = timeout

    def send(self, phase: str, item: dict[str, Any]) -> None:
        httpx.post(self.url, json={"phase": phase, "span": item}, timeout=self.timeout)


_installed = threading.Lock()
_processor: RunSpans | None = None


def install_run_spans() -> bool:
    """Add :class:`RunSpans` to the SDK's processors once per process; False without the SDK."""
    global _processor
    try:
        import agents
    except ImportError:
        return False
    with _installed:
        if _processor is None:
            _processor = RunSpans()
            agents.add_trace_processor(_processor)
    return True
