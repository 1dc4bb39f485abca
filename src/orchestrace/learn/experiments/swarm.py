"""Swarm (O1 spawn width): train and evaluate how many workers to spawn per task DAG stage, single and parallel (PettingZoo)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from ..rl.rollouts import NumpyPolicy, run_episode
from ..rl.train_gym import train_policy
from .protocol import AlgoSettings, MeanCI, Trained, algo_kwargs, need_numbers, paired_summary, summary

if TYPE_CHECKING:
    from ..envs.swarm import SwarmConfig, SwarmEnv, SwarmTask
    from ..envs.swarm_parallel import SwarmParallelEnv
    from ..rl.train_gym import TrainResult

SWARM_TRAIN_SEED, SWARM_TEST_SEED = 0, 1  # task generators: held-out DAGs come from another seed


class SwarmMethod(msgspec.Struct):
    """One spawn rule (or the learned policy) on the held-out DAGs: PARL reward terms, Critical
    Steps over the serial schedule's, the share of DAGs finished within budget."""

    r_perf: MeanCI
    r_parallel: float
    finish_rate: float
    critical_over_serial: MeanCI
    on_budget: float
    spawned_per_stage: float
    critical_steps: float
    serial_critical_steps: float


class SwarmReport(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Every method on the held-out DAGs; with a policy, learned - each baseline
    (:data:`~..envs.swarm.BASELINES`) in r_perf, paired over the same DAGs (absent without one)."""

    tasks_heldout: int
    methods: dict[str, SwarmMethod]
    learned_minus_serial_r_perf: MeanCI | None = None
    learned_minus_one_per_subtask_r_perf: MeanCI | None = None
    learned_minus_max_agents_r_perf: MeanCI | None = None
    learned_minus_k2_r_perf: MeanCI | None = None
    learned_minus_k4_r_perf: MeanCI | None = None
    learned_minus_makespan_heuristic_r_perf: MeanCI | None = None


class SwarmEval(SwarmReport, kw_only=True, omit_defaults=True):
    """``eval swarm``."""

    env: str
    seed: int
    test_task_seed: int


class Anneal(msgspec.Struct):
    """Initial r_parallel (l1) and r_finish (l2) weights, decayed to 0 over the first ``frac`` of training."""

    l1: float
    l2: float
    frac: float


class SwarmTraining(SwarmReport, kw_only=True, omit_defaults=True):
    """``train swarm`` (``train_task_seed`` None: trained on given tasks); ``weights``: (l1, l2)
    every 1/20 of the iterations; ``files_written`` once :func:`~.common.write_trained` saved it."""

    env: str
    seed: int
    train_task_seed: int | None
    train_tasks: int
    test_task_seed: int
    config: SwarmConfig
    train_iters: int
    anneal: Anneal
    algo: AlgoSettings
    learning_curve: list[float]
    weights: list[tuple[float, float]]
    files_written: list[str] | None = None


class SwarmParallelMethod(msgspec.Struct):
    """One per-lead rule (or the shared learned policy) on the held-out tasks of the Parallel Swarm."""

    r_perf: MeanCI
    finish_rate: float
    critical_over_serial: float
    on_budget: float


class SwarmParallelEval(msgspec.Struct, kw_only=True, omit_defaults=True):
    """``eval swarm --parallel``; with a policy, learned - each per-lead rule in r_perf, paired."""

    env: str
    branches: int
    tasks_heldout: int
    methods: dict[str, SwarmParallelMethod]
    learned_minus_makespan_heuristic_r_perf: MeanCI | None = None
    learned_minus_serial_r_perf: MeanCI | None = None
    learned_minus_max_agents_r_perf: MeanCI | None = None


class SwarmParallelTraining(SwarmParallelEval, kw_only=True, omit_defaults=True):
    """``train swarm --parallel``: the held-out evaluation, then how the shared policy was trained."""

    seed: int
    train_task_seed: int
    test_task_seed: int
    config: SwarmConfig
    train_iters: int
    anneal: Anneal
    algo: AlgoSettings
    credit: str
    learning_curve: list[float]
    weights: list[tuple[float, float]]
    files_written: list[str] | None = None


#: A spawn rule: the observation of the stage to decide -> the number of workers.
Choose = Callable[[np.ndarray], int]


def _swarm_eval(
    env: SwarmEnv, n: int, methods: dict[str, Choose], seed: int
) -> dict[str, tuple[SwarmMethod, np.ndarray]]:
    """Every method on held-out tasks 0..n-1 (Critical Steps measured on the trace), with its r_perf per task."""
    from ..envs.swarm import swarm_reward

    out = {}
    for name, choose in methods.items():
        rows = []
        for i in range(n):
            _, _, _, info = run_episode(env, choose, {"task": i})
            m = swarm_reward(info["trace"], parallel_cap=env.cfg.parallel_cap, measure=True)
            rows.append([m["r_perf"], m["r_parallel"], m["r_finish"], m["critical_steps"] / info["serial_critical"],
                         float(not info["late"]), info["spawned"] / info["stages_run"], m["critical_steps"],
                         info["serial_critical"]])  # fmt: skip
        a = np.array(rows)
        method = SwarmMethod(
            r_perf=summary(a[:, 0], seed),
            r_parallel=float(a[:, 1].mean()),
            finish_rate=float(a[:, 2].mean()),
            critical_over_serial=summary(a[:, 3], seed),
            on_budget=float(a[:, 4].mean()),
            spawned_per_stage=float(a[:, 5].mean()),
            critical_steps=float(a[:, 6].mean()),
            serial_critical_steps=float(a[:, 7].mean()),
        )
        out[name] = (method, a[:, 0])
    return out


def _swarm_methods(env: SwarmEnv, policy: NumpyPolicy | None) -> dict[str, Choose]:
    from ..envs.swarm import BASELINES, baseline_ks

    def fixed(name: str) -> Choose:
        def choose(_obs: np.ndarray) -> int:
            ks = baseline_ks(name, env._task, env.cfg)
            return ks[len(env._ks)]

        return choose

    methods: dict[str, Choose] = {} if policy is None else {"learned": policy.act}
    methods.update({b: fixed(b) for b in BASELINES})
    return methods


def _swarm_report(env: SwarmEnv, policy: NumpyPolicy | None, n: int, seed: int) -> SwarmReport:
    from ..envs.swarm import BASELINES

    ev = _swarm_eval(env, n, _swarm_methods(env, policy), seed)
    diffs = {}
    if policy is not None:
        diffs = {
            f"learned_minus_{b}_r_perf": paired_summary(ev["learned"][1], ev[b][1], seed) for b in BASELINES
        }
    return SwarmReport(tasks_heldout=n, methods={k: m for k, (m, _) in ev.items()}, **diffs)


#: Per-algorithm defaults (REINFORCE and GRPO: every drawn DAG played ``group`` times).
SWARM_ALGO: dict[str, AlgoSettings] = {
    "reinforce": {"lr": 1e-2, "group": 8, "ent_coef": 0.1},
    "ppo": {"lr": 3e-3, "group": 1, "ent_coef": 0.1},
    "grpo": {"lr": 3e-3, "group": 8, "ent_coef": 0.1, "adv_scale": "group"},
}


def _swarm_train(env: SwarmEnv | SwarmParallelEnv, algo: str, kw: AlgoSettings, *, seed: int, iters: int, batch: int, l1: float,
                 l2: float, anneal_frac: float, train_tasks: int, progress: bool, extra: dict[str, str | int],
                 heldout: Callable[[NumpyPolicy], dict[str, float]],
                 ) -> tuple[TrainResult, list[tuple[float, float]]]:  # fmt: skip
    """Train on PARL rewards with l1 (r_parallel) and l2 (r_finish) decaying linearly to 0 over the
    first ``anneal_frac`` of the iterations (Swarm and the PettingZoo Parallel Swarm alike);
    ``heldout``: the figures ``--log`` shows under ``heldout/``."""
    from ...reward.schedule import Schedule

    steps = max(1, int(iters * anneal_frac))
    s1 = Schedule(kind="linear", start=l1, end=0.0, steps=steps)
    s2 = Schedule(kind="linear", start=l2, end=0.0, steps=steps)
    weights: list[tuple[float, float]] = []

    def anneal(it: int) -> None:
        env.set_weights(s1(it), s2(it))
        weights.append((s1(it), s2(it)))

    res = train_policy(
        algo, env, [{"task": i} for i in range(train_tasks)], env_name="Swarm", iters=iters, batch=batch, seed=seed,
        hidden=(32,), on_iter=anneal, progress=progress,
        extra={"l1": l1, "l2": l2, "anneal_frac": anneal_frac, "config": vars(env.cfg), **extra}, heldout=heldout,
        **kw,
    )  # fmt: skip
    return res, weights[:: max(1, iters // 20)]


def train_swarm(
    *,
    seed: int = 0,
    iters: int = 300,
    batch: int = 64,
    l1: float = 0.2,
    l2: float = 1.0,
    anneal_frac: float = 0.8,
    algo: str = "reinforce",
    group: int | None = None,
    ent_coef: float | None = None,
    lr: float | None = None,
    train_tasks: int = 2000,
    eval_tasks: int = 200,
    traces: str | list[str] | None = None,
    tasks: list[SwarmTask] | None = None,
    target_kl: float | None = None,
    progress: bool = False,
) -> Trained[SwarmTraining]:
    """``algo`` on PARL rewards with annealed l1, l2 (see :func:`_swarm_train`); REINFORCE and
    GRPO play every drawn DAG ``group`` times and use the group mean as the baseline (tasks differ
    a lot in how tight their budget is), and a strong entropy bonus keeps small spawn counts
    explored (defaults per algorithm: :data:`SWARM_ALGO`). Evaluation on DAGs from another seed.

    Training tasks: ``train_tasks`` generated DAGs, or the staged tasks of recorded swarm runs
    (``traces``, a glob: ``envs.swarm_traces``) or ``tasks`` given in memory."""
    from ..envs.swarm import SwarmEnv

    need_numbers(l1=l1, l2=l2, iters_count=iters, eval_tasks_count=eval_tasks)
    kw = algo_kwargs(SWARM_ALGO, algo, lr=lr, group=group, ent_coef=ent_coef, target_kl=target_kl)
    if traces is not None:
        from ..envs.swarm_traces import tasks_from_traces

        tasks = tasks_from_traces(traces)
    if tasks is not None:
        train_tasks = len(tasks)
    env = SwarmEnv(task_seed=SWARM_TRAIN_SEED, l1=l1, l2=l2, tasks=tasks)
    held_env = SwarmEnv(task_seed=SWARM_TEST_SEED)  # its own: the report's env starts fresh, log or not

    def heldout(policy: NumpyPolicy) -> dict[str, float]:
        m = _swarm_eval(held_env, eval_tasks, {"learned": policy.act}, seed)["learned"][0]
        return {"r_perf": m.r_perf.mean, "finish_rate": m.finish_rate, "on_budget": m.on_budget,
                "critical_over_serial": m.critical_over_serial.mean}  # fmt: skip

    res, weights = _swarm_train(env, algo, kw, seed=seed, iters=iters, batch=batch, l1=l1, l2=l2,
                                anneal_frac=anneal_frac, train_tasks=train_tasks, progress=progress, extra={},
                                heldout=heldout)  # fmt: skip
    r = _swarm_report(SwarmEnv(task_seed=SWARM_TEST_SEED), res.policy, eval_tasks, seed)
    result = SwarmTraining(
        **msgspec.structs.asdict(r), env="Swarm", seed=seed,
        train_task_seed=SWARM_TRAIN_SEED if tasks is None else None, train_tasks=train_tasks,
        test_task_seed=SWARM_TEST_SEED, config=env.cfg, train_iters=iters, anneal=Anneal(l1, l2, anneal_frac),
        algo={"name": algo, **kw, "batch": batch}, learning_curve=[c["batch_reward"] for c in res.history], weights=weights,
    )  # fmt: skip
    return Trained(result, "swarm-result.json", {"swarm": res.policy})


def train_swarm_parallel(
    *,
    seed: int = 0,
    iters: int = 200,
    batch: int = 32,
    branches: int = 3,
    l1: float = 0.2,
    l2: float = 1.0,
    anneal_frac: float = 0.8,
    algo: str = "reinforce",
    group: int | None = None,
    ent_coef: float | None = None,
    lr: float | None = None,
    train_tasks: int = 2000,
    eval_tasks: int = 100,
    credit: str = "team",
    target_kl: float | None = None,
    progress: bool = False,
) -> Trained[SwarmParallelTraining]:
    """PettingZoo Parallel Swarm, trained through ``parallel_env``'s reset/step with a dict of
    actions: one policy (and critic) shared by every lead (parameter sharing, independent policy
    gradient), each lead's reward the team PARL reward R of the episode's trace (``credit="team"``)
    or its own credit from that trace (``"loo"``, ``"difference"``, ``"shapley"`` at the agent
    unit, a lead's unit being its branch; R - sum of the leads' credits is spread equally, so the
    leads' rewards sum to R: :func:`~..envs.swarm_parallel.lead_rewards`). ``batch`` counts
    env episodes (each gives ``branches`` agent trajectories). Evaluated with
    :func:`eval_swarm_parallel` on held-out tasks against the per-lead fixed rules."""
    from ..envs.swarm_parallel import SwarmParallelEnv, check_credit, parallel_env

    check_credit(credit)
    need_numbers(l1=l1, l2=l2, iters_count=iters, eval_tasks_count=eval_tasks, branches_count=branches)
    kw = algo_kwargs(SWARM_ALGO, algo, lr=lr, group=group, ent_coef=ent_coef, target_kl=target_kl)
    env = parallel_env(branches=branches, task_seed=SWARM_TRAIN_SEED, l1=l1, l2=l2, credit=credit)
    held_env = SwarmParallelEnv(branches=branches, task_seed=SWARM_TEST_SEED)  # eval_swarm_parallel's own

    def heldout(policy: NumpyPolicy) -> dict[str, float]:
        a = _parallel_rows(held_env, lambda _a, o: policy.act(o), eval_tasks)
        return {"r_perf": float(a[:, 0].mean()), "finish_rate": float(a[:, 1].mean()),
                "critical_over_serial": float(a[:, 2].mean()), "on_budget": float(a[:, 3].mean())}  # fmt: skip

    res, weights = _swarm_train(env, algo, kw, seed=seed, iters=iters, batch=batch, l1=l1, l2=l2,
                                anneal_frac=anneal_frac, train_tasks=train_tasks, progress=progress,
                                extra={"trained_on": "SwarmParallel", "branches": branches, "credit": credit},
                                heldout=heldout)  # fmt: skip
    r = eval_swarm_parallel(res.policy, branches=branches, eval_tasks=eval_tasks, seed=seed)
    result = SwarmParallelTraining(
        **msgspec.structs.asdict(r), seed=seed, train_task_seed=SWARM_TRAIN_SEED, test_task_seed=SWARM_TEST_SEED,
        config=env.cfg, train_iters=iters, anneal=Anneal(l1, l2, anneal_frac), algo={"name": algo, **kw, "batch": batch},
        credit=credit, learning_curve=[c["batch_reward"] for c in res.history], weights=weights,
    )  # fmt: skip
    return Trained(result, "swarm-parallel-result.json", {"swarm-parallel": res.policy})


def _load_swarm_policy(path: str | Path) -> NumpyPolicy:
    """A Swarm policy whose observation is today's :data:`~..envs.swarm.FEATURE_NAMES` (policies
    saved before the makespan heuristic's k became a feature see 18 features, not 26)."""
    from ...core.errors import OrchestraceError
    from ..envs.swarm import N_FEATURES

    pol = NumpyPolicy.load(path, env="Swarm")
    if pol.meta.obs_dim != N_FEATURES:
        raise OrchestraceError(
            "OT664",
            f"policy sees {pol.meta.obs_dim} features, the Swarm env has {N_FEATURES}: retrain with train swarm",
            path=str(path),
        )
    return pol


def eval_swarm(policy: str | Path | None = None, *, eval_tasks: int = 200, seed: int = 0) -> SwarmEval:
    """Held-out DAGs: a saved policy (if given) and every baseline, with measured Critical Steps."""
    from ..envs.swarm import SwarmEnv

    need_numbers(eval_tasks_count=eval_tasks)
    pol = _load_swarm_policy(policy) if policy is not None else None
    r = _swarm_report(SwarmEnv(task_seed=SWARM_TEST_SEED), pol, eval_tasks, seed)
    return SwarmEval(**msgspec.structs.asdict(r), env="Swarm", seed=seed, test_task_seed=SWARM_TEST_SEED)


def _parallel_rows(
    env: SwarmParallelEnv, choose: Callable[[str, np.ndarray], int], eval_tasks: int
) -> np.ndarray:
    """Per held-out task 0..eval_tasks-1, every lead choosing with ``choose(agent, obs)``: r_perf,
    r_finish, Critical Steps / (serial + 1), on budget."""
    from ..envs.swarm import swarm_reward
    from ..envs.swarm_parallel import hier_stage_critical

    rows = []
    for i in range(eval_tasks):
        obs, _ = env.reset(options={"task": i})
        while env.agents:
            obs, _, _, _, infos = env.step({a: choose(a, obs[a]) for a in env.agents})
        info = next(iter(infos.values()))
        m = swarm_reward(info["trace"], parallel_cap=env.cfg.parallel_cap, measure=True)
        serial = sum(
            hier_stage_critical([t.stages[s] for t in env._tasks], [0] * env.branches) for s in range(env._n)
        )
        rows.append([m["r_perf"], m["r_finish"], m["critical_steps"] / (serial + 1), float(not info["late"])])
    return np.array(rows)


def eval_swarm_parallel(
    policy: str | Path | NumpyPolicy | None = None, *, branches: int = 3, eval_tasks: int = 100, seed: int = 0
) -> SwarmParallelEval:
    """PettingZoo Parallel Swarm on held-out tasks: every lead acts at once, each running the same
    policy (trained on the single-agent Swarm, or shared by the leads in :func:`train_swarm_parallel`)
    on its own observation, against per-lead baselines."""
    from ..envs.swarm import baseline_ks
    from ..envs.swarm_parallel import SwarmParallelEnv

    need_numbers(eval_tasks_count=eval_tasks, branches_count=branches)
    pol = _load_swarm_policy(policy) if isinstance(policy, str | Path) else policy
    env = SwarmParallelEnv(branches=branches, task_seed=SWARM_TEST_SEED)

    def rule(name: str) -> Callable[[str, np.ndarray], int]:
        def choose(agent: str, _obs: np.ndarray) -> int:
            b = env.possible_agents.index(agent)
            return baseline_ks(name, env._tasks[b], env.cfg)[env._s]

        return choose

    methods: dict[str, Callable[[str, np.ndarray], int]] = {"makespan_heuristic": rule("makespan_heuristic"), "serial": rule("serial"),
                               "max_agents": rule("max_agents")}  # fmt: skip
    if pol is not None:
        methods = {"learned_per_lead": lambda _a, o: pol.act(o), **methods}
    by_method: dict[str, SwarmParallelMethod] = {}
    r_perf: dict[str, np.ndarray] = {}
    for name, choose in methods.items():
        a = _parallel_rows(env, choose, eval_tasks)
        r_perf[name] = a[:, 0]
        by_method[name] = SwarmParallelMethod(
            summary(a[:, 0], seed), float(a[:, 1].mean()), float(a[:, 2].mean()), float(a[:, 3].mean())
        )
    diffs = {}
    if "learned_per_lead" in r_perf:  # paired over the same held-out tasks, like the single-agent Swarm
        diffs = {
            f"learned_minus_{base}_r_perf": paired_summary(r_perf["learned_per_lead"], r_perf[base], seed)
            for base in ("makespan_heuristic", "serial", "max_agents")
        }
    return SwarmParallelEval(
        env="SwarmParallel", branches=branches, tasks_heldout=eval_tasks, methods=by_method, **diffs
    )
