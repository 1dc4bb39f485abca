"""The asyncio orchestration runtime: a policy answers the five decisions, workers do the work.

Each round: stop? -> spawn -> delegate (workers run in parallel) -> communicate -> aggregate.
The policy is consulted about stopping again after every worker that finishes, so it can stop
early; running workers are then cancelled and despawned. Budgets (tokens, USD, wall-clock) end
a run the same way. Every LLM call goes through ``Calls`` (cache, replay gate), gets a per-call
timeout and retries with exponential backoff on retryable failures; each failed attempt is a
``return`` event with status ``error``. Whatever happens, the trace is closed validly: a stop
decision, a despawn for every live agent, costs and the outcome in the metadata.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .backends.base import BackendError, ChatRequest, ChatResponse, logprob_attrs, summarise_logprobs
from .cache import Calls
from .recorder import Recorder


@dataclass
class AgentSpec:
    name: str
    role: str
    system: str = ""
    temperature: float = 0.7
    max_tokens: int = 48
    model: str = ""
    fewshot: list[dict[str, str]] = field(default_factory=list)  # example turns before the first task


@dataclass
class Task:
    """Work for one agent: a prompt, and tool calls to make first (their results join the prompt)."""

    agent: str
    prompt: str
    tools: list[tuple[str, Any]] = field(default_factory=list)


@dataclass
class Result:
    agent: str
    role: str
    round: int
    text: str | None  # None when the agent failed, was cancelled, or its output was dropped
    event: str  # id of its final return event
    status: str = "ok"  # ok | error | dropped
    error: str | None = None
    logprob_mean: float | None = None  # mean token log-probability of the answer, when the backend gave them


@dataclass
class Message:
    frm: str
    to: str
    content: str
    event: str | None = None  # id of its message event once sent


@dataclass
class Budget:
    tokens: int | None = None
    usd: float | None = None
    wall_clock_s: float | None = None


@dataclass
class RunState:
    task: str
    round: int = 0
    agents: dict[str, AgentSpec] = field(default_factory=dict)
    results: list[Result] = field(default_factory=list)
    inbox: dict[str, list[Message]] = field(default_factory=dict)
    final: str | None = None
    tokens: int = 0
    usd: float = 0.0
    failed: int = 0
    cancelled: list[str] = field(default_factory=list)

    def latest(self, role: str | None = None) -> list[Result]:
        """Results of the last round that produced any (optionally of one role)."""
        rs = [r for r in self.results if role is None or r.role == role]
        if not rs:
            return []
        last = rs[-1].round
        return [r for r in rs if r.round == last]


class Policy(Protocol):
    """The five orchestration decisions. Methods are plain functions of the run state."""

    name: str
    on_error: str  # "continue": a failed worker is just a missing result; "fail": the run stops

    def spawn(self, s: RunState) -> list[AgentSpec]: ...
    def delegate(self, s: RunState) -> list[Task]: ...
    def communicate(self, s: RunState, results: list[Result]) -> list[Message]: ...
    def aggregate(self, s: RunState, results: list[Result]) -> str | None: ...
    def stop(self, s: RunState) -> str | None: ...


class BasePolicy:
    """Defaults: spawn nothing, delegate nothing, no messages, no aggregate; stop on failure
    when ``on_error == "fail"``."""

    name = "base"

    def __init__(self, on_error: str = "continue") -> None:
        self.on_error = on_error

    def spawn(self, s: RunState) -> list[AgentSpec]:
        return []

    def delegate(self, s: RunState) -> list[Task]:
        return []

    def communicate(self, s: RunState, results: list[Result]) -> list[Message]:
        return []

    def aggregate(self, s: RunState, results: list[Result]) -> str | None:
        return None

    def stop(self, s: RunState) -> str | None:
        if self.on_error == "fail" and s.failed:
            return "error"
        return None


def derive_seed(seed: int, *parts: Any) -> int:
    """A call's seed from the run seed and where the call happens (stable across processes)."""
    h = hashlib.sha256("|".join(map(str, (seed, *parts))).encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


@dataclass
class RetryPolicy:
    retries: int = 2
    base_delay: float = 0.05
    max_delay: float = 2.0

    def delay(self, attempt: int, err: BackendError, rng: random.Random) -> float:
        """Exponential backoff with jitter; a server's Retry-After wins when it is longer."""
        d = min(self.max_delay, self.base_delay * 2**attempt) * (0.5 + rng.random() / 2)
        if err.retry_after is not None:
            d = max(d, min(self.max_delay, err.retry_after))
        return d


class Orchestrator:
    def __init__(
        self,
        rec: Recorder,
        calls: Calls,
        policy: Policy,
        *,
        task: str,
        seed: int = 0,
        tools: dict[str, Callable[[Any], Any | Awaitable[Any]]] | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        budget: Budget | None = None,
        max_rounds: int = 50,
        policies: dict[str, Callable[[], Policy]] | None = None,
    ) -> None:
        self.rec, self.calls, self.policy = rec, calls, policy
        self.state = RunState(task=task)
        self.seed = seed
        self.tools = tools or {}
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.budget = budget or Budget()
        self.max_rounds = max_rounds
        self.policies = policies or {}
        self._rng = random.Random(seed)
        self._history: dict[str, list[dict[str, str]]] = {}
        self._turns: dict[str, int] = {}
        self._last_event: dict[str, str] = {}
        self._t0 = 0.0
        self._stop: str | None = None
        self._stopped = False

    # ------------------------------------------------------------------ decisions

    def _decide(self, decision: str, value: Any) -> tuple[str, Any]:
        """Record a decision; a fork may replace it here (stop, delegate subset, policy swap)."""
        iv = self.calls.take_intervention(("stop", "delegate", "policy")) if self.calls.intervention else None
        if iv is not None:
            if iv.kind == "stop":
                self._stop = "intervention"
                self._stopped = True
                return self.rec.stop("intervention", attrs={"round": self.state.round}), None
            if iv.kind == "delegate" and decision == "delegate":
                keep = set((iv.arg or "").split(","))
                value = [t for t in value if t.agent in keep]
            elif iv.kind == "policy":
                self._swap_policy(iv.arg or "")
        shown = [_show(v) for v in value] if isinstance(value, list) else value
        return self.rec.decision(decision, shown, attrs={"round": self.state.round}), value

    def _swap_policy(self, name: str) -> None:
        from ..core.errors import OrchestraceError

        make = self.policies.get(name)
        if make is None:
            raise OrchestraceError(
                "OT602", f"unknown policy {name!r}: this program knows {', '.join(self.policies) or 'none'}"
            )
        self.policy = make()

    def _budget(self) -> str | None:
        b, s = self.budget, self.state
        if b.tokens is not None and s.tokens >= b.tokens:
            return "budget:tokens"
        if b.usd is not None and s.usd >= b.usd:
            return "budget:usd"
        if b.wall_clock_s is not None and self.rec.now() - self._t0 >= b.wall_clock_s:
            return "budget:wall_clock"
        return None

    def _should_stop(self) -> str | None:
        return self._stop or self._budget() or self.policy.stop(self.state)

    # ------------------------------------------------------------------ run

    async def run(self) -> RunState:
        rec, s = self.rec, self.state
        self._t0 = rec.now()
        reason = "max_rounds"
        try:
            for _ in range(self.max_rounds):
                if r := self._should_stop():
                    reason = r
                    break
                progressed = self._spawn()
                if self._stop:
                    reason = self._stop
                    break
                tasks = self.policy.delegate(s)
                if tasks:
                    _, tasks = self._decide("delegate", tasks)
                    if self._stop:
                        reason = self._stop
                        break
                    results = await self._run_batch(tasks)
                    progressed = True
                    if self._stop:  # stopped mid-batch: what finished still counts
                        self._aggregate(results)
                        reason = self._stop
                        break
                    self._communicate(results)
                    self._aggregate(results)
                if not progressed:
                    reason = "idle"
                    break
                s.round += 1
        except BaseException:
            reason = "error"
            raise
        finally:
            self._finish(reason)
        return s

    def _spawn(self) -> bool:
        specs = self.policy.spawn(self.state)
        if not specs:
            return False
        _, specs = self._decide("spawn", specs)
        if self._stop:
            return True
        cur = self.rec.cursor
        for spec in specs:
            self.rec.set_cursor(cur)
            self._last_event[spec.name] = self.rec.spawn(
                spec.name, role=spec.role, parent=self.rec.root_agent
            )
            self.state.agents[spec.name] = spec
            self.state.inbox.setdefault(spec.name, [])
        self.rec.set_cursor(cur)
        return True

    async def _run_batch(self, tasks: list[Task]) -> list[Result]:
        """Run tasks in parallel; after each finishes ask about stopping, cancel the rest if so."""
        rec, s = self.rec, self.state
        cur = rec.cursor
        running: dict[asyncio.Task[Result], str] = {}
        self.calls.new_batch()
        for t in tasks:
            if t.agent not in s.agents:
                continue
            rec.set_cursor(cur)
            iv = self.calls.take_intervention(("drop", "replace")) if self.calls.intervention else None
            prompt = t.prompt if iv is None else ("" if iv.kind == "drop" else iv.arg or "")
            mid = rec.message(prompt, to=t.agent, after=[self._last_event[t.agent]], attrs={"round": s.round})
            job = asyncio.create_task(self._work(Task(t.agent, prompt, t.tools), mid))
            running[job] = t.agent
        rec.set_cursor(cur)
        done_results: list[Result] = []
        pending = set(running)
        try:
            while pending:
                wait = None
                if self.budget.wall_clock_s is not None:
                    wait = max(0.0, self.budget.wall_clock_s - (rec.now() - self._t0))
                done, pending = await asyncio.wait(pending, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
                failed = [e for j in done if (e := j.exception()) is not None]  # retrieves them all
                if failed:
                    raise failed[0]
                for job in sorted(done, key=lambda j: self._order(j.result().event)):
                    r = job.result()
                    done_results.append(r)
                    s.results.append(r)
                    if r.status == "error":
                        s.failed += 1
                if pending and (reason := self._should_stop()):
                    self._stop = reason
                    await _cancel(pending)
                    rec.set_cursor(cur)
                    for job in sorted(pending, key=lambda j: running[j]):
                        self._despawn(running[job], "cancelled")
                        s.cancelled.append(running[job])
                    break
        except BaseException:  # a bug in a worker or an outside cancel: leave no task behind
            await _cancel(pending)
            raise
        return done_results

    def _order(self, event_id: str) -> int:
        return self.rec.index_of(event_id)

    async def _work(self, task: Task, task_msg: str) -> Result:
        """One agent's turn: tool calls, then the LLM call with retries; ends in a return event."""
        rec, s = self.rec, self.state
        spec = s.agents[task.agent]
        rec._agent.set(spec.name)
        prompt = task.prompt
        for name, args in task.tools:
            fn = self.tools.get(name)
            cid = f"c{rec.count}"
            rec.emit("tool_call", spec.name, tool=name, call_id=cid, content=str(args))
            if fn is None:
                res, err, ref = None, f"unknown tool {name!r}", None
            else:
                res, err, ref = await self.calls.tool(name, args, fn)
            attrs = {"call": ref} if ref else None
            if err is not None:
                rec.emit(
                    "tool_result", spec.name, tool=name, call_id=cid, content=err, status="error", attrs=attrs
                )
                prompt += f"\n[{name} failed: {err}]"
            else:
                rec.emit(
                    "tool_result",
                    spec.name,
                    tool=name,
                    call_id=cid,
                    content=str(res),
                    trusted=True,
                    attrs=attrs,
                )
                prompt += f"\n[{name} returned: {res}]"
        inbox = s.inbox.get(spec.name) or []
        heard = [m.event for m in inbox if m.event]  # messages read in this turn cause its return
        if inbox:
            prompt += "\n" + "\n".join(f"{m.frm} says: {m.content}" for m in inbox)
            s.inbox[spec.name] = []
        history = self._history.setdefault(
            spec.name,
            ([{"role": "system", "content": spec.system}] if spec.system else []) + list(spec.fewshot),
        )
        turn = self._turns.get(spec.name, 0)
        self._turns[spec.name] = turn + 1
        req = ChatRequest(
            messages=[*history, {"role": "user", "content": prompt}],
            model=spec.model,
            temperature=spec.temperature,
            max_tokens=spec.max_tokens,
            seed=derive_seed(self.seed, spec.name, turn),
        )
        rng = random.Random(derive_seed(self.seed, spec.name, turn, "backoff"))
        for attempt in range(self.retry.retries + 1):
            start = rec.now()
            out, ref, dropped = await self.calls.chat(req, timeout=self.timeout)
            base = {
                "from_": spec.name,
                "to": rec.root_agent,
                "role": spec.role,
                "turn": s.round,
                "start": start,
                "after": heard,
            }
            if isinstance(out, BackendError):
                attrs = {"call": ref, "attempt": attempt, "error": out.kind, "retryable": out.retryable}
                if out.status is not None:
                    attrs["http_status"] = out.status
                eid = rec.emit("return", spec.name, content=str(out), status="error", attrs=attrs, **base)
                self._last_event[spec.name] = eid
                if out.retryable and attempt < self.retry.retries:
                    if self.calls.mode != "replay":
                        await asyncio.sleep(self.retry.delay(attempt, out, rng))
                    continue
                return Result(spec.name, spec.role, s.round, None, eid, "error", str(out))
            eid = self._record_ok(spec, out, ref, attempt, dropped, base)
            history.extend(({"role": "user", "content": prompt}, {"role": "assistant", "content": out.text}))
            lp = summarise_logprobs(out.logprobs)  # as the return event records it
            return Result(
                spec.name,
                spec.role,
                s.round,
                None if dropped else out.text,
                eid,
                "dropped" if dropped else "ok",
                logprob_mean=None if lp is None else lp.mean,
            )
        raise AssertionError("unreachable")

    def _record_ok(
        self, spec: AgentSpec, out: ChatResponse, ref: str, attempt: int, dropped: bool, base: dict[str, Any]
    ) -> str:
        s = self.state
        s.tokens += out.tokens_in + out.tokens_out
        s.usd += out.cost_usd or 0.0
        attrs: dict[str, Any] = {"call": ref, "attempt": attempt}
        if dropped:
            attrs["dropped"] = True
        if out.finish_reason == "length":  # cut off by max_tokens: the answer may be incomplete
            attrs["truncated"] = True
        if out.tokens is not None:  # a trainable backend: which adapter answered (token ids in the cache)
            attrs["adapter"] = out.tokens.adapter
        if (lp := summarise_logprobs(out.logprobs)) is not None:
            attrs.update(logprob_attrs(lp))
        extra: dict[str, Any] = {}
        if out.cost_usd:
            extra["cost_usd"] = out.cost_usd
        eid = self.rec.emit(
            "return",
            spec.name,
            content=out.text,
            tokens_in=out.tokens_in,
            tokens_out=out.tokens_out,
            model=out.model or None,
            attrs=attrs,
            **extra,
            **base,
        )
        self._last_event[spec.name] = eid
        return eid

    def _communicate(self, results: list[Result]) -> None:
        msgs = self.policy.communicate(self.state, results)
        if not msgs:
            return
        self._decide("communicate", msgs)
        if self._stop:
            return
        cur = self.rec.cursor
        for m in msgs:
            self.rec.set_cursor(cur)
            iv = self.calls.take_intervention(("drop", "replace")) if self.calls.intervention else None
            content = m.content if iv is None else ("" if iv.kind == "drop" else iv.arg or "")
            src = self._last_event.get(m.frm)
            mid = self.rec.emit(
                "message", m.frm, from_=m.frm, to=m.to, content=content, after=[src] if src else None
            )
            if content:
                self.state.inbox.setdefault(m.to, []).append(Message(m.frm, m.to, content, mid))
        self.rec.set_cursor(cur)

    def _aggregate(self, results: list[Result]) -> None:
        agg = self.policy.aggregate(self.state, results)
        if agg is None:
            return
        self.state.final = agg
        self.rec.aggregate(agg, inputs=[r.event for r in results], attrs={"round": self.state.round})

    def _despawn(self, name: str, reason: str) -> None:
        last = self._last_event.get(name)
        self.rec.despawn(name, parent=self.rec.root_agent, reason=reason, after=[last] if last else None)
        self.state.agents.pop(name, None)

    def _finish(self, reason: str) -> None:
        rec, s = self.rec, self.state
        if not self._stopped:
            rec.stop(reason, attrs={"round": s.round})
        cur = rec.cursor
        for name in list(s.agents):
            rec.set_cursor(cur)
            self._despawn(name, "done")
        errors = [r for r in s.results if r.status == "error"]
        every_call_failed = bool(s.results) and len(errors) == len(s.results)
        outcome: dict[str, Any] = {
            "status": "error" if reason == "error" or every_call_failed else "ok",
            "stop_reason": reason,
            "final": s.final,
            "rounds": s.round,
        }
        if every_call_failed:  # nothing was answered: a failed run, whatever the policy decided
            outcome["cause"] = f"all {len(errors)} agent turns failed; the first: {errors[0].error}"
        elif reason == "error" and errors:
            outcome["cause"] = f"{errors[-1].agent} failed: {errors[-1].error}"
        rec.metadata["outcome"] = outcome


async def _cancel(jobs: set[asyncio.Task[Result]]) -> None:
    for job in jobs:
        job.cancel()
    await asyncio.gather(*jobs, return_exceptions=True)


def _show(v: Any) -> Any:
    if isinstance(v, Message):
        return f"{v.frm}->{v.to}"
    return getattr(v, "agent", getattr(v, "name", v))
