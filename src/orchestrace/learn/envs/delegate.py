"""Delegate (O2): route each query to one of several models.

One episode = one query. The orchestrator sees features of the query text (hashed bag of words,
its group token, length and digit statistics) and picks a model; the model's real outcome on that
query (RouteLLM correctness, AlpacaEval preference) and its real price (FrugalGPT table) are
replayed. The reward is read back from the trace (:func:`delegate_reward`):
``R = quality - lambda x cost_usd / cost_scale``, with ``cost_scale`` the mean price of the most
expensive model on the data, so lambda = 1 means one average call of the priciest model costs as
much as one full quality point.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

import gymnasium as gym
import numpy as np

from ...core.build import TraceBuilder
from ...core.model import Event, Trace
from ..datasets import RouteData, words
from .defaults import DEFAULT_ROUTE, EnvArgumentError, route_arg
from .spaces import data_box

ORCH = "orchestrator"
HASH_DIM = 128
N_STATS = 5


def _bucket(token: str) -> int:
    return zlib.crc32(token.encode()) % HASH_DIM


def query_features(text: str, group: str) -> np.ndarray:
    """Hashed bag of words (L2-normalised) + a hashed group token + length/digit statistics."""
    v = np.zeros(HASH_DIM + N_STATS, np.float32)
    ws = words(text)
    for w in ws:
        v[_bucket(w)] += 1.0
    n = np.linalg.norm(v[:HASH_DIM])
    if n > 0:
        v[:HASH_DIM] /= n
    v[_bucket("group:" + group)] += 1.0
    digits = sum(ch.isdigit() for ch in text)
    v[HASH_DIM:] = [np.log1p(len(text)) / 8.0, digits / max(len(text), 1), np.log1p(len(ws)) / 6.0,
                    float("?" in text), 1.0]  # fmt: skip
    return v


def delegate_trace(
    data: RouteData, q: int, model: int, lam: float, scale: float, probs: np.ndarray | None = None
) -> Trace:
    """decision -> spawn the chosen model's agent -> message (the query) -> its return (quality,
    cost) -> aggregate (the answer the system gives)."""
    name = data.models[model]
    agent = f"model:{name}"
    quality = float(data.quality[q, model])
    cost = float(data.cost[q, model])
    attrs: dict[str, Any] = {"decision": "delegate", "model": name}
    if probs is not None:
        attrs["probs"] = {m: round(float(p), 6) for m, p in zip(data.models, probs, strict=True)}
    b = TraceBuilder()
    b.add(Event(id="d", t=0.0, type="orchestrator_decision", agent=ORCH, attrs=attrs))
    b.add(Event(id="s", t=0.0, type="spawn", agent=ORCH, to=agent, role="model"), ("d", "spawn"))
    b.add(
        Event(id="m", t=0.0, type="message", agent=ORCH, from_=ORCH, to=agent, content_ref=data.ids[q]),
        ("s", "causal"),
    )
    b.add(
        Event(
            id="r", t=0.5, t_end=1.0, type="return", agent=agent, from_=agent, to=ORCH, model=name,
            cost_usd=cost, status="ok", attrs={"quality": quality},
        ),
        ("m", "message"),
    )  # fmt: skip
    b.add(
        Event(id="a", t=1.0, type="aggregate", agent=ORCH, attrs={"method": "pass_through"}),
        ("r", "aggregate"),
    )
    return b.trace(
        trace_id=f"delegate-{data.ids[q]}-{model}",
        task_id=data.ids[q],
        system="orchestrace.learn.delegate",
        topology="centralized",
        rewards={"team": quality, "orchestration": quality - lam * cost / scale},
        costs={"tokens": 0.0, "wall_clock_s": 1.0, "usd": cost},
        metrics={"quality": quality},
        metadata={"env": "Delegate", "data": data.name, "lambda": lam, "cost_scale": scale},
    )


def delegate_reward(trace: Trace, lam: float, scale: float) -> float:
    """R = quality of the answer the aggregate passes on (its ``answer_from`` return, else the only
    return) - lambda x (USD of all calls) / scale."""
    rets = {e.id: e for e in trace.events if e.type == "return"}
    agg = next((e for e in trace.events if e.type == "aggregate"), None)
    src = (agg.attrs or {}).get("answer_from") if agg is not None else None
    chosen = [rets[src]] if src in rets else list(rets.values())
    quality = sum(float((e.attrs or {}).get("quality", 0.0)) for e in chosen)
    usd = sum(e.cost_usd or 0.0 for e in trace.events)
    return quality - lam * usd / scale


def cost_scale(data: RouteData) -> float:
    return float(data.cost.mean(axis=0).max())


class DelegateEnv(gym.Env):
    """Gymnasium view: obs = :func:`query_features`; action = model index; one step per episode.

    ``reset(options={"query": i})`` picks a query (default: random); ``info["trace"]`` holds the
    trace and the reward is :func:`delegate_reward` of it."""

    metadata = {"render_modes": []}

    def __init__(
        self, data: RouteData | str = DEFAULT_ROUTE, lam: float = 0.5, scale: float | None = None
    ) -> None:
        self.data = data = route_arg(data)  # a source or excerpt name or an outcomes file too
        self.lam = lam
        self.scale = cost_scale(data) if scale is None else scale
        self.feats = np.stack([query_features(t, g) for t, g in zip(data.texts, data.groups, strict=True)])
        self.observation_space = data_box(self.feats)  # an observation is one of these rows
        self.action_space = gym.spaces.Discrete(len(data.models))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        opt = options or {}
        self._q = int(opt["query"]) if "query" in opt else int(self.np_random.integers(len(self.data.ids)))
        return self.feats[self._q].copy(), {"query": self.data.ids[self._q]}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        tr = delegate_trace(self.data, self._q, int(action), self.lam, self.scale)
        info = {
            "trace": tr,
            "quality": float(self.data.quality[self._q, int(action)]),
            "cost_usd": float(self.data.cost[self._q, int(action)]),
            "model": int(action),
        }
        return self.feats[self._q].copy(), delegate_reward(tr, self.lam, self.scale), True, False, info

    def action_rewards(self) -> np.ndarray:
        """The reward of every model on the current query, each read from its trace (the outcome
        table exact PG sums over)."""
        return np.array(
            [
                delegate_reward(
                    delegate_trace(self.data, self._q, a, self.lam, self.scale), self.lam, self.scale
                )
                for a in range(len(self.data.models))
            ]
        )


# ----------------------------------------------------------------------------- baselines


def threshold_router(train: RouteData, tau: float) -> Any:
    """Cost-threshold router: the cheapest model (by mean training price) whose mean training
    quality on the query's group reaches ``tau``; the group's best model when none does."""
    order = np.argsort(train.cost.mean(axis=0))
    groups = np.array(train.groups)
    table = {g: train.quality[groups == g].mean(axis=0) for g in np.unique(groups)}
    overall = train.quality.mean(axis=0)

    def route(group: str) -> int:
        q = table.get(group, overall)
        ok = [int(j) for j in order if q[j] >= tau]
        return ok[0] if ok else int(np.argmax(q))

    return route


def route_rewards(
    data: RouteData, choice: np.ndarray, lam: float, scale: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(reward, quality, cost) per query for a vector of chosen models, through the traces."""
    q, c, r = np.empty(len(choice)), np.empty(len(choice)), np.empty(len(choice))
    for i, m in enumerate(choice.tolist()):
        tr = delegate_trace(data, i, int(m), lam, scale)
        r[i] = delegate_reward(tr, lam, scale)
        q[i] = tr.rewards["team"]
        c[i] = tr.costs["usd"]
    return r, q, c


