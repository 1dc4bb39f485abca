"""Credit methods x units. Each method maps traces to one number per unit; :func:`assign_credit`
writes it onto every event of the unit as ``event.credit["<method>/<unit>"]``.

Methods (spec §4.2; R = ``rewards[channel]``, eps = 1e-6, std is the unbiased one):

* ``broadcast``: A_u = R - b for every unit (b = 0: Agent Lightning's identical assignment;
  ``baseline="mean"``: b = mean R over traces of the same task, MAPoRL-style shared baseline).
* ``grpo``: A = (R - mean_task R) / (std_task R + eps), broadcast to all units.
* ``drmas``: Dr. MAS agent-wise normalisation. Each unit is a sample of its agent k (its role at
  the role level); group = task x k; A = (R - mu_k) / (sigma_k + eps). ``reward="agent"`` uses
  the R2 channel ``agent/<k>`` instead of R; ``variant="drgrpo"`` gives A = R - mu_k.
* ``loo`` / ``difference``: D_u = v(N) - v(N \\ {u}) under a coalition game (default: game.py).
* ``shapley``: exact up to 12 players, else permutation sampling with a standard error.
* ``c3``: counterfactual credit on the prefix tree of same-task traces (C3, arXiv 2603.06859).
* ``coma``: A_u = Q(u) - sum_u' pi(u') Q(u') from a value function over the unit's alternatives.

Singleton groups (grpo, drmas) use mu = 0, sigma = 1 (Dr. MAS code convention; we apply it to
GRPO too). The residual unit ``~rest`` gets the broadcast signal (broadcast, grpo), v(no players)
(loo, shapley) or 0 (drmas, c3, coma).

**Exact partition** (``partition=True``, spec §4.3): the credits of the units of a trace, weighted
by unit size (tokens at the token level, else 1) and the residual included, sum exactly to a
target: R for loo/shapley (the residual R - sum is spread equally over units and reported in the
metadata), and for broadcast/grpo the broadcast signal is split equally instead of copied. It is
refused for drmas, c3 and coma, whose signals have no trace-level total.
"""

from __future__ import annotations

import inspect
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from hashlib import blake2b
from typing import Any

import msgspec
import numpy as np

from ..core.access import attr, num
from ..core.errors import OrchestraceError
from ..core.model import Trace
from ..core.plugins import hook_number
from ..reward.spec import channel_value
from .game import Game, GameFactory, RemovalGame, leave_one_out, shapley
from .units import REST, Units, unit_keys

METHODS = ("broadcast", "grpo", "drmas", "loo", "difference", "shapley", "c3", "coma")

#: what the residual unit ``~rest`` (the events in no unit of a level) is credited, per method
REST_CREDIT = {
    **dict.fromkeys(("broadcast", "grpo"), "the signal every unit gets (split equally under --partition)"),
    **dict.fromkeys(
        ("loo", "difference", "shapley"), "v(no units): what the trace is worth with every unit removed"
    ),
    **dict.fromkeys(("drmas", "c3", "coma"), "0"),
}
EPS = 1e-6
_BROADCAST = ("broadcast", "grpo")
#: methods whose credit of a trace depends on that trace alone (broadcast too, without a baseline)
PER_TRACE = ("loo", "difference", "shapley", "coma")
_ADDITIVE = ("loo", "difference", "shapley")

QFn = Callable[[Trace, Units, str], float]
ComaFn = Callable[[Trace, Units, str], "tuple[float, list[tuple[float, float]]] | None"]


class UnitCredit(msgspec.Struct):
    """Raw output of a method for one trace: signal per unit id (``~rest`` included when present)."""

    values: dict[str, float]
    info: dict[str, Any] = msgspec.field(default_factory=dict)


def reward_of(trace: Trace, channel: str) -> float:
    """``rewards[channel]``; a renamed channel is found under either name (``verifier`` is ``judge``)."""
    value = channel_value(trace.rewards, channel)
    if value is None:
        raise OrchestraceError(
            "OT411", f"trace {trace.trace_id!r} has no rewards.{channel}; run `orchestrace reward` first"
        )
    return float(value)


