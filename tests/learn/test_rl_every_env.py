"""One training loop: every algorithm file trains on every env through its one ``train``; exact PG
refuses envs without an outcome table; its tables agree with played episodes; stop policies written
before the merge still load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from orchestrace.core.errors import OrchestraceError
from orchestrace.learn.datasets import RetryTask, RouteData
from orchestrace.learn.envs.delegate import DelegateEnv
from orchestrace.learn.envs.retry import RetryStopEnv
from orchestrace.learn.envs.stopvote import build_pool
from orchestrace.learn.envs.swarm import SwarmEnv
from orchestrace.learn.envs.swarm_parallel import parallel_env
from orchestrace.learn.rl import exact, grpo, ppo, reinforce
from orchestrace.learn.rl.rollouts import NumpyPolicy, run_episode
from orchestrace.learn.rl.tasks import GymTask, OutcomeTable, PoolTask
from orchestrace.learn.rl.train_gym import train_policy
from orchestrace.learn.stopping.banks import SynthParams, synthetic_bank
from orchestrace.learn.stopping.policy import StopPolicy

RETRY = [
    RetryTask("a", "alfworld", [False, False, True], ["loop", "loop again", "success"], [1.0] * 3),
    RetryTask("b", "alfworld", [True], ["success"], [1.0]),
    RetryTask("c", "alfworld", [False] * 4, ["x", "y", "z", "w"], [1.0] * 4),
]
MODULES = {"reinforce": reinforce, "ppo": ppo, "grpo": grpo, "exact": exact}
OLD_POLICY = Path(__file__).parents[1] / "data" / "learn" / "stop-exact-2026-11-26"


def _route(n: int = 40) -> RouteData:
    hard = [i % 2 == 1 for i in range(n)]
    return RouteData("toy", [f"q{i}" for i in range(n)], [("prove " if h else "sky ") + str(i) for i, h in enumerate(hard)],
                     ["all"] * n, ["cheap", "strong"], np.array([[0.0, 1.0] if h else [1.0, 1.0] for h in hard]),
                     np.tile([0.001, 0.01], (n, 1)))  # fmt: skip


def _task(env: str):  # noqa: ANN202
    if env == "StopVote":
        bank = synthetic_bank(30, SynthParams(a=1.0, b=1.0, distractors=3, alpha=0.5, samples=8), seed=0)
        return PoolTask(build_pool(bank, budget=8, perms=2, seed=0), 0.02)
    if env == "RetryStop":
        return GymTask(RetryStopEnv(RETRY, cost=0.1), [{"task": i} for i in range(3)], "RetryStop")
    if env == "Delegate":
        return GymTask(DelegateEnv(_route(), lam=0.5), [{"query": i} for i in range(40)], "Delegate")
    if env == "Swarm":
        return GymTask(SwarmEnv(task_seed=0), [{"task": i} for i in range(20)], "Swarm")
    return GymTask(parallel_env(branches=3, task_seed=0), [{"task": i} for i in range(20)], "Swarm")


def _weights(policy) -> list[np.ndarray]:  # noqa: ANN001
    return [x for w, b in policy.weights for x in (w, b)]


ENVS = ["StopVote", "RetryStop", "Delegate", "Swarm", "ParallelSwarm"]
#: exact PG on Swarm is refused (test_exact_refuses_envs_whose_actions_change_what_comes_next)
RUNS = [(a, e) for a in MODULES for e in ENVS if not (a == "exact" and e in ("Swarm", "ParallelSwarm"))]


@pytest.mark.parametrize(("algo", "env"), RUNS)
def test_every_algorithm_trains_on_every_env(algo: str, env: str) -> None:
    mod = MODULES[algo]
    start = mod.train(_task(env), mod.Args(iterations=0, batch=16))
    res = mod.train(_task(env), mod.Args(iterations=3, batch=16, eval_every=2))
    assert [h["iteration"] for h in res.history] == [1, 2, 3]
    assert isinstance(res.policy, StopPolicy if env == "StopVote" else NumpyPolicy)
    assert not all(
        np.array_equal(a, b) for a, b in zip(_weights(start.policy), _weights(res.policy), strict=True)
    )
    name = "exact-pg" if algo == "exact" else algo
    if env == "StopVote":  # the greedy evaluation on the pool at both ends and every 2 iterations
        assert [("eval_reward" in h) for h in res.history] == [True, True, True]
        assert res.policy.config.algorithm == name
    else:
        assert res.policy.meta.extra["algo"] == name


@pytest.mark.parametrize("env", ["Swarm", "ParallelSwarm"])
def test_exact_refuses_envs_whose_actions_change_what_comes_next(env: str) -> None:
    with pytest.raises(OrchestraceError) as e:
        exact.train(_task(env), exact.Args(iterations=1))
    assert e.value.code == "OT650" and "exact PG" in str(e.value)
    with pytest.raises(OrchestraceError, match="OT650"):
        train_policy("exact", SwarmEnv(task_seed=0), [{"task": 0}], env_name="Swarm", iters=1)


def test_retry_outcome_table_is_what_played_episodes_pay() -> None:
    """Row of a task: the reward of giving up at each decision, then of never giving up; each one
    checked against an episode played through the env (its reward read from the trace)."""
    task = _task("RetryStop")
    actor, _ = task.networks(0, critic=False)
    tab = task.outcome_table(actor, np.array([0, 1, 2]), np.random.default_rng(0), 0)
    assert tab.ends.tolist() == [2, 0, 3]  # decisions after 1, 2 (task a), none (b), 1-3 failed attempts (c)
    for row, i in enumerate([0, 1, 2]):
        for k in range(tab.ends[row] + 1):
            seen = iter(range(99))
            _, _, r, _ = run_episode(task.env, lambda _o, k=k, seen=seen: int(next(seen) == k), {"task": i})
            assert tab.reward[row, k] == pytest.approx(r)
    assert tab.reward[0, :3] == pytest.approx([-0.1, -0.2, 0.7])  # by hand: 1 - 3 x 0.1 when retried


def test_exact_objective_by_hand() -> None:
    """Ragged stopping episodes: P(stop at t) = p_t prod (1 - p_i), the forced end stops for sure;
    one-step: sum_a pi(a) r(a)."""
    actor = torch.nn.Linear(1, 2)
    with torch.no_grad():
        actor.weight.zero_()
        actor.bias.copy_(torch.tensor([0.0, np.log(0.25 / 0.75)]))  # P(stop = action 1) = 0.25
    obs = np.zeros((2, 3, 1), np.float32)
    tab = OutcomeTable(obs, np.array([[1.0, 2.0, 4.0], [3.0, 5.0, 0.0]], np.float32), 1, np.array([2, 1]))
    # episode 1: 0.25 x 1 + 0.75 x 0.25 x 2 + 0.75^2 x 4 = 2.875; episode 2: 0.25 x 3 + 0.75 x 5 = 4.5
    assert exact.expected_reward(actor, tab).item() == pytest.approx((2.875 + 4.5) / 2)
    one = OutcomeTable(np.zeros((1, 1), np.float32), np.array([[2.0, 6.0]], np.float32), None)
    assert exact.expected_reward(actor, one).item() == pytest.approx(0.75 * 2 + 0.25 * 6)


def test_stop_policy_written_before_the_merge_loads() -> None:
    """A StopPolicy file written by the StopVote trainer before the two loops merged (safetensors +
    JSON, one logit) loads through both loaders and gives the stop probabilities it gave then."""
    from orchestrace.learn.policies import load_policy

    expected = json.loads(Path(str(OLD_POLICY) + "-expected.json").read_text())
    x = np.array(expected["features"], np.float32)
    pol = StopPolicy.load(str(OLD_POLICY) + ".safetensors")
    assert pol.config.algorithm == "exact-pg" and pol.config.budget == 12
    np.testing.assert_array_equal(pol.stop_prob(x), np.array(expected["stop_prob"], np.float32))
    assert load_policy(str(OLD_POLICY) + ".json").decision == "stop"


@pytest.mark.parametrize("algo", ["exact", "reinforce", "grpo", "ppo"])
def test_stopvote_trains_what_it_trained_before_the_merge(algo: str) -> None:
    """Same seed, same policy as the StopVote trainers before the loops merged (their outputs are a
    fixture); PPO's GAE rounds differently now, so it agrees to 1e-6 only this early in a run."""
    from orchestrace.learn.stopping.training import train_policy as train_stop

    ref = json.loads((OLD_POLICY.parent / "stopvote-pre-merge-6-iterations.json").read_text())["stop_prob"][
        algo
    ]
    bank = synthetic_bank(150, SynthParams(a=1.0, b=1.0, distractors=3, alpha=0.5, samples=12), seed=0)
    pool = build_pool(bank, budget=12, perms=4, seed=0)
    pol, _ = train_stop(bank, 0.02, algo=algo, budget=12, iterations=6, pool=pool)
    x = pool.feats[:50].reshape(-1, pool.feats.shape[-1])[:20]
    np.testing.assert_allclose(pol.stop_prob(x), ref, rtol=0, atol=1e-6 if algo == "ppo" else 1e-7)
