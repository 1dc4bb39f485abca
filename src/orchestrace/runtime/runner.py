"""Run, replay and fork programs. A trace remembers how to re-run itself (``metadata.runtime``).

- ``run``: execute a program live, recording the trace and a call cache beside it.
- ``replay``: re-execute it against the cache only (no live call; a miss is an error) and compare.
- ``fork``: re-execute with an intervention at one event: the prefix comes from the cache and
  matches the original exactly; after the event, calls come from the cache when the same request
  was made before and go live otherwise. Several forks of one event form a sibling group.
  The fork keeps the parent's event ids up to the fork point; its own events get ids the parent
  never used (``metadata.fork.fresh_ids_from``), so a shared id always names the same event.
  ``resample:SEED`` redraws the chosen call with SEED and every later call with a seed mixed
  with SEED: each resample fork is its own draw of the rest of the run.
"""

from __future__ import annotations

import asyncio
import math
import os
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Annotated, Any

import msgspec

from ..core.errors import BadInput, OrchestraceError
from ..core.io import load_one
from ..core.model import Trace, trace_to_dict
from ..core.paths import make_dirs
from ..core.plugins import import_user_module
from .backends.base import Backend, content_key
from .cache import CallCache, Calls, Intervention, Mode, cache_path, parse_intervention
from .learned import TraceDecider, WithTracePolicies, check_trace_policies
from .orchestrator import Budget, Orchestrator, RetryPolicy
from .programs import PROGRAMS, Setup
from .recorder import Clock, Recorder


@dataclass
class RunResult:
    path: str
    trace: Trace
    outcome: dict[str, Any]
    live_calls: int
    cache_hits: int
    diverged_at: int | None = None
    #: config keys the program did not look up (a typo, or an annotation) and those it did
    unread_config: list[str] = field(default_factory=list)
    config_read: list[str] = field(default_factory=list)


