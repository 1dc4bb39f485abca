"""Delegate (O2: routing and cascades): train and evaluate which model answers, on RouteLLM / Alpaca outcomes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from ...core.errors import OrchestraceError
from ..rl import check_target_kl
from ..rl.rollouts import NumpyPolicy, run_episode
from ..rl.train_gym import train_policy
from ..scalar_log import log_scalars
from .protocol import (
    SPLIT_SEED,
    AlgoSettings,
    MeanCI,
    Trained,
    algo_kwargs,
    need_choice,
    need_numbers,
    paired_summary,
    policy_number,
    split,
    summary,
)

if TYPE_CHECKING:
    from ..datasets import RouteData
    from ..envs.delegate import CascadeEnv, DelegateEnv


class DelegateMethod(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One router on the held-out queries (``quality_per_dollar`` None: it spent nothing;
    ``share``: how often it picks each model, for the one-call routers only)."""

    reward: MeanCI
    quality: float
    usd_per_1k_queries: float
    quality_per_dollar: float | None
    calls_per_query: float
    share: dict[str, float] | None = None


class VsBestSingle(msgspec.Struct):
    """The learned router against the single model best on the training split (None: a zero price)."""

    quality_diff: float
    cost_ratio: float | None
    quality_per_dollar_ratio: float | None


