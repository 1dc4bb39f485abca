"""Coalition games over credit units: the value v(S) behind Shapley and leave-one-out credit.

**Our definition of removing a unit** (spec §8.6; the survey leaves it open). Removing the players
outside S deletes their events and every event that is *only* downstream of them: an event
survives when it is not removed itself and it is a root of the dependency graph or has at least
one surviving predecessor. Dependency edges are all edge types except ``temporal`` (time order is
not dependence). The residual unit ``~rest`` is never a player, so it is never removed directly.

**Default value of what survives** (:func:`removal_game`), without re-running anything::

    v(S) = R * |K(S) ∩ A| / |A|  +  sum_{e in K(S)} s_e

K(S) = surviving events; A = the terminal event and its ancestors (the events the outcome
rests on; the terminal is the last sink in time; with no dependency edges A is every event);
R = the trace's team reward; s_e = an event's own score: ``attrs.event_reward`` if present, else
-error_penalty for ``status == "error"``, else 0 (or user-given scores, e.g. a RewardOut's
per-event channel). So v(N) = R + sum_e s_e and, with no scored events, v(N) = R, v(no players) =
the residual's share. A user-supplied game (e.g. one that re-runs a fork of the trace) replaces
this by any callable ``mask -> value``. ``propagate=False`` removes only the players' own events.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import msgspec
import numpy as np

from ..core.access import attr, num
from ..core.graph import TraceGraph
from ..core.model import Trace
from ..reward.spec import channel_value
from .units import Units

DEPENDENCY_EDGES = ("causal", "spawn", "message", "tool_dependency", "return", "aggregate", "safety_flow")
EXACT_MAX_PLAYERS = 12
#: bytes of coalition masks sampled Shapley builds at once
MASK_BYTES = 64 << 20


class Game:
    """v(coalition) for boolean masks over ``players``; ``batch`` evaluates many masks at once."""

    players: list[str]

    def batch(self, masks: np.ndarray) -> np.ndarray:  # masks: (C, n_players) bool
        return np.array([self(m) for m in masks], dtype=np.float64)

    def __call__(self, mask: np.ndarray) -> float:
        return float(self.batch(np.asarray(mask, dtype=bool)[None, :])[0])


class FnGame(Game):
    """A game from a plain callable ``frozenset[str] -> float`` (closed-form games, user values)."""

    def __init__(self, players: list[str], v: Callable[[frozenset[str]], float]) -> None:
        self.players, self.v = list(players), v

    def __call__(self, mask: np.ndarray) -> float:
        return float(self.v(frozenset(p for p, m in zip(self.players, mask, strict=True) if m)))


def default_event_score(trace: Trace, error_penalty: float = 1.0) -> np.ndarray:
    out = np.zeros(len(trace.events))
    for i, e in enumerate(trace.events):
        v = num(attr(e, "event_reward"))
        out[i] = v if v is not None else (-error_penalty if e.status == "error" else 0.0)
    return out


class RemovalGame(Game):
    """The default game of the module docstring, vectorised over coalitions."""

    def __init__(
        self,
        trace: Trace,
        units: Units,
        *,
        channel: str = "team",
        event_scores: Mapping[str, float] | None = None,
        error_penalty: float = 1.0,
        propagate: bool = True,
    ) -> None:
        ev = trace.events
        n = len(ev)
        self.players = list(units.ids)
        pidx = {u: k for k, u in enumerate(self.players)}
        self.player_of = np.array([pidx.get(k, -1) for k in units.keys], dtype=np.int64)
        index = {e.id: i for i, e in enumerate(ev)}
        preds: list[list[int]] = [[] for _ in range(n)]
        succ = np.zeros(n, dtype=bool)
        for x in trace.edges:
            if x.type in DEPENDENCY_EDGES:
                preds[index[x.dst]].append(index[x.src])
                succ[index[x.src]] = True
        self.preds = preds
        self.order = TraceGraph(trace).topo_order.tolist()
        has_dep = any(preds)
        self.root = np.array([not p or not propagate for p in preds], dtype=bool)
        if has_dep:
            by_time = sorted(range(n), key=lambda i: (ev[i].t, i))
            sinks = [i for i in by_time if not succ[i] and preds[i]]
            terminal = sinks[-1] if sinks else by_time[-1]
            anc = np.zeros(n, dtype=bool)
            stack = [terminal]
            while stack:
                v = stack.pop()
                if not anc[v]:
                    anc[v] = True
                    stack.extend(preds[v])
        else:
            anc = np.ones(n, dtype=bool)
        self.anc = anc
        self.R = float(channel_value(trace.rewards, channel) or 0.0)
        s = default_event_score(trace, error_penalty)
        if event_scores is not None:
            s = np.array([event_scores.get(e.id, 0.0) for e in ev], dtype=np.float64)
        self.score = s

    def _kept_packed(self, masks: np.ndarray) -> np.ndarray:
        """Survival of each event (rows) for each coalition, bit-packed along the coalition axis."""
        masks = np.asarray(masks, dtype=bool)
        pm = np.packbits(masks.T, axis=1)  # (n_players, ceil(C/8))
        full = np.packbits(np.ones(masks.shape[0], dtype=bool))
        kept = np.empty((len(self.player_of), len(full)), dtype=np.uint8)
        player_of, root, preds = self.player_of, self.root, self.preds
        for i in self.order:
            p = player_of[i]
            inc = pm[p] if p >= 0 else full
            pr = preds[i]
            if root[i]:
                kept[i] = inc
            elif len(pr) == 1:
                np.bitwise_and(inc, kept[pr[0]], out=kept[i])
            else:
                np.bitwise_and(inc, np.bitwise_or.reduce(kept[pr], axis=0), out=kept[i])
        return kept

    def kept(self, masks: np.ndarray) -> np.ndarray:
        """(n_events, C) survival matrix for coalition masks (C, n_players)."""
        c = np.asarray(masks).shape[0]
        return np.unpackbits(self._kept_packed(masks), axis=1, count=c).astype(bool)

    def batch(self, masks: np.ndarray) -> np.ndarray:
        n_anc = max(int(self.anc.sum()), 1)
        w = self.R * self.anc / n_anc + self.score  # v is linear in the surviving events
        nz = np.nonzero(w)[0]
        c = np.asarray(masks).shape[0]
        if not len(nz):
            return np.zeros(c)
        k = np.unpackbits(self._kept_packed(masks)[nz], axis=1, count=c)
        return w[nz] @ k


GameFactory = Callable[[Trace, Units], Game]


def removal_game(**options: object) -> GameFactory:
    """A factory for :class:`RemovalGame` with fixed options (channel, event_scores, error_penalty)."""
    return lambda trace, units: RemovalGame(trace, units, **options)  # type: ignore[arg-type]


def evaluate(game: Game, masks: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """game.batch over many coalitions in chunks, so memory stays bounded on long traces."""
    return np.concatenate([game.batch(masks[i : i + chunk]) for i in range(0, len(masks), chunk)])


class ShapleyResult(msgspec.Struct):
    values: dict[str, float]
    stderr: dict[str, float]
    exact: bool
    evaluations: int
    v_all: float
    v_empty: float


def shapley(
    game: Game, *, samples: int = 256, seed: int = 0, exact_max: int = EXACT_MAX_PLAYERS
) -> ShapleyResult:
    """Shapley values: exact over all 2^n coalitions for n <= exact_max, else permutation sampling
    (``samples`` permutations, antithetic pairs) with the standard error of each estimate."""
    n = len(game.players)
    full, empty = np.ones((1, n), bool), np.zeros((1, n), bool)
    v_all, v_empty = float(game.batch(full)[0]), float(game.batch(empty)[0])
    if n == 0:
        return ShapleyResult(values={}, stderr={}, exact=True, evaluations=2, v_all=v_all, v_empty=v_empty)
    if n <= exact_max:
        return _exact(game, n, v_all, v_empty)
    rng = np.random.default_rng(seed)
    m = max(2, samples + samples % 2)
    perms = np.empty((m, n), dtype=np.int64)
    for k in range(0, m, 2):
        perms[k] = rng.permutation(n)
        perms[k + 1] = perms[k][::-1]  # antithetic: reversed order lowers variance
    vals = np.empty((m, n + 1))
    # the prefixes of g permutations at a time: (g, n+1, n) masks, at most MASK_BYTES (all m at
    # once took m*n*n bytes: 24 GiB for 10,000 agents)
    g = max(1, min(m, MASK_BYTES // ((n + 1) * n)))
    for k in range(0, m, g):
        part = perms[k : k + g]
        masks = np.zeros((len(part), n + 1, n), dtype=bool)
        for j in range(n):
            masks[:, j + 1] = masks[:, j]
            masks[np.arange(len(part)), j + 1, part[:, j]] = True
        vals[k : k + g] = evaluate(game, masks.reshape(-1, n)).reshape(len(part), n + 1)
    marg = np.empty((m, n))
    marg[np.arange(m)[:, None], perms] = np.diff(vals, axis=1)
    pair = 0.5 * (marg[0::2] + marg[1::2])  # independent antithetic pairs
    phi = pair.mean(axis=0)
    se = pair.std(axis=0, ddof=1) / math.sqrt(len(pair)) if len(pair) > 1 else np.full(n, math.inf)
    return ShapleyResult(
        values=dict(zip(game.players, phi.tolist(), strict=True)),
        stderr=dict(zip(game.players, se.tolist(), strict=True)),
        exact=False,
        evaluations=m * (n + 1),
        v_all=v_all,
        v_empty=v_empty,
    )


def _exact(game: Game, n: int, v_all: float, v_empty: float) -> ShapleyResult:
    ints = np.arange(1 << n, dtype=np.int64)
    masks = ((ints[:, None] >> np.arange(n)) & 1).astype(bool)
    v = evaluate(game, masks)
    size = masks.sum(axis=1)
    w = np.array([math.factorial(s) * math.factorial(n - s - 1) / math.factorial(n) for s in range(n)])
    phi = np.zeros(n)
    for i in range(n):
        without = ~masks[:, i]
        s_idx = ints[without]
        phi[i] = float(np.sum(w[size[without]] * (v[s_idx | (1 << i)] - v[s_idx])))
    return ShapleyResult(
        values=dict(zip(game.players, phi.tolist(), strict=True)),
        stderr=dict.fromkeys(game.players, 0.0),
        exact=True,
        evaluations=1 << n,
        v_all=v_all,
        v_empty=v_empty,
    )


def leave_one_out(game: Game) -> dict[str, float]:
    """Difference rewards with a null default action: D_i = v(N) - v(N \\ {i})."""
    n = len(game.players)
    masks = np.ones((n + 1, n), dtype=bool)
    masks[np.arange(1, n + 1), np.arange(n)] = False
    v = evaluate(game, masks)
    return {p: float(v[0] - v[k + 1]) for k, p in enumerate(game.players)}


__all__ = [
    "DEPENDENCY_EDGES",
    "EXACT_MAX_PLAYERS",
    "FnGame",
    "Game",
    "RemovalGame",
    "ShapleyResult",
    "leave_one_out",
    "removal_game",
    "shapley",
]