# ----------------------------------------------------------------------------- cascade

_FINAL = re.compile(r"####|answer is|Answer:", re.I)
_HEDGE = re.compile(r"however|but since|approximately|round|assum|cannot|not possible", re.I)
_CALC = re.compile(r"<<")
_LAST_NUM = re.compile(r"(-?[\d,]*\.?\d+)\s*$")
N_RESP = 6


def response_features(text: str) -> np.ndarray:
    """What the orchestrator can read off an answer before trusting it: length, a final-answer
    marker, calculator annotations, hedging, a non-integer final number (all task-agnostic text cues)."""
    tail = text.strip().splitlines()[-1] if text.strip() else ""
    m = _LAST_NUM.search(tail.replace("$", ""))
    frac = bool(m and "." in m.group(1).strip(".").replace(",", ""))
    return np.array(
        [np.log1p(len(text)) / 8.0, float(bool(_FINAL.search(text))), len(_CALC.findall(text)) / 5.0,
         float(bool(_HEDGE.search(text))), float(frac), 1.0],
        dtype=np.float32,
    )  # fmt: skip


def cascade_trace(
    data: RouteData, q: int, called: list[int], lam: float, scale: float, decisions: list[str]
) -> Trace:
    """decision -> (spawn, message, return, decision) per model called, cheapest first -> aggregate
    passing on the last answer."""
    b = TraceBuilder()
    prev = b.add(
        Event(id="d0", t=0.0, type="orchestrator_decision", agent=ORCH, attrs={"decision": decisions[0]})
    )
    for i, j in enumerate(called):
        name = data.models[j]
        agent = f"model:{name}"
        t = 2.0 * i
        resp = data.responses[q][j] if data.responses is not None else None
        s = b.add(Event(id=f"s{i}", t=t, type="spawn", agent=ORCH, to=agent, role="model"), (prev, "spawn"))
        m = b.add(Event(id=f"m{i}", t=t, type="message", agent=ORCH, from_=ORCH, to=agent, content_ref=data.ids[q]),
                  (s, "causal"))  # fmt: skip
        prev = b.add(Event(id=f"r{i}", t=t + 0.5, t_end=t + 1.0, type="return", agent=agent, from_=agent, to=ORCH, model=name,
                           cost_usd=float(data.cost[q, j]), status="ok", content=None if resp is None else resp[:1000],
                           attrs={"quality": float(data.quality[q, j])}), (m, "message"))  # fmt: skip
        if i + 1 < len(decisions):
            prev = b.add(Event(id=f"d{i + 1}", t=t + 1.0, type="orchestrator_decision", agent=ORCH,
                               attrs={"decision": decisions[i + 1]}), (prev, "causal"))  # fmt: skip
    last = f"r{len(called) - 1}"
    t_end = 2.0 * len(called)
    b.add(
        Event(id="a", t=t_end, type="aggregate", agent=ORCH, attrs={"method": "last", "answer_from": last}),
        (last, "aggregate"),
        *([(prev, "causal")] if prev != last else []),
    )
    usd = float(sum(data.cost[q, j] for j in called))
    quality = float(data.quality[q, called[-1]])
    return b.trace(
        trace_id=f"cascade-{data.ids[q]}-{'-'.join(map(str, called))}",
        task_id=data.ids[q],
        system="orchestrace.learn.delegate",
        topology="centralized",
        rewards={"team": quality, "orchestration": quality - lam * usd / scale},
        costs={"tokens": 0.0, "wall_clock_s": t_end, "usd": usd},
        metrics={"quality": quality, "calls": float(len(called))},
        metadata={"env": "DelegateCascade", "data": data.name, "lambda": lam, "cost_scale": scale},
    )


