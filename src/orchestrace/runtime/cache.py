"""Content-addressed call cache and the gate every LLM and tool call goes through.

Each call is addressed by the hash of its normalised request plus an occurrence number (the
same request asked twice may get two answers). Outcomes, failures included, are appended to a
JSONL file beside the trace (``run.events.jsonl`` -> ``run.cache.jsonl``), flushed per entry.

``Calls`` runs a call live (record), from the cache only (replay: zero live calls), or from the
cache with live calls on a miss (fork). While a replay still follows its reference trace it
hands each result over only when the recorded run had reached that point, so parallel agents
finish in the recorded order and the replayed trace is the recorded one.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import msgspec
import orjson

from ..core.errors import OrchestraceError
from ..core.paths import make_dirs
from .backends.base import (
    Backend,
    BackendError,
    ChatRequest,
    ChatResponse,
    content_key,
    normalise,
    request_key,
)
from .recorder import Recorder

Mode = Literal["record", "replay", "fork"]


def cache_path(trace_path: str) -> str:
    """The cache file that belongs to a trace file."""
    p = os.fspath(trace_path)
    for suffix in (".events.jsonl", ".jsonl", ".json"):
        for comp in ("", ".gz", ".zst"):
            if p.endswith(suffix + comp):
                return p[: -len(suffix + comp)] + ".cache.jsonl"
    return p + ".cache.jsonl"


class CallCache:
    """(key, n) -> outcome, read from and appended to one JSONL file (or memory only)."""

    def __init__(self, path: str | None = None, *, write: bool = True) -> None:
        self.path = path
        self.entries: dict[tuple[str, int], dict[str, Any]] = {}
        self._f: Any = None
        if path is not None and os.path.exists(path):
            with open(path, "rb") as f:
                for line in f:
                    try:
                        rec = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        continue  # a torn last line from a killed run
                    self.entries[(rec["key"], rec["n"])] = rec
        self._write = write and path is not None
        if self._write:
            make_dirs(Path(path).parent)  # type: ignore[arg-type]
            self._f = open(path, "ab")  # noqa: SIM115 - closed in close(); exists even if no call is made

    def get(self, key: str, n: int) -> dict[str, Any] | None:
        return self.entries.get((key, n))

    def put(self, key: str, n: int, kind: str, request: Any, outcome: dict[str, Any]) -> None:
        rec = {"key": key, "n": n, "kind": kind, "request": request, "outcome": outcome}
        self.entries[(key, n)] = rec
        if self._f is not None:
            self._f.write(orjson.dumps(rec) + b"\n")
            self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


class Intervention(msgspec.Struct):
    """What a fork changes at one event: ``drop``, ``replace`` (arg: text), ``resample`` (arg: seed),
    ``stop``, ``delegate`` (arg: comma-separated agents) or ``policy`` (arg: policy name)."""

    kind: str
    arg: str | None = None
    at: int = 0  # index of the event it replaces
    event: str = ""

    def describe(self) -> str:
        return self.kind if self.arg is None else f"{self.kind}:{self.arg}"


INTERVENTIONS = ("drop", "replace", "resample", "stop", "delegate", "policy")


def parse_intervention(text: str) -> Intervention:
    kind, _, arg = text.partition(":")
    kind = kind.strip()
    if kind not in INTERVENTIONS:
        raise OrchestraceError(
            "OT602",
            f"unknown intervention {text!r}: expected one of {', '.join(INTERVENTIONS)} (e.g. replace:TEXT)",
        )
    if kind in ("replace", "delegate", "policy") and not arg:
        raise OrchestraceError("OT602", f"intervention {kind!r} needs an argument: {kind}:VALUE")
    if kind in ("drop", "stop") and arg:
        raise OrchestraceError("OT602", f"intervention {kind!r} takes no argument, got {kind}:{arg}")
    if kind == "resample" and arg and not arg.lstrip("-").isdigit():
        raise OrchestraceError("OT602", f"resample takes an integer seed, got {arg!r}")
    return Intervention(kind, arg or None)


class Calls:
    """The gate between a run and the outside world (LLMs and tools)."""

    def __init__(
        self,
        rec: Recorder,
        backend: Backend | None,
        *,
        mode: Mode = "record",
        store: CallCache | None = None,
        source: CallCache | None = None,
        intervention: Intervention | None = None,
    ) -> None:
        if mode != "record" and source is None:
            raise ValueError("replay and fork need a source cache")
        self.rec, self.backend, self.mode = rec, backend, mode
        self.store, self.source = store, source
        self.intervention = intervention
        self.resample_seed: int | None = None  # set once a resample:SEED intervention applied
        self.batch = 0  # the orchestrator's batch of parallel calls (``new_batch``)
        self._resampled_batch = 0  # the batch the resample happened in: later ones are reseeded
        self.live_calls = 0
        self.cache_hits = 0
        self._occ: dict[str, int] = defaultdict(int)
        self._ref_index: dict[str, int] = {}
        for i, e in enumerate(rec.reference or ()):
            if e.attrs and isinstance(e.attrs.get("call"), str):
                self._ref_index.setdefault(e.attrs["call"], i)

    def new_batch(self) -> None:
        """A new batch of calls starts (its calls are issued after every call of the batches
        before it): the unit after which a resample's continuation is reseeded."""
        self.batch += 1

    def _next(self, key: str) -> tuple[int, str]:
        n = self._occ[key]
        self._occ[key] = n + 1
        return n, f"{key}#{n}"

    def take_intervention(self, kinds: tuple[str, ...], ref: str | None = None) -> Intervention | None:
        """The pending intervention if it applies here (the next event, or the call ``ref`` whose
        result the reference recorded at the fork event); records it as an event."""
        iv = self.intervention
        if iv is None or iv.kind not in kinds:
            return None
        if (self._ref_index.get(ref) if ref is not None else self.rec.count) != iv.at:
            return None
        self.intervention = None
        self.rec.intervention(
            f"fork: {iv.describe()} at {iv.event}", attrs={"intervention": iv.describe(), "at": iv.event}
        )
        return iv

    async def _from_source(self, key: str, n: int, ref: str) -> dict[str, Any] | None:
        """The cached outcome, delivered when the reference run reached it (None on a miss)."""
        if self.source is None:
            return None
        hit = self.source.get(key, n)
        if hit is None:
            return None
        idx = self._ref_index.get(ref)
        if idx is not None:
            await self.rec.wait_turn(idx)
        return hit

    async def _miss(self, what: str, patience: float = 5.0) -> None:
        """Replay asked for something the recording does not have. A call the recording never
        completed (it was cancelled) waits here to be cancelled again, which happens while the
        replay still makes progress; otherwise the program differs from the recorded one."""
        if self.mode != "replay":
            return
        rec = self.rec
        while rec.diverged_at is None and rec.count < len(rec.reference or ()):
            n = rec.count
            await rec.wait_turn(n + 1, timeout=patience)
            if rec.count == n:
                break
        raise OrchestraceError(
            "OT601",
            f"replay cache miss for {what}: the recording has no such call "
            "(did the program, its config or its prompts change since the recording?)",
        )

    def _targets(self, ref: str) -> bool:
        """Whether the pending intervention is aimed at the call ``ref``: its result was the fork
        event (forking the original) or the recorded intervention names it (replaying a fork)."""
        iv = self.intervention
        if iv is None or iv.kind not in ("replace", "drop", "resample"):
            return False
        return self._ref_index.get(ref) == iv.at

    async def chat(
        self, req: ChatRequest, *, timeout: float | None = None
    ) -> tuple[ChatResponse | BackendError, str, bool]:
        """(response or error, call reference, dropped by an intervention)."""
        if self.resample_seed is not None and self.batch > self._resampled_batch:
            req = msgspec.structs.replace(req, seed=reseed(req.seed, self.resample_seed))
        key = request_key(req)
        n, ref = self._next(key)
        if self._targets(ref):
            iv = self.intervention
            assert iv is not None
            await self.rec.wait_turn(iv.at)
            self.intervention = None
            attrs = {"intervention": iv.describe(), "at": iv.event, "call": ref}
            self.rec.intervention(f"fork: {iv.describe()} at {iv.event}", attrs=attrs)
            if iv.kind == "replace":
                return ChatResponse(text=iv.arg or "", model="intervention"), ref, False
            if iv.kind == "drop":
                return ChatResponse(text="", model="intervention"), ref, True
            self.resample_seed = int(iv.arg) if iv.arg else req.seed + 1
            self._resampled_batch = self.batch
            req = msgspec.structs.replace(req, seed=self.resample_seed)
            key = request_key(req)
            n, ref = self._next(key)
        hit = await self._from_source(key, n, ref)
        if hit is not None:
            self.cache_hits += 1
            out: ChatResponse | BackendError = _outcome(hit["outcome"])
        else:
            await self._miss(f"chat request {ref}")
            out = await self._live_chat(req, timeout)
        self._put(key, n, req, out)
        return out, ref, False

    async def _live_chat(self, req: ChatRequest, timeout: float | None) -> ChatResponse | BackendError:
        if self.backend is None:
            raise OrchestraceError("OT603", "a live LLM call is needed but no backend is configured")
        self.live_calls += 1
        lock = getattr(self.backend, "lock", None)  # a serial backend: queueing is not calling
        try:
            if lock is not None:
                async with lock:
                    return await asyncio.wait_for(self.backend.chat(req), timeout)
            return await asyncio.wait_for(self.backend.chat(req), timeout)
        except TimeoutError:
            return BackendError("timeout", f"no answer within {timeout:g} s", retryable=True)
        except BackendError as e:
            return e
        except Exception as e:  # a backend bug is still a failed call, recorded, not a crashed run
            return BackendError("exception", f"{type(e).__name__}: {e}", retryable=False)

    def _put(self, key: str, n: int, req: ChatRequest, out: ChatResponse | BackendError) -> None:
        if self.store is not None:
            self.store.put(key, n, "chat", normalise(req), _to_outcome(out))

    async def tool(
        self, name: str, args: Any, fn: Callable[[Any], Any | Awaitable[Any]]
    ) -> tuple[Any, str | None, str]:
        """(result, error message or None, call reference); tools are cached like LLM calls."""
        payload = {"tool": name, "args": args}
        key = content_key("tool", payload)
        n, ref = self._next(key)
        hit = await self._from_source(key, n, ref)
        if hit is not None:
            self.cache_hits += 1
            o = hit["outcome"]
        else:
            await self._miss(f"tool call {name} {ref}")
            try:
                r = fn(args)
                if asyncio.iscoroutine(r):
                    r = await r
                o = {"ok": r}
            except Exception as e:  # a failing tool is an event, not a crash
                o = {"error": f"{type(e).__name__}: {e}"}
        if self.store is not None:
            self.store.put(key, n, "tool", payload, o)
        return o.get("ok"), o.get("error"), ref


def reseed(seed: int, resample_seed: int) -> int:
    """The seed of a call made after a ``resample:SEED`` fork point: the continuation is a fresh
    draw per SEED (two resample forks differ even where the resampled answer is the recorded one,
    as a likely answer often is), and the same SEED gives the same fork."""
    h = hashlib.sha256(f"{seed}|resample|{resample_seed}".encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def _to_outcome(out: ChatResponse | BackendError) -> dict[str, Any]:
    if isinstance(out, BackendError):
        return {"error": out.to_dict()}
    return {"ok": msgspec.to_builtins(out)}


def _outcome(o: dict[str, Any]) -> ChatResponse | BackendError:
    if "error" in o:
        return BackendError.from_dict(o["error"])
    return msgspec.convert(o["ok"], ChatResponse)
