"""The gateway without HTTP: runs, agents, adapters, and calls answered and recorded on one event
loop (a thread of its own), so that calls of concurrent runs meet in the backend's batches and a
run's trace is only ever written from that loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
from collections.abc import Awaitable
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..team.program import ADAPTER_MODES, adapter_of
from .completers import Completer
from .otel import completion_ids, merge_spans
from .protocol import CallSpec, Completion, GatewayError
from .replay import ReplayPlan
from .runs import GatewayRun, check_run_id

T = TypeVar("T")
#: (gateway, run id) of the program run executing in this context (``spans.RunSpans`` reads it)
CURRENT_RUN: contextvars.ContextVar[tuple[Any, str] | None] = contextvars.ContextVar(
    "orchestrace_gateway_run", default=None
)
AGENT_NAME_MAX = 128
MAX_SPANS_PER_RUN = 100_000
MAX_SPAN_BYTES_PER_RUN = 256 * 1024 * 1024  # the attributes' text a run keeps (prompts can be long)


@dataclass(frozen=True)
class Team:
    """Who may call and which adapter answers: ``roles`` maps each known agent to its role (an
    empty map accepts any agent, its role its name); ``mode``: one adapter per ``agent``, per
    ``role``, or ``shared`` by everyone."""

    mode: str = "agent"
    roles: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode not in ADAPTER_MODES:
            raise ValueError(f"unknown adapter mode {self.mode!r}; known: {', '.join(ADAPTER_MODES)}")

    def role(self, agent: str) -> str:
        if self.roles and agent not in self.roles:
            raise GatewayError(
                400,
                f"unknown agent {agent!r}: this gateway serves {', '.join(self.roles)} "
                "(name the agent in 'model' or the X-Orchestrace-Agent header)",
                param="model",
                code="model_not_found",
            )
        return self.roles.get(agent, agent)

    def adapter(self, agent: str) -> str:
        return adapter_of(self.mode, agent, self.role(agent))

    def adapters(self) -> list[str]:
        return list(dict.fromkeys(self.adapter(a) for a in self.roles))


def parse_agents(spec: str) -> dict[str, str]:
    """``planner,writer=drafting`` -> {planner: planner, writer: drafting} (agent=role)."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        name, _, role = part.partition("=")
        name, role = name.strip(), (role.strip() or name.strip())
        if not name or len(name) > AGENT_NAME_MAX or not name.isprintable():
            raise ValueError(f"bad agent name {name!r}")
        if name in out:  # a=x,a=y kept the last role without a word
            raise ValueError(f"agent {name!r} named twice")
        out[name] = role
    return out


@dataclass(frozen=True)
class CallDefaults:
    """What a call that does not say gets: sampling temperature, new tokens; the most it may ask."""

    temperature: float = 0.7
    max_tokens: int = 64
    max_tokens_cap: int = 512