class _ReadKeys(dict[str, Any]):
    """A config that remembers which keys its program looked up, so that a key nobody reads (a
    typo: ``--set widht=2``) can be told apart from one the program uses. Unread keys are not
    errors: they are kept in the trace's metadata, where callers put annotations (the loop's
    ``gold``, ``family``) for the code that reads the trace later."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read.add(key)
        return super().__contains__(key)


def programs() -> dict[str, str]:
    """Every program by name: the runtime's own (``programs.PROGRAMS``), then those registered under
    the ``orchestrace.programs`` entry-point group (learn's ``team``: the runtime does not name the
    layers above it)."""
    found = dict(PROGRAMS)
    for ep in entry_points(group="orchestrace.programs"):
        found.setdefault(ep.name, ep.value)
    return found


def load_program(name: str) -> Any:
    """A program name or ``module:function``; the function maps a config dict to a Setup."""
    target = PROGRAMS.get(name) or (name if ":" in name else programs().get(name, name))
    mod, _, fn = target.partition(":")
    if not fn:
        raise OrchestraceError(
            "OT604", f"unknown program {name!r}: use one of {', '.join(programs())} or module:function"
        )
    try:
        return getattr(import_user_module(mod), fn)
    except (ImportError, AttributeError) as e:
        raise OrchestraceError("OT604", f"cannot load program {name!r}: {e}") from None


def backend_spec(
    kind: str = "auto",
    *,
    base_url: str | None = None,
    model: str = "default",
    seed: int = 0,
    logprobs: bool = False,
) -> dict[str, Any]:
    """A JSON description of a backend (stored in the trace so forks can go live again).
    ``logprobs`` asks an OpenAI-compatible server for token log-probabilities (the local model
    always gives them)."""
    if base_url:
        return {"kind": "openai", "base_url": base_url, "model": model} | (
            {"logprobs": True} if logprobs else {}
        )
    if logprobs:
        raise OrchestraceError("OT605", "--logprobs asks an OpenAI-compatible server: give --base-url "
                               "(the local model records log-probabilities without it)")  # fmt: skip
    if kind == "auto":
        from .backends.smollm2 import available

        kind = "local" if available() else "scripted"
    if kind not in ("local", "scripted", "openai"):
        raise OrchestraceError(
            "OT605", f"unknown backend {kind!r}: expected auto, local, scripted or openai (with --base-url)"
        )
    if kind == "openai":
        raise OrchestraceError("OT605", "the openai backend needs --base-url (e.g. http://127.0.0.1:8000/v1)")
    return {"kind": kind, "seed": seed} if kind == "scripted" else {"kind": kind}


def make_backend(spec: dict[str, Any], setup: Setup) -> Backend:
    kind = spec.get("kind")
    if kind == "openai":
        from .backends.openai_compat import OpenAICompatBackend

        return OpenAICompatBackend(
            spec["base_url"],
            model=spec.get("model", "default"),
            timeout=float(spec.get("timeout", 60.0)),
            logprobs=bool(spec.get("logprobs", False)),
        )
    if kind == "local":
        from .backends.smollm2 import SmolLM2Backend

        return SmolLM2Backend()
    if kind == "scripted":
        if setup.scripted is None:
            raise OrchestraceError(
                "OT605", "this program has no scripted backend: use --backend local or --base-url"
            )
        return setup.scripted(int(spec.get("seed", 0)))
    raise OrchestraceError("OT605", f"unknown backend kind {kind!r} in the trace metadata")


def check_logprobs(deciders: dict[str, TraceDecider], spec: dict[str, Any]) -> None:
    """A trace policy that reads token log-probabilities (``needs_logprobs``) needs a backend that
    records them: the local model, or an OpenAI-compatible server asked with --logprobs. Checked
    before anything is written (a backend object, not a spec, is checked at its first decision)."""
    kind = spec.get("kind")
    records = kind == "local" or (kind == "openai" and bool(spec.get("logprobs")))
    for name, d in deciders.items():
        if getattr(d, "needs_logprobs", False) and not records:
            hint = (
                "give --logprobs" if kind == "openai" else "use --backend local or --base-url URL --logprobs"
            )
            raise BadInput("OT624", f"--policy {name}=...: the policy reads token log-probabilities and "
                           f"the {kind} backend records none ({hint})", path=d.path)  # fmt: skip


async def execute(
    program: str,
    out: str,
    *,
    config: dict[str, Any] | None = None,
    seed: int = 0,
    backend: dict[str, Any] | Backend | None = None,
    clock: Clock = "wall",
    budget: Budget | None = None,
    timeout: float = 60.0,
    retries: int = 2,
    trace_id: str | None = None,
    mode: Mode = "record",
    reference: Trace | None = None,
    source: CallCache | None = None,
    intervention: Intervention | None = None,
    metadata: dict[str, Any] | None = None,
    trace_policies: dict[str, TraceDecider] | None = None,
    fresh_ids: tuple[int, int] | None = None,
) -> RunResult:
    """Run ``program`` once and write its trace to ``out`` and its calls beside it.

    ``trace_policies`` (decision -> policy reading the trace so far) answer those decisions
    instead of the program's policy; which one acted is in the metadata and in every decision event.
    """
    if os.path.isdir(out):
        raise OrchestraceError(
            "OT010", "is a folder: the run writes one event log (e.g. runs/a.events.jsonl)", path=out
        )
    _check_limits(timeout, retries, budget)
    make_dirs(os.path.dirname(os.path.abspath(out)))  # under a file: OT001 before any model loads
    read = _ReadKeys(config or {})
    setup: Setup = load_program(program)(read)
    if trace_policies:
        check_trace_policies(trace_policies, program, setup.learnable, read)
    config = dict(read)
    budget = budget or Budget()
    spec = backend if isinstance(backend, dict) else {"kind": getattr(backend, "name", "custom")}
    live: Backend | None
    if mode == "replay":
        live = None
    elif backend is None or isinstance(backend, dict):
        resolved = backend or backend_spec("auto", seed=seed)
        check_logprobs(trace_policies or {}, resolved)
        live = make_backend(resolved, setup)
    else:
        live = backend
    meta = metadata or {
        "runtime": {
            "program": program,
            "config": config,
            "seed": seed,
            "backend": spec,
            "clock": clock,
            "timeout": timeout,
            "retries": retries,
            "budget": msgspec.to_builtins(budget.__dict__),
        },
    }
    if trace_policies:
        meta["runtime"]["policies"] = {k: d.name for k, d in trace_policies.items()}
    warmup = getattr(live, "warmup", None)
    if warmup is not None:  # load a local model before the clock starts
        await warmup()
    for p in (out, cache_path(out)):
        if os.path.exists(p):
            os.remove(p)
    store = CallCache(cache_path(out))
    rec = Recorder(
        out,
        task_id=setup.task,
        trace_id=trace_id or f"{program}-s{seed}",
        topology=setup.topology,
        metadata=meta,
        clock=clock,
        reference=reference,
        fresh_ids=fresh_ids,
    )
    calls = Calls(rec, live, mode=mode, store=store, source=source, intervention=intervention)
    policy = WithTracePolicies(setup.policy, trace_policies, rec) if trace_policies else setup.policy
    orch = Orchestrator(
        rec,
        calls,
        policy,
        task=setup.task,
        seed=seed,
        tools=setup.tools,
        timeout=timeout,
        retry=RetryPolicy(retries=retries),
        budget=budget,
        policies=setup.policies,
    )
    try:
        with rec:
            await orch.run()
    finally:
        store.close()
        aclose = getattr(live, "aclose", None)
        if aclose is not None:
            await aclose()
    if intervention is not None and calls.intervention is not None:
        raise OrchestraceError(
            "OT608",
            f"the re-run never reached {intervention.event}: the intervention was not applied"
            + (
                f" (the re-run departed from the recording at event index {rec.diverged_at}: did the program change?)"
                if rec.diverged_at is not None and rec.diverged_at <= intervention.at
                else ""
            ),
            path=out,
        )
    return RunResult(
        out,
        rec.trace(),
        rec.metadata.get("outcome", {}),
        calls.live_calls,
        calls.cache_hits,
        rec.diverged_at,
        sorted(set(read) - read.read),
        sorted(read.read),
    )


def _check_limits(timeout: float, retries: int, budget: Budget | None) -> None:
    """--timeout -1 failed every call, nan never timed out; --retries -1 was an AssertionError;
    a negative budget stopped the run before it began and exited 0, a NaN one never stopped it."""
    if not (math.isfinite(timeout) and timeout > 0):
        raise OrchestraceError("OT010", f"--timeout must be a finite number of seconds > 0, got {timeout}")
    if retries < 0:
        raise OrchestraceError("OT010", f"--retries must be >= 0, got {retries}")
    flags = {"tokens": "--budget-tokens", "usd": "--budget-usd", "wall_clock_s": "--budget-seconds"}
    for name, v in (vars(budget) if budget is not None else {}).items():
        if v is not None and not (math.isfinite(v) and v > 0):
            raise OrchestraceError("OT010", f"{flags[name]} must be a finite number > 0, got {v}")


def run(program: str, out: str, **kw: Any) -> RunResult:
    """Synchronous ``execute`` for scripts and the CLI."""
    return asyncio.run(execute(program, out, **kw))


class _RecordedBudget(msgspec.Struct):
    tokens: Annotated[int, msgspec.Meta(gt=0)] | None = None
    usd: Annotated[float, msgspec.Meta(gt=0)] | None = None
    wall_clock_s: Annotated[float, msgspec.Meta(gt=0)] | None = None


class _RecordedRun(msgspec.Struct):
    """What a re-run reads of ``metadata.runtime``, with the types the runtime writes: a timeout of
    "abc", a seed that is a list, a config that is no object... were internal errors (exit 3), a
    negative retry count an AssertionError."""

    program: str
    config: dict[str, Any] | None = None
    seed: int = 0
    backend: dict[str, Any] | None = None
    clock: Clock = "wall"
    timeout: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    retries: Annotated[int, msgspec.Meta(ge=0)] = 2
    budget: _RecordedBudget | None = None


class _RecordedFork(msgspec.Struct):
    at: str
    index: Annotated[int, msgspec.Meta(ge=0)]
    do: str
    fresh_ids_from: Annotated[int, msgspec.Meta(ge=0)] | None = None


def _recorded(value: Any, kind: type[msgspec.Struct], path: str, pointer: str) -> Any:
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as e:
        raise BadInput("OT606", f"cannot re-run this trace: {e}", path=path, pointer=pointer) from None


def _runtime_meta(tr: Trace, path: str) -> dict[str, Any]:
    rt = (tr.metadata or {}).get("runtime")
    if not isinstance(rt, dict) or "program" not in rt:
        raise OrchestraceError(
            "OT606",
            "this trace was not recorded by the orchestrace runtime (no metadata.runtime): it cannot be re-run",
            path=path,
        )
    rt = {**rt, **msgspec.to_builtins(_recorded(rt, _RecordedRun, path, "/metadata/runtime"))}
    cp = cache_path(path)
    if not os.path.exists(cp):
        raise OrchestraceError(
            "OT606", f"the call cache {os.path.basename(cp)} is missing beside the trace", path=path
        )
    return rt


def _budget(rt: dict[str, Any]) -> Budget:
    return Budget(
        **{k: v for k, v in (rt.get("budget") or {}).items() if k in ("tokens", "usd", "wall_clock_s")}
    )


def sibling_path(path: str, tag: str) -> str:
    for suffix in (".events.jsonl", ".jsonl", ".json"):
        if path.endswith(suffix):
            return path[: -len(suffix)] + f".{tag}.events.jsonl"
    return path + f".{tag}.events.jsonl"


def replay(path: str, out: str | None = None) -> tuple[RunResult, Trace]:
    """Re-run a recorded trace from its cache with zero live calls; returns (replay, original)."""
    original = load_one(path)
    rt = _runtime_meta(original, path)
    md = original.metadata or {}
    iv = None
    fresh: tuple[int, int] | None = None
    if "fork" in md:
        f = _recorded(md["fork"], _RecordedFork, path, "/metadata/fork")
        iv = parse_intervention(f.do)
        iv.at, iv.event = f.index, f.at
        if f.fresh_ids_from is not None:  # forks recorded before fresh ids renumbered from the fork point
            fresh = (f.index, f.fresh_ids_from)
    res = asyncio.run(
        execute(
            rt["program"],
            out or sibling_path(path, "replay"),
            config=rt.get("config"),
            seed=int(rt.get("seed", 0)),
            backend=rt.get("backend"),
            clock=rt.get("clock", "wall"),
            budget=_budget(rt),
            timeout=float(rt.get("timeout", 60.0)),
            retries=int(rt.get("retries", 2)),
            trace_id=original.trace_id,
            mode="replay",
            reference=original,
            source=CallCache(cache_path(path), write=False),
            intervention=iv,
            metadata={k: v for k, v in md.items() if k != "outcome"},
            fresh_ids=fresh,
        )
    )
    return res, original


def fork(
    path: str,
    at: str,
    do: str,
    out: str | None = None,
    *,
    backend: dict[str, Any] | Backend | None = None,
    offline: bool = False,
) -> RunResult:
    """A counterfactual of ``path``: the same run with intervention ``do`` at event ``at``."""
    original = load_one(path)
    rt = _runtime_meta(original, path)
    ids = [e.id for e in original.events]
    if at not in ids:
        raise OrchestraceError(
            "OT607", f"no event {at!r} in this trace (ids run {ids[0]}..{ids[-1]})", path=path
        )
    i = ids.index(at)
    iv = parse_intervention(do)
    iv.at, iv.event = i, at
    _check_fits(original, i, iv, path)
    tag = content_key("fork", [at, do])[:8]
    out = out or sibling_path(path, f"fork-{at}-{tag}")
    md = {k: v for k, v in (original.metadata or {}).items() if k not in ("outcome", "fork")}
    fresh_from = 1 + max((int(x[1:]) for x in ids if x[:1] == "e" and x[1:].isdigit()), default=-1)
    fresh_from = max(fresh_from, len(ids))
    md["fork"] = {
        "parent": original.trace_id,
        "at": at,
        "index": i,
        "do": do,
        "group": f"{original.trace_id}@{at}",
        "fresh_ids_from": fresh_from,
    }
    if backend is not None:
        md["runtime"] = {
            **rt,
            "backend": backend if isinstance(backend, dict) else {"kind": getattr(backend, "name", "custom")},
        }
    return asyncio.run(
        execute(
            rt["program"],
            out,
            config=rt.get("config"),
            seed=int(rt.get("seed", 0)),
            backend=backend or rt.get("backend"),
            clock=rt.get("clock", "wall"),
            budget=_budget(rt),
            timeout=float(rt.get("timeout", 60.0)),
            retries=int(rt.get("retries", 2)),
            trace_id=f"{original.trace_id}~{at}~{tag}",
            mode="replay" if offline else "fork",
            reference=original,
            source=CallCache(cache_path(path), write=False),
            intervention=iv,
            metadata=md,
            fresh_ids=(i, fresh_from),
        )
    )


def fork_group(path: str, at: str, dos: list[str], **kw: Any) -> list[RunResult]:
    """Several forks of one event: a sibling group (same parent and prefix, one intervention
    each), e.g. ``resample:1..K`` for C3-style counterfactual credit. Grouped by ``metadata.fork.group``."""
    return [fork(path, at, do, **kw) for do in dos]


def _check_fits(tr: Trace, i: int, iv: Intervention, path: str) -> None:
    """Refuse interventions that cannot apply to the chosen event, with a reason."""
    e = tr.events[i]
    llm = e.type == "return" and bool(e.attrs and "call" in e.attrs)
    ok = {
        "drop": llm or e.type == "message",
        "replace": llm or e.type == "message",
        "resample": llm,
        "stop": e.type == "orchestrator_decision",
        "delegate": e.type == "orchestrator_decision" and (e.attrs or {}).get("decision") == "delegate",
        "policy": e.type == "orchestrator_decision",
    }[iv.kind]
    if not ok:
        what = {"resample": "an LLM return", "delegate": "a delegate decision"}.get(
            iv.kind,
            "an LLM return or a message" if iv.kind in ("drop", "replace") else "an orchestrator decision",
        )
        raise OrchestraceError(
            "OT607",
            f"{iv.kind!r} applies to {what}, but {e.id} is a {e.type}",
            path=path,
            pointer=f"/events/{i}",
        )


def same_trace(a: Trace, b: Trace) -> int | None:
    """Index of the first event where two traces differ (len of the shorter if one is a prefix);
    None if they are equal as JSON."""
    da, db = trace_to_dict(a), trace_to_dict(b)
    if da == db:
        return None
    for i, (x, y) in enumerate(zip(da["events"], db["events"], strict=False)):
        if x != y:
            return i
    return min(len(da["events"]), len(db["events"]))