class DelegateReport(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Every router on the held-out queries; with a learned router, learned - the best single model
    and learned - the threshold router in reward, paired over the queries (absent without one)."""

    lam: float = msgspec.field(name="lambda")
    cost_scale_usd: float
    queries_heldout: int
    queries_train: int
    best_single_model: str
    threshold_tau: float
    methods: dict[str, DelegateMethod]
    learned_minus_single: MeanCI | None = None
    learned_minus_threshold_router: MeanCI | None = None
    vs_best_single: VsBestSingle | None = None


class DelegateEval(DelegateReport, kw_only=True, omit_defaults=True):
    """``eval delegate``."""

    env: str
    mode: str
    source: str
    seed: int
    models: list[str]
    price_source: dict[str, str]


class DelegateTraining(DelegateReport, kw_only=True, omit_defaults=True):
    """``train delegate``; ``files_written`` once :func:`~.common.write_trained` saved it."""

    env: str
    mode: str
    source: str
    seed: int
    split_seed: int
    models: list[str]
    price_source: dict[str, str]
    train_iters: int
    learning_curve: list[float]
    algo: AlgoSettings
    files_written: list[str] | None = None


class DelegateLoggedTraining(msgspec.Struct, kw_only=True, omit_defaults=True):
    """``train delegate --logged``: the runs' mean reward and the importance-weighted estimate of the
    new greedy router's (None: no run agrees with it), how often it picks each model."""

    env: str
    mode: str
    runs: int
    models: list[str]
    lam: float = msgspec.field(name="lambda")
    cost_scale_usd: float
    sampled_runs: int
    logged_reward: float
    snips_reward_new_router: float | None
    runs_agreeing_with_new_router: int
    share: dict[str, float]
    files_written: list[str] | None = None


def _route_methods(
    train: RouteData, test: RouteData, lam: float, scale: float
) -> tuple[dict[str, np.ndarray], float]:
    """Per-query choices of the one-call baselines on ``test``: each single model, the threshold
    router (tau tuned on train) and the hindsight oracle."""
    from ..envs.delegate import route_rewards, threshold_router

    out: dict[str, np.ndarray] = {}
    for j, m in enumerate(test.models):
        out[f"single:{m}"] = np.full(len(test.ids), j)
    best_tau, best_r = 0.0, -np.inf
    for tau in np.linspace(0.0, 1.0, 41):
        route = threshold_router(train, float(tau))
        r = route_rewards(train, np.array([route(g) for g in train.groups]), lam, scale)[0].mean()
        if r > best_r:
            best_tau, best_r = float(tau), r
    route = threshold_router(train, best_tau)
    out["threshold_router"] = np.array([route(g) for g in test.groups])
    out["oracle"] = (test.quality - lam * test.cost / scale).argmax(axis=1)
    return out, best_tau


def _run_env(
    env: DelegateEnv | CascadeEnv, n: int, choose: Callable[[np.ndarray], int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(reward, quality, cost, calls) per query of a policy played through the env's traces."""
    out = np.zeros((4, n))
    for i in range(n):
        _, _, r, info = run_episode(env, choose, {"query": i})
        out[:, i] = r, info["quality"], info["cost_usd"], info.get("calls", 1)
    return out[0], out[1], out[2], out[3]


def _heldout_figures(env: DelegateEnv | CascadeEnv, n: int) -> Callable[[NumpyPolicy], dict[str, float]]:
    """A router's mean reward, quality and price on the ``n`` held-out queries of ``env``: what
    ``--log`` shows under ``heldout/`` while a router trains."""

    def measure(policy: NumpyPolicy) -> dict[str, float]:
        reward, quality, cost, _ = _run_env(env, n, policy.act)
        return {"reward": float(reward.mean()), "quality": float(quality.mean()),
                "usd_per_1k_queries": float(cost.mean() * 1000)}  # fmt: skip

    return measure


def _delegate_report(train: RouteData, test: RouteData, lam: float, scale: float, policy: NumpyPolicy | None,
                     test_env: DelegateEnv | CascadeEnv, seed: int) -> DelegateReport:  # fmt: skip
    from ..envs.delegate import CascadeEnv, route_rewards, rule_cascade

    choices, tau = _route_methods(train, test, lam, scale)
    per = {k: (*route_rewards(test, v, lam, scale), np.ones(len(v))) for k, v in choices.items()}
    shares = {k: {m: float(np.mean(v == j)) for j, m in enumerate(test.models)} for k, v in choices.items()}
    if isinstance(test_env, CascadeEnv):
        per["rule_cascade"] = _run_env(test_env, len(test.ids), rule_cascade)
    if policy is not None:
        per["learned"] = _run_env(test_env, len(test.ids), policy.act)
    train_single = {
        m: route_rewards(train, np.full(len(train.ids), j), lam, scale)[0].mean()
        for j, m in enumerate(train.models)
    }
    best_single = "single:" + max(train_single, key=train_single.get)  # type: ignore[arg-type]
    methods = {
        k: DelegateMethod(
            reward=summary(r, seed),
            quality=float(q.mean()),
            usd_per_1k_queries=float(c.mean() * 1000),
            quality_per_dollar=float(q.mean() / c.mean()) if c.mean() > 0 else None,
            calls_per_query=float(calls.mean()),
            share=shares.get(k),
        )
        for k, (r, q, c, calls) in per.items()
    }
    res = DelegateReport(
        lam=lam, cost_scale_usd=scale, queries_heldout=len(test.ids), queries_train=len(train.ids),
        best_single_model=best_single, threshold_tau=tau, methods=methods,
    )  # fmt: skip
    if "learned" in per:
        lq, lc = per["learned"][1].mean(), per["learned"][2].mean()
        bq, bc = per[best_single][1].mean(), per[best_single][2].mean()
        res = msgspec.structs.replace(
            res,
            learned_minus_single=paired_summary(per["learned"][0], per[best_single][0], seed),
            learned_minus_threshold_router=paired_summary(
                per["learned"][0], per["threshold_router"][0], seed
            ),
            vs_best_single=VsBestSingle(
                float(lq - bq),
                float(lc / bc) if bc > 0 else None,
                float((lq / lc) / (bq / bc)) if lc > 0 and bc > 0 and bq > 0 else None,
            ),
        )
    return res


#: Per-algorithm defaults (``ent_coef`` defaults per mode: 0.02 route, 0.05 cascade). GRPO here
#: is Dr. GRPO (no std division): a group whose answers are all right differs only by price, and
#: dividing by its std would weigh a few cents like a wrong answer.
DELEGATE_ALGO: dict[str, AlgoSettings] = {
    "reinforce": {"lr": 3e-3, "group": 4},
    "ppo": {"lr": 1e-3, "group": 1},
    "grpo": {"lr": 3e-3, "group": 4, "adv_scale": "none", "epochs": 2, "minibatches": 1},
    "exact": {"lr": 3e-3},  # REINFORCE's rate (not tuned)
}


#: The default algorithm per mode: GRPO routes best (it compares the models on the same query;
#: MMLU, lambda 0.1, seeds 0-2: 0.7240, 0.7143, 0.7160 vs REINFORCE 0.7146 on seed 0 and the
#: threshold router 0.7110), REINFORCE cascades best (docs/learn_experiments.md).
DELEGATE_DEFAULT_ALGO = {"route": "grpo", "cascade": "reinforce"}


def train_delegate(
    source: str = "mmlu",
    lam: float = 0.1,
    *,
    seed: int = 0,
    iters: int = 200,
    batch: int = 256,
    algo: str | None = None,
    group: int | None = None,
    ent_coef: float | None = None,
    hidden: Sequence[int] = (64,),
    lr: float | None = None,
    models: Sequence[str] | None = None,
    mode: str = "route",
    data: str | Path | None = None,
    traces: str | Sequence[str] | None = None,
    table: RouteData | None = None,
    target_kl: float | None = None,
    progress: bool = False,
) -> Trained[DelegateTraining]:
    """``traces`` (a glob of route runs, one per query and model: ``envs.delegate_traces``) or
    ``table`` (a ``RouteData``) replace ``source`` as the training data.

    ``mode="route"``: one model per query; ``mode="cascade"`` (GSM8K: needs logged answers):
    ask the cheapest model first and decide from its answer whether to escalate.

    Router trained with ``algo`` (default per mode, :data:`DELEGATE_DEFAULT_ALGO`) on 60% of the queries (REINFORCE and GRPO: each drawn query
    routed ``group`` times, the group mean reward as baseline: the advantage compares models on
    the same query; ``lr``, ``group`` default per algorithm, :data:`DELEGATE_ALGO`); held-out
    comparison with every single model, the cost-threshold router and the hindsight oracle."""
    from ..datasets import ROUTE_SOURCES, load_route
    from ..envs.delegate import CascadeEnv, DelegateEnv

    need_choice("mode", mode, ("route", "cascade"))
    need_numbers(**{"lambda": lam}, iters_count=iters)
    algo = algo or DELEGATE_DEFAULT_ALGO[mode]
    ent = (0.05 if mode == "cascade" else 0.02) if ent_coef is None else ent_coef
    kw = algo_kwargs(DELEGATE_ALGO, algo, lr=lr, group=group, ent_coef=ent, target_kl=target_kl)
    if traces is not None:
        from ..envs.delegate_traces import route_data_from_traces

        full = route_data_from_traces(traces)
    elif table is not None:
        full = table
    else:
        need_choice("source", source, ROUTE_SOURCES)
        full = load_route(source, data, list(models) if models else None)
    if traces is not None or table is not None:
        source = full.name
    if mode == "cascade" and full.responses is None:
        raise OrchestraceError("OT665", f"cascade mode needs logged answers; {source} has none (use gsm8k)")
    tr, te = split(len(full.ids))
    train_d, test_d = full.subset(tr), full.subset(te)
    make = CascadeEnv if mode == "cascade" else DelegateEnv
    env = make(train_d, lam=lam, scale=None)
    scale = env.scale
    held_env = make(test_d, lam=lam, scale=scale)  # its own: the report's env starts fresh, log or not
    res = train_policy(
        algo, env, [{"query": i} for i in range(len(train_d.ids))], env_name="Delegate", iters=iters,
        batch=batch, seed=seed, hidden=hidden, progress=progress, **kw,
        init_bias=(1.0, 0.0) if mode == "cascade" else None,  # cascade: start cheap, accept (P = 0.73)
        extra={"source": source, "lambda": lam, "models": full.models, "cost_scale": scale, "mode": mode},
        heldout=_heldout_figures(held_env, len(test_d.ids)),
    )  # fmt: skip
    suffix = "-cascade" if mode == "cascade" else ""
    test_env = make(test_d, lam=lam, scale=scale)
    r = _delegate_report(train_d, test_d, lam, scale, res.policy, test_env, seed)
    result = DelegateTraining(
        **msgspec.structs.asdict(r), env="Delegate", mode=mode, source=source, seed=seed, split_seed=SPLIT_SEED,
        models=full.models, price_source=full.price_source, train_iters=iters,
        learning_curve=[c["batch_reward"] for c in res.history], algo={"name": algo, **kw},
    )  # fmt: skip
    name = f"delegate-{source}{suffix}"
    return Trained(result, f"{name}-result.json", {name: res.policy})


def train_delegate_logged(
    traces: str | Sequence[str],
    lam: float = 0.1,
    *,
    start: str | Path | None = None,
    epochs: int = 50,
    lr: float = 3e-3,
    clip: float = 0.2,
    hidden: Sequence[int] = (64,),
    seed: int = 0,
    target_kl: float | None = None,
) -> Trained[DelegateLoggedTraining]:
    """A router from route runs as they happened (one model per query: the runs a router took
    live), not from a full outcome table: each run is a logged bandit sample (features, chosen
    model, the chance it had: ``sampled`` decisions carry it, a greedy or default choice had 1),
    reward = quality - lambda x cost / scale (scale: the mean logged price of the priciest model),
    advantage = reward - the runs' mean. ``epochs`` full-batch PPO-clip steps with the recorded
    probabilities as the old policy (``ppo.clipped_update``), from ``start`` (the policy that
    recorded, usually) or a near-uniform router; ``target_kl``: no further step once one's
    approximate KL to the recording policy passed it. Only actions the runs tried can gain: record with
    ``run route --policy delegate=PATH --explore``. Reports the runs' mean reward and the
    self-normalised importance-weighted estimate of the new greedy router's (an estimate, not a
    held-out measurement)."""
    need_numbers(**{"lambda": lam})
    import torch

    from ..envs.delegate_traces import logged_routes
    from ..rl.optim import optimiser
    from ..rl.ppo import clipped_update
    from ..rl.rollouts import Batch, PolicyMeta, mlp, to_numpy

    check_target_kl(target_kl, "ppo")
    models, runs = logged_routes(traces)
    obs = np.stack([r.features for r in runs]).astype(np.float32)
    act = np.array([r.action for r in runs], np.int64)
    mu = np.array([r.prob for r in runs])
    cost = np.array([r.cost_usd for r in runs])
    price = [cost[act == j].mean() for j in range(len(models)) if (act == j).any()]
    scale = float(max(price)) or 1.0
    reward = np.array([r.quality for r in runs]) - lam * cost / scale
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    if start is not None:
        pol0 = NumpyPolicy.load(start, env="Delegate")
        if list(pol0.meta.extra.get("models") or []) != models:
            raise OrchestraceError("OT665", f"the start policy routes among {pol0.meta.extra.get('models')}, "
                                   f"the runs offer {models}", path=str(start))  # fmt: skip
        hidden = pol0.meta.hidden
    meta = PolicyMeta("Delegate", obs.shape[1], len(models), list(hidden), seed,
                      {"algo": "ppo-logged", "lambda": lam, "models": models, "cost_scale": scale, "mode": "route",
                       "runs": len(runs)})  # fmt: skip
    actor = mlp([obs.shape[1], *hidden, len(models)])
    with torch.no_grad():
        if start is not None:
            lin = [m for m in actor if isinstance(m, torch.nn.Linear)]
            for m, (w, b) in zip(lin, pol0.weights, strict=True):
                m.weight.copy_(torch.from_numpy(w))
                m.bias.copy_(torch.from_numpy(b))
        else:
            actor[-1].weight.mul_(0.01)  # near-uniform start
    batch = Batch(obs, act, reward, reward, np.ones(len(runs)), np.zeros(len(runs)), [])
    figures = clipped_update(actor, None, optimiser(actor, None, lr, None), batch, reward - reward.mean(), None,
                   np.random.default_rng(seed), epochs=epochs, minibatches=1, clip=clip, ent_coef=0.0, vf_coef=0.0,
                   norm_adv=False, old_logp=np.log(mu), target_kl=target_kl)  # fmt: skip
    policy = to_numpy(actor, meta)
    greedy = policy.probs(obs).argmax(axis=1)
    w = (greedy == act) / mu  # the new greedy router's importance weights
    res = DelegateLoggedTraining(
        env="Delegate", mode="logged", runs=len(runs), models=models, lam=lam, cost_scale_usd=scale,
        sampled_runs=int((mu < 1.0).sum()), logged_reward=float(reward.mean()),
        snips_reward_new_router=float((w * reward).sum() / w.sum()) if w.sum() > 0 else None,
        runs_agreeing_with_new_router=int((greedy == act).sum()),
        share={m: float(np.mean(greedy == j)) for j, m in enumerate(models)},
    )  # fmt: skip
    # one update, one step of the open log (--log): the runs' reward, the estimate, PPO's figures
    log_scalars(1, {"reward": res.logged_reward, "snips_reward_new_router": res.snips_reward_new_router,
                    **figures}, prefix="train/")  # fmt: skip
    return Trained(res, "delegate-logged-result.json", {"delegate-logged": policy})


def eval_delegate(
    source: str = "mmlu", policy: str | Path | None = None, lam: float | None = None, *, seed: int = 0,
    data: str | Path | None = None,
) -> DelegateEval:  # fmt: skip
    """Held-out comparison; without ``policy`` only the baselines and the oracle are reported."""
    from ..datasets import ROUTE_SOURCES, load_route
    from ..envs.delegate import CascadeEnv, DelegateEnv, cost_scale

    need_choice("source", source, ROUTE_SOURCES)
    need_numbers(**{"lambda": lam})
    pol = NumpyPolicy.load(policy, env="Delegate") if policy is not None else None
    models = pol.meta.extra.get("models") if pol is not None else None
    full = load_route(source, data, models)
    if pol is not None and list(models or []) != full.models:
        raise OrchestraceError("OT665", f"policy routes among {models}, the data has {full.models}")
    lam_ = lam if lam is not None else policy_number(pol, "lambda", 0.1, policy) if pol is not None else 0.1
    tr, te = split(len(full.ids))
    train_d, test_d = full.subset(tr), full.subset(te)
    scale = cost_scale(train_d)
    mode = pol.meta.extra.get("mode", "route") if pol is not None else "route"
    test_env = (CascadeEnv if mode == "cascade" else DelegateEnv)(test_d, lam=lam_, scale=scale)
    r = _delegate_report(train_d, test_d, lam_, scale, pol, test_env, seed)
    return DelegateEval(
        **msgspec.structs.asdict(r), env="Delegate", mode=mode, source=source, seed=seed, models=full.models,
        price_source=full.price_source,
    )  # fmt: skip


# ============================================================================ Swarm