class CascadeEnv(gym.Env):
    """Delegate as a cascade over the models sorted by price (FrugalGPT's setting, learned).

    Step 0 (obs: query features, response part zero): 0 = ask the cheapest model, 1 = go straight
    to the priciest. After a model answers (obs: query + :func:`response_features` of the answer):
    0 = accept it, 1 = escalate to the next pricier model. The last model's answer is final."""

    metadata = {"render_modes": []}

    def __init__(
        self, data: RouteData | str = DEFAULT_ROUTE, lam: float = 0.2, scale: float | None = None
    ) -> None:
        data = route_arg(data, "DelegateCascade-v0")
        if data.responses is None:
            raise EnvArgumentError(
                "DelegateCascade-v0", "data", data.name, "has no logged responses: the cascade needs them"
            )
        self.data = data
        self.lam = lam
        self.scale = cost_scale(data) if scale is None else scale
        self.ladder = [int(j) for j in np.argsort(data.cost.mean(axis=0))]
        self.feats = np.stack([query_features(t, g) for t, g in zip(data.texts, data.groups, strict=True)])
        resp = [response_features(r) for rs in data.responses for r in rs]
        box_q, box_r = data_box(self.feats), data_box(np.stack([np.zeros(N_RESP, np.float32), *resp]))
        self.observation_space = gym.spaces.Box(
            np.concatenate([box_q.low, box_r.low, [0.0]]).astype(np.float32),
            np.concatenate([box_q.high, box_r.high, [float(len(data.models))]]).astype(np.float32),
            dtype=np.float32,
        )  # query features, the last answer's features (or none yet), models called so far
        self.action_space = gym.spaces.Discrete(2)

    def _obs(self) -> np.ndarray:
        resp = np.zeros(N_RESP, np.float32)
        if self._called:
            resp = response_features(self.data.responses[self._q][self._called[-1]])  # type: ignore[index]
        return np.concatenate([self.feats[self._q], resp, [float(len(self._called))]]).astype(np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        opt = options or {}
        self._q = int(opt["query"]) if "query" in opt else int(self.np_random.integers(len(self.data.ids)))
        self._called: list[int] = []
        self._decisions: list[str] = []
        return self._obs(), {"query": self.data.ids[self._q]}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        a = int(action)
        if not self._called:
            self._decisions.append("start_strongest" if a == 1 else "start_cheapest")
            self._called.append(self.ladder[-1] if a == 1 else self.ladder[0])
        elif a == 1:
            self._decisions.append("escalate")
            self._called.append(self.ladder[self.ladder.index(self._called[-1]) + 1])
        else:
            self._decisions.append("accept")
        done = a == 0 and len(self._decisions) > 1 or self._called[-1] == self.ladder[-1]
        if not done:
            return self._obs(), 0.0, False, False, {}
        tr = cascade_trace(self.data, self._q, self._called, self.lam, self.scale, self._decisions)
        info = {"trace": tr, "quality": tr.rewards["team"], "cost_usd": tr.costs["usd"], "calls": len(self._called),
                "model": self._called[-1]}  # fmt: skip
        return self._obs(), delegate_reward(tr, self.lam, self.scale), True, False, info


def rule_cascade(obs: np.ndarray) -> int:
    """Hand-written cascade: start cheap; escalate when the answer lacks a final-answer marker,
    hedges, or ends in a non-integer (FrugalGPT-style scorer replaced by fixed text cues)."""
    r = obs[-1 - N_RESP : -1]
    if obs[-1] == 0:
        return 0
    return int(r[1] == 0 or r[3] == 1 or r[4] == 1)