def normalise(values: Sequence[float]) -> tuple[float, float]:
    """(mu, sigma) with the unbiased std; a singleton group gives (0, 1)."""
    if len(values) < 2:
        return 0.0, 1.0
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.mean()), float(arr.std(ddof=1))


def _by_task(traces: Sequence[Trace]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, tr in enumerate(traces):
        groups[tr.task_id].append(i)
    return groups


def _all_units(units: Units, value: float) -> dict[str, float]:
    out = dict.fromkeys(units.ids, value)
    if REST in units.keys:
        out[REST] = value
    return out


# ------------------------------------------------------------------ group-relative methods


def m_broadcast(traces, units, *, channel="team", baseline="none", **_):
    rs = [reward_of(t, channel) for t in traces]
    b = [0.0] * len(traces)
    if baseline == "mean":
        for idx in _by_task(traces).values():
            m = float(np.mean([rs[i] for i in idx]))
            for i in idx:
                b[i] = m
    elif baseline != "none":
        raise OrchestraceError("OT412", f"unknown broadcast baseline {baseline!r} (none, mean)")
    return [
        UnitCredit(_all_units(u, r - bi), {"signal": r - bi}) for u, r, bi in zip(units, rs, b, strict=True)
    ]


def m_grpo(traces, units, *, channel="team", eps=EPS, **_):
    rs = [reward_of(t, channel) for t in traces]
    adv = [0.0] * len(traces)
    for idx in _by_task(traces).values():
        mu, sd = normalise([rs[i] for i in idx])
        for i in idx:
            adv[i] = (rs[i] - mu) / (sd + eps)
    return [UnitCredit(_all_units(u, a), {"signal": a}) for u, a in zip(units, adv, strict=True)]


def _agent_key(u: Units, uid: str) -> str:
    return uid if u.level in ("agent", "role", "team") else u.owner[uid]


def m_drmas(traces, units, *, channel="team", reward="team", variant="drmas", eps=EPS, **_):
    if reward not in ("team", "agent"):
        raise OrchestraceError("OT412", f"unknown drmas reward {reward!r} (team, agent)")
    if variant not in ("drmas", "drgrpo"):
        raise OrchestraceError("OT412", f"unknown drmas variant {variant!r} (drmas, drgrpo)")
    rows: dict[tuple[str, str], list[tuple[int, str, float]]] = defaultdict(list)
    for i, (tr, u) in enumerate(zip(traces, units, strict=True)):
        for uid in u.ids:
            k = _agent_key(u, uid)
            r = reward_of(tr, f"agent/{k}") if reward == "agent" else reward_of(tr, channel)
            rows[(tr.task_id, k)].append((i, uid, r))
    out = [UnitCredit({REST: 0.0} if REST in u.keys else {}) for u in units]
    for group in rows.values():
        mu, sd = normalise([r for _, _, r in group])
        for i, uid, r in group:
            out[i].values[uid] = r - mu if variant == "drgrpo" else (r - mu) / (sd + eps)
    return out


# ------------------------------------------------------------------ counterfactual methods


def _game(trace: Trace, u: Units, game: GameFactory | None, channel: str) -> Game:
    if game is not None:
        return game(trace, u)
    reward_of(trace, channel)  # the removal game's R: a channel the trace lacks is an error, not 0
    return RemovalGame(trace, u, channel=channel)


def m_loo(traces, units, *, channel="team", game=None, **_):
    out = []
    for tr, u in zip(traces, units, strict=True):
        g = _game(tr, u, game, channel)
        vals = leave_one_out(g)
        if REST in u.keys:
            vals[REST] = g(np.zeros(len(g.players), dtype=bool))
        out.append(UnitCredit(vals))
    return out


def m_shapley(traces, units, *, channel="team", game=None, samples=256, seed=0, **_):
    out = []
    for k, (tr, u) in enumerate(zip(traces, units, strict=True)):
        res = shapley(_game(tr, u, game, channel), samples=samples, seed=seed + k)
        vals = dict(res.values)
        if REST in u.keys:
            vals[REST] = res.v_empty
        info = {"exact": res.exact, "evaluations": res.evaluations}
        if not res.exact:
            info["stderr"] = res.stderr
        out.append(UnitCredit(vals, info))
    return out


def _unit_signature(tr: Trace, u: Units, members: list[int], uid: str) -> str:
    """Identity of a unit for prefix sharing: owner, role and the content (or ref, or ids) of its events."""
    h = blake2b(digest_size=12)
    h.update(u.owner[uid].encode())
    for i in members:
        e = tr.events[i]
        body = e.content if e.content is not None else e.content_ref if e.content_ref is not None else e.id
        h.update(b"\x00" + (e.role or "").encode() + b"\x01" + body.encode())
    return h.hexdigest()


def m_c3(traces, units, *, channel="team", q=None, variant="reward_only", alpha=1.0, **_):
    """C3: node value = mean leaf reward of its subtree; A = value - LOO over siblings (same parent
    prefix, same role); a singleton sibling group gets A = 0. The tree is rebuilt from the traces:
    two traces share a node at depth d when their first d+1 units have the same signature."""
    if variant not in ("reward_only", "value_only", "value_assisted"):
        raise OrchestraceError("OT412", f"unknown c3 variant {variant!r}")
    if variant != "reward_only" and q is None:
        raise OrchestraceError("OT412", f"c3 variant {variant!r} needs a value function q")
    out = [UnitCredit({REST: 0.0} if REST in u.keys else {}) for u in units]
    for idx in _by_task(traces).values():
        paths: dict[int, list[tuple[str, str]]] = {}  # trace -> [(prefix key, unit id)]
        leaves: dict[str, list[float]] = defaultdict(list)
        mems = {i: units[i].members() for i in idx}
        for i in idx:
            u, mem = units[i], mems[i]
            prefix: list[str] = []
            paths[i] = []
            for uid in u.ids:
                prefix.append(_unit_signature(traces[i], u, mem[uid], uid))
                key = "/".join(prefix)
                paths[i].append((key, uid))
                leaves[key].append(reward_of(traces[i], channel))
        node_r = {k: float(np.mean(v)) for k, v in leaves.items()}
        node_q: dict[str, float] = {}
        if q is not None:
            for i in idx:
                for key, uid in paths[i]:
                    if key not in node_q:
                        node_q[key] = hook_number(q(traces[i], units[i], uid), q, traces[i].trace_id, "OT401")
        siblings: dict[tuple[str, str], set[str]] = defaultdict(set)
        for i in idx:
            for key, uid in paths[i]:
                parent = key.rsplit("/", 1)[0] if "/" in key else ""
                siblings[(parent, traces[i].events[mems[i][uid][0]].role or "")].add(key)
        adv: dict[str, float] = {}
        for group in siblings.values():
            keys = sorted(group)
            n = len(keys)
            for k in keys:
                if n == 1:
                    adv[k] = 0.0
                    continue

                def loo(vals: dict[str, float], k=k, keys=keys, n=n) -> float:
                    return (sum(vals[j] for j in keys) - vals[k]) / (n - 1)

                if variant == "reward_only":
                    adv[k] = node_r[k] - loo(node_r)
                elif variant == "value_only":
                    adv[k] = node_q[k] - loo(node_q)
                else:
                    adv[k] = node_r[k] - ((1 - alpha) * loo(node_r) + alpha * loo(node_q))
        for i in idx:
            for key, uid in paths[i]:
                out[i].values[uid] = adv[key]
    return out


def _q_of(value: Any, channel: str) -> float | None:
    """A recorded Q-value for ``channel``: an object keys Q by reward channel; a plain number is
    the default channel's (``team``), so another ``--channel`` does not read it as its own."""
    if isinstance(value, dict):
        return num(value.get(channel))
    return num(value) if channel == "team" else None


def _q_from_attrs(
    trace: Trace, members: list[int], channel: str = "team"
) -> tuple[float, list[tuple[float, float]]] | None:
    for i in members:
        e = trace.events[i]
        qv, alts = _q_of(attr(e, "q"), channel), attr(e, "q_alternatives")
        if qv is None or not isinstance(alts, list):
            continue
        pairs = [_alternative(a, channel) for a in alts]
        if all(pair is not None for pair in pairs):  # else: no usable Q here
            return qv, pairs  # type: ignore[return-value]
    return None


def _alternative(a: Any, channel: str) -> tuple[float, float] | None:
    """(pi, Q) of one of ``attrs.q_alternatives``: ``{"p": .., "q": ..}`` or ``[p, q]``; None when
    malformed (a missing key or a string there was an internal error)."""
    p, qa = (
        (a.get("p"), a.get("q"))
        if isinstance(a, dict)
        else a
        if isinstance(a, list) and len(a) == 2
        else (None, None)
    )
    p, qa = num(p), _q_of(qa, channel)
    return None if p is None or qa is None else (p, qa)


def default_coma_q(
    trace: Trace, u: Units, uid: str, channel: str = "team"
) -> tuple[float, list[tuple[float, float]]] | None:
    """Q of the taken action and (pi, Q) of each alternative, read from the unit's first event with
    ``attrs.q`` and ``attrs.q_alternatives`` (a list of ``{"p": ..., "q": ...}`` or ``[p, q]``);
    a Q may be an object keyed by reward channel (``{"team": 0.4, "verifier": 0.9}``)."""
    return _q_from_attrs(trace, u.members()[uid], channel)


def m_coma(traces, units, *, channel="team", q=None, **_):
    out = []
    for tr, u in zip(traces, units, strict=True):
        mem = u.members() if q is None else {}
        vals = {REST: 0.0} if REST in u.keys else {}
        missing = 0
        for uid in u.ids:
            res = _q_from_attrs(tr, mem[uid], channel) if q is None else _q_result(q, q(tr, u, uid), tr)
            if res is None:
                vals[uid] = 0.0
                missing += 1
            else:
                qv, alts = res
                vals[uid] = qv - sum(p * qa for p, qa in alts)
        out.append(UnitCredit(vals, {"units_without_q": missing}))
    return out


def _q_result(q: ComaFn, res: Any, trace: Trace) -> tuple[float, list[tuple[float, float]]] | None:
    """A coma ``q`` hook's answer checked: None, or (Q, [(pi, Q), ...]) of finite numbers (a bare
    number was an internal error unpacking it)."""
    if res is None:
        return None
    if isinstance(res, tuple | list) and len(res) == 2 and isinstance(res[1], list | tuple):
        alts = [a for a in res[1] if isinstance(a, tuple | list) and len(a) == 2]
        if len(alts) == len(res[1]):
            tid = trace.trace_id
            return hook_number(res[0], q, tid, "OT401"), [
                (hook_number(p, q, tid, "OT401"), hook_number(qa, q, tid, "OT401")) for p, qa in alts
            ]
    name = getattr(q, "ref", None) or getattr(q, "__name__", repr(q))
    raise OrchestraceError(
        "OT401",
        f"{name!r} returned {res!r:.80} for trace {trace.trace_id!r}: expected None or (Q, [(pi, Q), ...])",
    )


_IMPL = {
    "broadcast": m_broadcast,
    "grpo": m_grpo,
    "drmas": m_drmas,
    "loo": m_loo,
    "difference": m_loo,
    "shapley": m_shapley,
    "c3": m_c3,
    "coma": m_coma,
}


def check_method_options(method: str, options: Iterable[str]) -> None:
    """OT413 for an option the method does not read. ``compute_credit`` takes any method's options
    (one set for every method); a user naming an option for one method (``credit -m grpo --opt
    variant=drgrpo``) meant it for that one, and it was ignored without a word."""
    if method not in _IMPL:
        return  # compute_credit names the unknown method
    reads = {
        name
        for name, p in inspect.signature(_IMPL[method]).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "channel"
    }
    if unread := sorted(set(options) - reads):
        raise OrchestraceError(
            "OT413",
            f"{method} does not read option(s) {', '.join(map(repr, unread))}; it reads: "
            f"{', '.join(sorted(reads)) or 'none'}",
        )


def option_names() -> frozenset[str]:
    """Every option some credit method reads (each ignores the others', so a caller can pass one set
    to any method): what a typo in an option name is checked against."""
    return frozenset(
        name
        for fn in _IMPL.values()
        for name, p in inspect.signature(fn).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ) | {"partition"}


def _check_numbers(options: dict[str, Any]) -> None:
    """``eps`` must be a finite number > 0 (0 or below divided by zero where a group's rewards
    are equal: an internal error) and ``alpha`` finite (NaN made every c3 credit NaN)."""
    for name, low in (("eps", 0.0), ("alpha", None)):
        if name not in options:
            continue
        v = options[name]
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        if not ok or (low is not None and not v > low):
            need = "a finite number > 0" if low is not None else "a finite number"
            raise OrchestraceError("OT412", f"credit option {name} must be {need}, got {v!r}")


# ------------------------------------------------------------------ partition and writing


def _partition(method: str, u: Units, uc: UnitCredit, target: float) -> float:
    """Make sum_u size_u * c_u == target in place; returns the residual before the fix."""
    size = {**u.size, REST: 1.0}
    names = list(uc.values)
    if method in _BROADCAST:
        total = sum(size[k] for k in names)
        signal = uc.info["signal"]
        for k in names:
            uc.values[k] = signal / total
        return float(signal - signal * total)  # target - sum when the signal is copied to every unit
    resid = target - sum(uc.values.values())
    for k in names:
        uc.values[k] += resid / len(names)
    return float(resid)


def compute_credit(
    traces: Sequence[Trace],
    method: str,
    unit: str,
    *,
    channel: str = "team",
    partition: bool = False,
    **options: Any,
) -> list[tuple[Units, UnitCredit]]:
    """Per trace: the units and the credit per unit id (per token at the token level)."""
    if method not in _IMPL:
        raise OrchestraceError("OT413", f"unknown credit method {method!r}; known: {', '.join(METHODS)}")
    if unknown := sorted(set(options) - option_names()):  # a typo must not fall back to a default
        raise OrchestraceError(
            "OT413",
            f"unknown credit option {', '.join(map(repr, unknown))}; known: {', '.join(sorted(option_names()))}",
        )
    _check_numbers(options)
    if partition and method not in (*_BROADCAST, *_ADDITIVE):
        raise OrchestraceError(
            "OT414", f"exact partition is not defined for {method!r} (no trace-level total)"
        )
    units = [unit_keys(t, unit) for t in traces]
    raw = _IMPL[method](traces, units, channel=channel, **options)
    for tr, u, uc in zip(traces, units, raw, strict=True):
        if partition:
            target = uc.info.get("signal", 0.0) if method in _BROADCAST else reward_of(tr, channel)
            uc.info["target"] = target
            uc.info["residual"] = _partition(method, u, uc, target)
        if unit == "token" and method in _ADDITIVE:
            for k in u.ids:
                uc.values[k] /= u.size[k]
    return list(zip(units, raw, strict=True))


def assign_credit(
    traces: Sequence[Trace],
    method: str,
    unit: str,
    *,
    channel: str = "team",
    partition: bool = False,
    inplace: bool = False,
    **options: Any,
) -> list[Trace]:
    """Traces with ``credit["<method>/<unit>"]`` on every event and a summary in
    ``metadata.credit["<method>/<unit>"]`` (unit values, target and residual when partitioned).

    Copies by default; ``inplace=True`` updates the given traces (faster; for callers that own them)."""
    key = f"{method}/{unit}"
    res = compute_credit(traces, method, unit, channel=channel, partition=partition, **options)
    out = []
    for tr, (u, uc) in zip(traces, res, strict=True):
        vals = uc.values
        if inplace:
            for e, k in zip(tr.events, u.keys, strict=True):
                e.credit = {**(e.credit or {}), key: float(vals.get(k, 0.0))}
        else:
            tr = msgspec.structs.replace(
                tr,
                events=[
                    msgspec.structs.replace(e, credit={**(e.credit or {}), key: float(vals.get(k, 0.0))})
                    for e, k in zip(tr.events, u.keys, strict=True)
                ],
            )
        summary = {"units": dict(vals), "channel": channel, "partition": partition, **uc.info}
        if unit == "token":
            summary["sizes"] = dict(u.size)
        meta = dict(tr.metadata or {})
        meta["credit"] = {**(meta.get("credit") or {}), key: summary}
        tr.metadata = meta
        out.append(tr)
    return out


def streamable(method: str, **options: Any) -> bool:
    """Can ``iter_credit`` handle one trace at a time (no group baseline across traces)?"""
    return method in PER_TRACE or (method == "broadcast" and options.get("baseline", "none") == "none")


def iter_credit(
    traces: Iterable[Trace],
    method: str,
    units: Sequence[str],
    *,
    channel: str = "team",
    partition: bool = False,
    first: int = 0,
    **options: Any,
) -> Iterator[Trace]:
    """``assign_credit`` at each unit in turn, over a stream of traces, updating them in place.

    Methods that compare traces (GRPO, Dr. MAS, C3, a broadcast baseline) need the whole set, which
    is then read first; the others run one trace at a time with the same results as one batch call
    (sampled Shapley gets seed + the trace's position, as in a batch). ``first``: the position of
    the stream's first trace in a larger one (a part of a stream credited elsewhere, e.g. a Ray
    task, gets the seeds of the whole stream).
    """
    if not units:  # "-u ," credited nothing and exited 0
        raise OrchestraceError("OT410", "no credit unit given")
    if not streamable(method, **options):
        batch = list(traces)
        for unit in units:
            batch = assign_credit(
                batch, method, unit, channel=channel, partition=partition, inplace=True, **options
            )
        yield from batch
        return
    seed = int(options.pop("seed", 0))
    for k, tr in enumerate(traces):
        for unit in units:
            (tr,) = assign_credit(
                [tr],
                method,
                unit,
                channel=channel,
                partition=partition,
                inplace=True,
                seed=seed + first + k,
                **options,
            )
        yield tr


def credit_at(
    item: tuple[int, Trace],
    method: str,
    units: Sequence[str],
    channel: str,
    partition: bool,
    options: dict[str, Any],
) -> Trace:
    """Credit of the trace at position k of a stream, alone (a parallel task): the same values as
    ``iter_credit`` over the whole stream, for a method that is ``streamable``."""
    k, trace = item
    return next(iter_credit([trace], method, units, channel=channel, partition=partition, first=k, **options))


def partition_gap(trace: Trace, key: str, target: float | None = None) -> float:
    """sum over units of size * credit minus the target (R by default), read back from the events.

    Every event of a unit must carry the same credit; a violation raises OrchestraceError."""
    method, _, unit = key.partition("/")
    u = unit_keys(trace, unit)
    seen: dict[str, float] = {}
    for e, k in zip(trace.events, u.keys, strict=True):
        c = (e.credit or {}).get(key)
        if c is None:
            raise OrchestraceError("OT415", f"event {e.id!r} has no credit {key!r}")
        if k in seen and abs(seen[k] - c) > 1e-9:
            raise OrchestraceError("OT415", f"unit {k!r} carries two different credits {seen[k]} and {c}")
        seen[k] = c
    size = {**u.size, REST: 1.0}
    if target is None:
        target = float(
            (trace.metadata or {})
            .get("credit", {})
            .get(key, {})
            .get("target", trace.rewards.get("team", 0.0))
        )
    return sum(size[k] * c for k, c in seen.items()) - target
