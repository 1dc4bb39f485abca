"""The live half of the OpenAI Agents SDK importer: a tracing processor that writes traces as runs
finish. Kept apart from ``openai_agents`` because importing the SDK takes seconds."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

import orjson

from ..core.io import dumps
from ..core.model import Trace
from .openai_agents import convert

try:  # the processor needs the SDK; importing and converting files does not
    from agents.tracing import TracingProcessor as _Base
except ImportError:  # pragma: no cover - exercised only without openai-agents
    _Base = object  # type: ignore[assignment,misc]


class OrchestraceProcessor(_Base):  # type: ignore[misc,valid-type]
    """An Agents SDK tracing processor that turns each finished run into an orchestrace trace.

    ``out``: append each trace as a JSONL line; ``raw_out``: append the SDK's exported items
    (importable later with ``orchestrace import --from openai-agents``). ``traces`` keeps them.
    """

    def __init__(
        self, out: str | None = None, *, raw_out: str | None = None, keep_content: bool = False
    ) -> None:
        self.out = out
        self.raw_out = raw_out
        self.keep_content = keep_content
        self.traces: list[Trace] = []
        self._items: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._lock = threading.Lock()

    def on_trace_start(self, trace: Any) -> None:
        item = trace.export()
        if item:
            with self._lock:
                self._items[trace.trace_id].insert(0, item)

    def on_span_start(self, span: Any) -> None:
        return None

    def on_span_end(self, span: Any) -> None:
        item = span.export()
        if item:
            with self._lock:
                self._items[span.trace_id].append(item)

    def on_trace_end(self, trace: Any) -> None:
        with self._lock:
            items = self._items.pop(trace.trace_id, [])
        if not items:
            return
        if self.raw_out:
            with open(self.raw_out, "ab") as f:
                f.write(b"".join(orjson.dumps(x, default=str) + b"\n" for x in items))
        for tr in convert(items, keep_content=self.keep_content):
            self.traces.append(tr)
            if self.out:
                with open(self.out, "ab") as f:
                    f.write(dumps(tr) + b"\n")

    def shutdown(self) -> None:
        return None

    def force_flush(self) -> None:
        return None
