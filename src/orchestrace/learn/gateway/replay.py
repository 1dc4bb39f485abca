"""Counterfactual replay of a gateway run (``--credit loo-fork`` / ``shapley-fork`` with a gateway
program): the user's program is run again on the same task, and the gateway answers it from the
recording up to the fork point.

A fork resamples the first call of one agent (or of each agent of a set). Every call of the fork
run is matched to the recording by agent and call number (``turn``):

- a call the recording shows was *asked before the forked call had answered* (its ``message``
  event comes before the forked call's ``return``) gets the recorded completion verbatim (token
  ids and behaviour log-probs included), if its request is the recorded one (same messages,
  sampling settings and derived seed: the prompt check). Such a call cannot have read the forked
  answer, so the fork's reward does not depend on the agent's recorded action: it is a baseline;
- the forked call is sampled again with another seed (a ``human_intervention`` event "fork:
  resample at E" marks it, as a ``team`` program's fork does);
- every other call, and a replayable call whose request differs from the recorded one (the run
  diverged: the program is not a function of its completions alone, e.g. it puts the time or a
  random choice into a prompt), samples fresh with a seed of the fork's own. A divergence is
  noted in ``metadata.fork.diverged`` (agent and turn); the fork is still used, since its calls
  still do not depend on the forked agent's recorded answer, only less of the run is shared.

A fork is recorded like a ``team`` program's fork: its own trace and call cache under the
iteration's ``forks/`` folder, ``metadata.fork`` = {parent, at, index, do: resample, group} plus
``agents`` (the resampled agents), ``replayed`` (calls answered from the recording),
``diverged``, ``reached`` (the agents whose forked call was made). Replayed ``return`` events carry
``attrs.replayed``. Forks are read only by the credit (their rewards), never as samples.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ...core.io import load_one
from ...core.model import Trace
from ...runtime.backends.base import ChatRequest, TokenSample, request_key
from ...runtime.cache import CallCache, cache_path, reseed
from ...runtime.recorder import ROOT_AGENT
from ..team.forks import resample_path
from ..team.program import answering
from .protocol import Completion

CallId = tuple[str, int]  # (agent, its call number)


@dataclass(frozen=True)
class RecordedCall:
    """A successful call of the recording: its request key (what the prompt check compares) and
    its cached response."""

    key: str
    ok: dict[str, Any]

    def completion(self) -> Completion:
        ok = self.ok
        tokens = ok.get("tokens")
        return Completion(
            text=ok.get("text"),
            tool_calls=ok.get("tool_calls") or None,
            finish_reason=ok.get("finish_reason") or "stop",
            tokens_in=int(ok.get("tokens_in") or 0),
            tokens_out=int(ok.get("tokens_out") or 0),
            model=str(ok.get("model") or ""),
            token_sample=None if tokens is None else msgspec.convert(tokens, TokenSample),
        )


@dataclass
class ReplayPlan:
    """How a fork run's calls are answered (see the module's docstring), and what happened."""

    replay: dict[CallId, RecordedCall]
    resample: dict[CallId, str]  # the forked calls -> the recording's return event of each
    fork_seed: int
    replayed: int = 0
    diverged: list[dict[str, Any]] = field(default_factory=list)
    reached: list[str] = field(default_factory=list)

    def route(
        self, agent: str, turn: int, req: ChatRequest
    ) -> tuple[ChatRequest, Completion | None, str | None]:
        """(the request to sample, or the recorded completion; the forked call's recorded event
        when this call is the forked one)."""
        recorded = self.replay.get((agent, turn))
        if recorded is not None:
            if request_key(req) == recorded.key:
                self.replayed += 1
                return req, recorded.completion(), None
            self.diverged.append({"agent": agent, "turn": turn})
        at = self.resample.get((agent, turn))
        if at is not None:
            self.reached.append(agent)
        return msgspec.structs.replace(req, seed=reseed(req.seed, self.fork_seed)), None, at

    def summary(self) -> dict[str, Any]:
        return {"replayed": self.replayed, "diverged": self.diverged, "reached": self.reached}


@dataclass(frozen=True)
class CallPlace:
    asked: int  # index of the call's message event
    answered: int  # index of its return event
    event: str  # the return event's id
    recorded: RecordedCall | None  # None: the call failed


def call_places(trace: Trace, path: str) -> dict[CallId, CallPlace]:
    """Every call of a gateway run by (agent, turn): where it was asked and answered, and its
    cached response."""
    asked: dict[CallId, int] = {}
    places: dict[CallId, CallPlace] = {}
    cache = CallCache(cache_path(path), write=False)
    for i, e in enumerate(trace.events):
        turn = (e.attrs or {}).get("turn")
        if e.type == "message" and e.from_ == ROOT_AGENT and e.to and isinstance(turn, int):
            asked.setdefault((e.to, turn), i)
        elif e.type == "return" and e.agent and e.turn is not None:
            cid = (e.agent, e.turn)
            ref = (e.attrs or {}).get("call")
            recorded = None
            if e.status != "error" and isinstance(ref, str):
                key, _, n = ref.rpartition("#")
                ok = ((cache.get(key, int(n)) if n.isdigit() else None) or {}).get("outcome", {}).get("ok")
                recorded = RecordedCall(key, ok) if isinstance(ok, dict) else None
            places[cid] = CallPlace(asked.get(cid, i), i, e.id, recorded)
    return places


@dataclass(frozen=True)
class ForkRun:
    """One fork of a recorded run: the agents whose first call is resampled."""

    parent: str  # the recorded run's trace path
    out: str
    trace_id: str
    seed: int
    config: dict[str, Any]  # the run's metadata.runtime.config (task set, question)
    metadata: dict[str, Any]
    plan: ReplayPlan


def fork_seed(seed: int, label: str) -> int:
    h = hashlib.sha256(f"{seed}|fork|{label}".encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def plan_fork(path: str, trace: Trace, agents: tuple[str, ...]) -> ForkRun:
    """The fork of the run at ``path`` that resamples the first call of each of ``agents``."""
    places = call_places(trace, path)
    forked = {(a, 0): places[(a, 0)] for a in agents}
    cut = min(p.answered for p in forked.values())
    replay = {
        cid: p.recorded
        for cid, p in places.items()
        if p.asked < cut and cid not in forked and p.recorded is not None
    }
    label = "+".join(agents)
    md = dict(trace.metadata or {})
    rt = md.get("runtime") or {}
    seed = int((md.get("gateway") or {}).get("seed", rt.get("seed", 0)))
    first = min(forked.values(), key=lambda p: p.answered)
    meta = {k: v for k, v in md.items() if k not in ("outcome", "fork", "gateway")}
    meta["fork"] = {
        "parent": trace.trace_id,
        "at": first.event,
        "index": first.answered,
        "do": "resample",
        "group": f"{trace.trace_id}@{first.event}",
        "agents": list(agents),
    }
    plan = ReplayPlan(replay, {cid: p.event for cid, p in forked.items()}, fork_seed(seed, label))
    return ForkRun(
        path,
        resample_path(path, label),
        f"{trace.trace_id}~resample~{label}",
        seed,
        dict(rt.get("config") or {}),
        meta,
        plan,
    )


def plan_forks(paths: list[str], *, subsets: bool = False) -> list[ForkRun]:
    """For every run: a fork per agent (its first call resampled); with ``subsets`` also one per
    larger set of agents but all of them at once (what exact Shapley needs: 2^n - 1 forks)."""
    out: list[ForkRun] = []
    for p in paths:
        tr = load_one(p)
        players = list(dict.fromkeys(a for _, a in answering(tr)))
        sizes = range(1, len(players) + 1) if subsets else range(1, 2)
        for size in sizes:
            for combo in itertools.combinations(players, size):
                out.append(plan_fork(p, tr, combo))
    return out
