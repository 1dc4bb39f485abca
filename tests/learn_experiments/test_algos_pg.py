"""REINFORCE, PPO and GRPO over one loop: advantages by hand, learning on small seeded envs, same
seed same weights, the PettingZoo Parallel Swarm trained through its parallel API, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from orchestrace.cli import app
from orchestrace.learn.datasets import RouteData
from orchestrace.learn.envs.delegate import DelegateEnv, route_rewards
from orchestrace.learn.envs.swarm import SwarmEnv, swarm_reward
from orchestrace.learn.envs.swarm_parallel import parallel_env
from orchestrace.learn.rl import ALGORITHMS
from orchestrace.learn.rl.grpo import group_advantages
from orchestrace.learn.rl.ppo import gae
from orchestrace.learn.rl.rollouts import Batch, NumpyPolicy, collect_parallel, run_episode
from orchestrace.learn.rl.train_gym import train_policy

#: Small per-algorithm settings shared by the learning tests.
KW = {
    "reinforce": {"lr": 1e-2, "group": 4},
    "ppo": {"lr": 3e-3},
    "grpo": {"lr": 3e-3, "group": 4, "adv_scale": "group"},
    "exact": {"lr": 3e-2},
}


def test_gae_by_hand() -> None:
    v = np.array([0.5, 0.2, 0.8, 0.1], np.float32)  # episode 1: 3 decisions, R = 1; episode 2: 1, R = -1
    b = _batch([1.0, -1.0], [3, 1])
    b.ret = np.array([1.0, 1.0, 1.0, -1.0])
    adv = gae(v, b, lam=0.5)
    # t2: 1 - 0.8 = 0.2; t1: 0.8 - 0.2 + 0.5 x 0.2 = 0.7; t0: 0.2 - 0.5 + 0.5 x 0.7 = 0.05; ep 2: -1 - 0.1
    assert adv == pytest.approx([0.05, 0.7, 0.2, -1.1], abs=1e-6)
    # lambda = 1 is Monte Carlo: R - V(s_t)
    assert gae(v, b, 1.0) == pytest.approx([0.5, 0.8, 0.2, -1.1], abs=1e-6)
    # returns that fall along the episode (StopVote's reward-to-go): the step reward is their drop
    b.ret = np.array([1.0, 0.9, 0.7, -1.0])
    # t2: 0.7 - 0.8 = -0.1; t1: 0.2 + 0.8 - 0.2 + 0.5 x -0.1 = 0.75; t0: 0.1 + 0.2 - 0.5 + 0.5 x 0.75 = 0.175
    assert gae(v, b, lam=0.5) == pytest.approx([0.175, 0.75, -0.1, -1.1], abs=1e-6)


def _batch(rewards: list[float], decisions: list[int], rollout: list[int] | None = None) -> Batch:
    t = sum(decisions)
    return Batch(np.zeros((t, 2), np.float32), np.zeros(t, np.int64), np.zeros(t, np.float32),
                 np.array(rewards), np.array(decisions), np.zeros(t, np.float32), [{}] * len(rewards),
                 None if rollout is None else np.array(rollout))  # fmt: skip


def test_group_advantages_by_hand() -> None:
    b = _batch([1.0, 0.0, 0.5, 0.5], [2, 1, 1, 0])  # groups of 2: {1, 0} and {0.5, 0.5}
    assert group_advantages(b, 2, "none") == pytest.approx([0.5, 0.5, -0.5, 0.0])
    assert group_advantages(b, 2, "group") == pytest.approx([1.0, 1.0, -1.0, 0.0], abs=1e-5)
    x = np.array([0.5, 0.5, -0.5, 0.0])
    assert group_advantages(b, 2, "batch") == pytest.approx(x / x.std(), abs=1e-5)
    # PettingZoo: the agents of one rollout share its group (rollouts 0, 1 form one group of 2)
    p = _batch([1.0, 1.0, 0.0, 0.0], [1, 1, 1, 1], rollout=[0, 0, 1, 1])
    assert group_advantages(p, 2, "none") == pytest.approx([0.5, 0.5, -0.5, -0.5])


def toy_route(n: int = 200) -> RouteData:
    """Even queries are easy (both models right), odd ones hard (only the pricier model)."""
    hard = [i % 2 == 1 for i in range(n)]
    texts = [
        ("prove the theorem about primes " if h else "what colour is the sky ") + str(i)
        for i, h in enumerate(hard)
    ]
    return RouteData("toy", [f"q{i}" for i in range(n)], texts, ["all"] * n, ["cheap", "strong"],
                     np.array([[0.0, 1.0] if h else [1.0, 1.0] for h in hard]), np.tile([0.001, 0.01], (n, 1)))  # fmt: skip


def _expected_route_reward(policy: NumpyPolicy, data: RouteData, env: DelegateEnv) -> float:
    p = policy.probs(env.feats)
    r = np.stack([route_rewards(data, np.full(len(data.ids), j), env.lam, env.scale)[0] for j in range(2)], 1)
    return float((p * r).sum(1).mean())


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_router_improves_on_heldout_queries(algo: str) -> None:
    d = toy_route()
    train, test = d.subset(np.arange(120)), d.subset(np.arange(120, 200))
    env = DelegateEnv(train, lam=0.5)
    test_env = DelegateEnv(test, lam=0.5, scale=env.scale)
    opts = [{"query": i} for i in range(120)]
    before = train_policy(algo, env, opts, env_name="Delegate", iters=0, hidden=(16,), seed=0, **KW[algo])
    after = train_policy(
        algo, env, opts, env_name="Delegate", iters=40, batch=64, hidden=(16,), seed=0, **KW[algo]
    )
    r0 = _expected_route_reward(before.policy, test, test_env)
    r1 = _expected_route_reward(after.policy, test, test_env)
    # uniform start: (0.725 + 0.225) / 2 = 0.475; the oracle (cheap on easy, strong on hard) 0.725
    assert r0 == pytest.approx(0.475, abs=0.01)
    assert r1 > 0.65, (algo, r0, r1)


def _sampled_reward(env: SwarmEnv, policy: NumpyPolicy, n: int = 30) -> float:
    rng = np.random.default_rng(123)
    return float(
        np.mean(
            [
                run_episode(env, lambda o: policy.act(o, rng), {"task": i})[2]
                for i in range(n)
                for _ in range(2)
            ]
        )
    )


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_swarm_spawn_policy_improves_on_heldout_dags(algo: str) -> None:
    """Several decisions per episode (PPO's GAE path); held-out DAGs come from another seed."""
    env = SwarmEnv(task_seed=0)
    opts = [{"task": i} for i in range(60 if algo == "exact" else 200)]  # exact: one tree per DAG drawn
    kw = {"env_name": "Swarm", "batch": 32, "ent_coef": 0.01, "seed": 0, **KW[algo]}
    r0 = _sampled_reward(SwarmEnv(task_seed=1), train_policy(algo, env, opts, iters=0, **kw).policy)
    r1 = _sampled_reward(SwarmEnv(task_seed=1), train_policy(algo, env, opts, iters=15, **kw).policy)
    assert r1 > r0 + 0.15, (algo, r0, r1)  # measured: 0.72 -> 0.93-0.96


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_same_seed_same_weights(algo: str) -> None:
    env = DelegateEnv(toy_route(60), lam=0.5)
    opts = [{"query": i} for i in range(60)]

    def weights(seed: int) -> list[np.ndarray]:
        res = train_policy(algo, env, opts, env_name="Delegate", iters=3, batch=16, seed=seed, **KW[algo])
        assert res.policy.meta.extra["algo"] == ("exact-pg" if algo == "exact" else algo)
        return [x for w, b in res.policy.weights for x in (w, b)]

    a, b, c = weights(0), weights(0), weights(1)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_gym_batch_reward_is_read_from_the_trace() -> None:
    from orchestrace.learn.rl.rollouts import collect

    env = SwarmEnv(task_seed=0, l1=0.2, l2=1.0)
    pol = train_policy("grpo", env, [{"task": 0}], env_name="Swarm", iters=0).policy
    b = collect(env, pol, [{"task": i} for i in range(4)], np.random.default_rng(0))
    assert b.rollout.tolist() == [0, 1, 2, 3]
    assert b.ep_reward == pytest.approx([swarm_reward(i["trace"], 0.2, 1.0)["reward"] for i in b.infos])


def test_parallel_batch_holds_every_agent_with_the_trace_reward() -> None:
    env = parallel_env(branches=3, task_seed=0, l1=0.2, l2=1.0)
    pol = train_policy("ppo", env, [{"task": 0}], env_name="Swarm", iters=0).policy
    b = collect_parallel(env, pol, [{"task": 0}, {"task": 1}], np.random.default_rng(0))
    assert b.rollout.tolist() == [0, 0, 0, 1, 1, 1] and len(b.infos) == 6
    for j in (0, 3):  # every lead of a rollout: one decision per stage run, the reward read from the trace
        tr = b.infos[j]["trace"]
        assert b.decisions[j] == len(tr.metadata["spawn"]) == b.decisions[j + 1] == b.decisions[j + 2]
        assert b.ep_reward[j : j + 3] == pytest.approx([swarm_reward(tr, 0.2, 1.0)["reward"]] * 3)
    assert len(b.act) == b.decisions.sum() and b.obs.shape == (len(b.act), pol.meta.obs_dim)


def _parallel_reward(env, choose, n: int = 20) -> float:  # noqa: ANN001
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        obs, _ = env.reset(options={"task": i})
        while env.agents:
            obs, rew, _, _, _ = env.step({a: choose(obs[a], rng) for a in env.agents})
        out.append(np.mean(list(rew.values())))
    return float(np.mean(out))


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_shared_policy_trained_through_parallel_api_beats_random(algo: str) -> None:
    env = parallel_env(branches=3, task_seed=0)
    res = train_policy(algo, env, [{"task": i} for i in range(200)], env_name="Swarm", iters=12, batch=16,
                       ent_coef=0.01, seed=0, **KW[algo])  # fmt: skip
    test = parallel_env(branches=3, task_seed=1)
    random = _parallel_reward(test, lambda _o, rng: int(rng.integers(9)))
    learned = _parallel_reward(test, lambda o, rng: res.policy.act(o, rng))
    assert learned > random + 0.2, (algo, random, learned)  # measured: 0.58 -> 0.91-0.97


def test_cli_algo_end_to_end(tmp_path) -> None:
    run = CliRunner()
    r = run.invoke(app, ["train", "swarm", "--algo", "ppo", "--iters", "2", "--eval-tasks", "4", "-o", str(tmp_path),
                         "--format", "json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert res["algo"]["name"] == "ppo" and {"learned", "makespan_heuristic"} <= set(res["methods"])
    assert NumpyPolicy.load(tmp_path / "swarm.safetensors", env="Swarm").meta.extra["algo"] == "ppo"
    r = run.invoke(app, ["train", "swarm", "--parallel", "--algo", "grpo", "--iters", "2", "--eval-tasks", "3",
                         "-o", str(tmp_path), "--format", "json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert res["env"] == "SwarmParallel" and res["algo"]["name"] == "grpo"
    # the per-lead heuristic never spawns an idle worker: every lead's r_finish is 1 (test_pettingzoo)
    assert res["methods"]["makespan_heuristic"]["finish_rate"] == 1.0
    r = run.invoke(app, ["eval", "swarm", "--parallel", "-p", str(tmp_path / "swarm-parallel.safetensors"),
                         "--eval-tasks", "3", "--format", "json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    ev = json.loads(r.output)
    # the written file is the policy the training report measured: its held-out figures, paired
    # differences included, are the report's own on the same 3 tasks
    assert ev["methods"]["learned_per_lead"] == res["methods"]["learned_per_lead"]
    diffs = {f"learned_minus_{b}_r_perf" for b in ("makespan_heuristic", "serial", "max_agents")}
    assert set(ev) >= diffs and {k: ev[k] for k in diffs} == {k: res[k] for k in diffs}
    r = run.invoke(app, ["eval", "swarm", "--parallel", "-p", str(tmp_path / "swarm-parallel.safetensors"),
                         "--eval-tasks", "3"])  # fmt: skip
    printed = " ".join(r.output.split())  # the parallel table also ends with the paired comparisons
    assert "learned - makespan_heuristic (r_perf):" in printed and "the learned policy " in printed


def test_cli_rejects_unknown_algo_in_one_line() -> None:
    p = subprocess.run([sys.executable, "-c", "from orchestrace.cli import main; main()", "train", "swarm",
                        "--algo", "nope"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "OT630" in lines[0] and "unknown algorithm 'nope'" in lines[0], p.stderr


def test_cli_refuses_exact_pg_with_lead_credit_in_one_line() -> None:
    """Exact PG sums the team reward over the action tree; a lead's own credit is not enumerated."""
    p = subprocess.run([sys.executable, "-c", "from orchestrace.cli import main; main()", "train", "swarm", "--parallel",
                        "--credit", "loo", "--algo", "exact", "--iters", "1"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "OT650" in lines[0] and "exact PG" in lines[0], p.stderr