class Gateway:
    """Runs and calls. ``auto_runs``: a call naming an unknown run opens it (``serve``); off, only
    runs opened with :meth:`open_run` take calls (training)."""

    def __init__(
        self,
        completer: Completer,
        team: Team,
        runs_dir: str | Path,
        *,
        defaults: CallDefaults | None = None,
        auto_runs: bool = True,
        keep_content: bool = True,
        call_timeout: float = 600.0,
    ) -> None:
        self.completer = completer
        self.team = team
        self.runs_dir = Path(runs_dir)
        self.defaults = defaults or CallDefaults()
        self.auto_runs = auto_runs
        self.keep_content = keep_content
        self.call_timeout = call_timeout
        self.runs: dict[str, GatewayRun] = {}
        self.finished: dict[str, str] = {}  # run id -> trace path
        self.waiting: dict[str, list[dict[str, Any]]] = {}  # OTel trace id -> its spans naming no run yet
        self.trace_run: dict[str, str] = {}  # OTel trace id -> the open run its spans went to
        self.waiting_bytes = 0  # about what waiting holds (as a run's spans, at most MAX_SPAN_BYTES_PER_RUN)
        served = completer.adapters
        if served is not None:
            missing = [a for a in team.adapters() if a not in served]
            if missing:
                raise ValueError(f"the model has no adapter {', '.join(missing)}")
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="gateway-loop", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ running on the loop

    def submit(self, coro: Awaitable[T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]

    def on_loop(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        return self.submit(coro).result(timeout)

    def close(self) -> None:
        """Finish every open run and stop the loop."""
        if self.loop.is_closed():
            return
        self.on_loop(self._finish_all())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()

    async def _finish_all(self) -> None:
        for rid in list(self.runs):
            self._finish(rid, None, None)
        if self.waiting:  # said once, without content: what was sent and never found its run
            n = sum(map(len, self.waiting.values()))
            sys.stderr.write(
                f"gateway: {n} OpenTelemetry span(s) of {len(self.waiting)} trace(s) named no run "
                "(no run in the path, no X-Orchestrace-Run header, no completion id of this gateway): "
                "not recorded\n"
            )
            self.waiting.clear()
            self.waiting_bytes = 0

    # ------------------------------------------------------------------ runs

    def path_of(self, run_id: str) -> str:
        return str(self.runs_dir / f"{run_id}.events.jsonl")

    def open_run(
        self,
        run_id: str,
        *,
        path: str | None = None,
        seed: int = 0,
        task_id: str = "gateway",
        trace_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        own_seeds: bool = False,
        plan: ReplayPlan | None = None,
    ) -> str:
        """Open a run whose calls are recorded to ``path`` (default ``<runs_dir>/<run_id>.events.jsonl``)
        as the trace ``trace_id`` (default: the run id); ``own_seeds``: the run's seed decides every
        call's (a request's seed is mixed in, not used as is); ``plan``: the run is a fork of a
        recorded one, answered from the recording up to the fork point (``replay.py``)."""

        async def go() -> str:
            run = self._open(run_id, path, seed, task_id, metadata or {}, trace_id)
            run.own_seeds, run.plan = own_seeds, plan
            return run.path

        return self.on_loop(go())

    def _open(
        self,
        run_id: str,
        path: str | None,
        seed: int,
        task_id: str,
        metadata: dict[str, Any],
        trace_id: str | None = None,
    ) -> GatewayRun:
        check_run_id(run_id)
        if run_id in self.runs or run_id in self.finished:
            raise GatewayError(409, f"run {run_id!r} exists already", code="run_exists")
        run = GatewayRun(
            run_id,
            path or self.path_of(run_id),
            seed=seed,
            task_id=task_id,
            trace_id=trace_id or run_id,
            metadata=metadata,
            keep_content=self.keep_content,
        )
        self.runs[run_id] = run
        return run

    def finish_run(self, run_id: str, answer: str | None = None, *, error: str | None = None) -> str:
        """Close a run (its trace is complete on disk); returns the trace's path."""

        async def go() -> str:
            return self._finish(run_id, answer, error)

        return self.on_loop(go())

    def _finish(self, run_id: str, answer: str | None, error: str | None) -> str:
        run = self.runs.pop(run_id, None)
        if run is None:
            if run_id in self.finished:
                return self.finished[run_id]
            raise GatewayError(404, f"no open run {run_id!r}", code="run_not_found")
        if run.otel_spans:
            gw = run.rec.metadata.setdefault("gateway", {})
            try:
                merged = merge_spans(run, list(run.otel_spans.values()), lambda a: self.team.roles.get(a, a))
                gw["otel"] = asdict(merged)
            except Exception as e:  # a bug in the merge must not lose the run's own trace
                gw["otel"] = {"spans": len(run.otel_spans), "error": type(e).__name__}
        path = run.finish(answer, error=error)
        self.finished[run_id] = path
        for tid in [t for t, r in self.trace_run.items() if r == run_id]:
            del self.trace_run[tid]
        return path

    def calls_of(self, run_id: str) -> int:
        run = self.runs.get(run_id)
        return run.calls if run is not None else 0

    def agent_names(self) -> list[str]:
        return list(self.team.roles) or list(self.completer.adapters or [])

    def framework_span(self, run_id: str, phase: str, span: dict[str, Any]) -> None:
        """An Agents SDK span of a run (from any thread): its structure joins the run's trace."""
        if phase not in ("start", "end") or not isinstance(span, dict):
            raise GatewayError(400, 'a span is {"phase": "start" | "end", "span": {...}}', param="phase")

        async def go() -> None:
            run = self.runs.get(run_id)
            if run is None:  # a team's first span comes before its first call
                if run_id in self.finished or not self.auto_runs:
                    raise GatewayError(400, f"no open run {run_id!r}", code="run_not_found")
                run = self._open(run_id, None, 0, "gateway", {})
            run.agents_sdk_span(phase, span, lambda a: self.team.roles.get(a, a))

        self.on_loop(go())

    def otel_spans(self, run_id: str, spans: list[dict[str, Any]]) -> tuple[int, str]:
        """OpenTelemetry spans of a run (from any thread), kept to merge when the run ends.
        Returns (spans refused, why): all of them for a run that has ended (its trace is closed)
        or is not open under training; those past ``MAX_SPANS_PER_RUN`` spans or
        ``MAX_SPAN_BYTES_PER_RUN`` bytes of attributes."""

        async def go() -> tuple[int, str]:
            return self._keep_spans(run_id, spans)

        check_run_id(run_id)
        return self.on_loop(go())

    def _keep_spans(self, run_id: str, spans: list[dict[str, Any]]) -> tuple[int, str]:
        run = self.runs.get(run_id)
        if run is None:
            if run_id in self.finished:
                return len(spans), (
                    f"run {run_id!r} has ended and its trace is closed: flush the span exporter "
                    "before the run ends (TracerProvider.force_flush())"
                )
            if not self.auto_runs:
                return len(spans), f"no open run {run_id!r}"
            run = self._open(run_id, None, 0, "gateway", {})
        refused = 0
        for s in spans:
            key, size = (s["trace"], s["id"]), _span_bytes(s)
            room = len(run.otel_spans) < MAX_SPANS_PER_RUN
            if key in run.otel_spans or (room and run.otel_bytes + size <= MAX_SPAN_BYTES_PER_RUN):
                run.otel_bytes += size if key not in run.otel_spans else 0
                run.otel_spans[key] = s
            else:
                refused += 1
        limits = f"{MAX_SPANS_PER_RUN} spans and {MAX_SPAN_BYTES_PER_RUN >> 20} MiB of attributes"
        return refused, (f"a run keeps at most {limits}" if refused else "")

    def otel_spans_of_any_run(self, spans: list[dict[str, Any]]) -> tuple[int, str]:
        """Spans sent with no run named: each OTel trace goes to the open run that answered one of
        its LLM spans (by completion id); a trace none of whose spans says so yet waits for one
        that does (at most ``MAX_SPANS_PER_RUN`` spans wait)."""

        async def go() -> tuple[int, str]:
            groups: dict[str, list[dict[str, Any]]] = {}
            for s in spans:
                groups.setdefault(s["trace"], []).append(s)
            refused, why = 0, ""
            for tid, group in groups.items():
                rid = self.trace_run.get(tid) or self._run_answering(group)
                if rid is None:
                    size = sum(map(_span_bytes, group))
                    count = sum(map(len, self.waiting.values())) + len(group)
                    if count > MAX_SPANS_PER_RUN or self.waiting_bytes + size > MAX_SPAN_BYTES_PER_RUN:
                        refused, why = refused + len(group), "too many spans wait for a run"
                    else:
                        self.waiting.setdefault(tid, []).extend(group)
                        self.waiting_bytes += size
                    continue
                self.trace_run[tid] = rid
                held = self.waiting.pop(tid, [])
                self.waiting_bytes -= sum(map(_span_bytes, held))
                r, w = self._keep_spans(rid, held + group)
                refused, why = refused + r, w or why
            return refused, why

        return self.on_loop(go())

    def _run_answering(self, spans: list[dict[str, Any]]) -> str | None:
        ids = {c for s in spans for c in completion_ids(s)}
        return (
            next((rid for rid, run in self.runs.items() if ids & run.completion_ids), None) if ids else None
        )

    # ------------------------------------------------------------------ calls

    def call(self, run_id: str, agent: str, call: CallSpec, completion_id: str | None = None) -> Completion:
        """Answer and record one call (from any thread); ``completion_id``: the id it is answered with."""
        return self.on_loop(self.acall(run_id, agent, call, completion_id), timeout=self.call_timeout + 5)

    async def acall(
        self, run_id: str, agent: str, call: CallSpec, completion_id: str | None = None
    ) -> Completion:
        if not agent or len(agent) > AGENT_NAME_MAX or not agent.isprintable():
            raise GatewayError(400, "the agent name must be 1-128 printable characters", param="model")
        role = self.team.role(agent)
        adapter = self.team.adapter(agent)
        served = self.completer.adapters
        if served is not None and adapter not in served:
            raise GatewayError(
                400, f"no adapter {adapter!r} for agent {agent!r}", param="model", code="model_not_found"
            )
        run = self.runs.get(run_id)
        if run is None:
            if run_id in self.finished:
                raise GatewayError(400, f"run {run_id!r} has ended", code="run_closed")
            if not self.auto_runs:
                raise GatewayError(400, f"no open run {run_id!r}", code="run_not_found")
            run = self._open(run_id, None, 0, "gateway", {})
        d = self.defaults
        req, turn = run.request(agent, adapter, call, d.temperature, d.max_tokens)
        recorded = None
        if run.plan is not None:
            req, recorded = run.fork_call(agent, turn, req)
        mid, flows, start = run.begin(agent, role, call)
        out: Completion | BaseException
        if recorded is not None:
            out = recorded
        else:
            try:
                out = await asyncio.wait_for(self.completer.complete(req, call), self.call_timeout)
            except TimeoutError:
                out = GatewayError(504, f"no completion within {self.call_timeout:g} s", type="server_error")
            except Exception as e:  # recorded as the call's error event, then answered as an error
                out = e
        if not run.closed:
            run.end(
                agent,
                req,
                turn,
                mid,
                flows,
                start,
                out,
                replayed=recorded is not None,
                completion_id=completion_id,
            )
        if isinstance(out, GatewayError):
            raise out
        if isinstance(out, BaseException):
            raise GatewayError(
                502, f"the backend failed: {_describe(out)}", type="server_error", code="backend_error"
            )
        return out


def _span_bytes(span: dict[str, Any]) -> int:
    """About what a kept span holds: its attributes' keys and text, and a fixed part."""
    return 256 + sum(len(k) + (len(v) if isinstance(v, str) else 16) for k, v in span["attrs"].items())


def _describe(e: BaseException) -> str:
    """An error's kind, without its message (a message may quote the prompt)."""
    kind = getattr(e, "kind", None)
    return f"{type(e).__name__} ({kind})" if kind else type(e).__name__
