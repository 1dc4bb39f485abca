"""One training loop: every algorithm file trains on every env through its one ``train``; exact PG's
tables agree with played episodes and its gradient on the envs whose actions change what comes
next is the gradient of the expected return enumerated by hand; stop policies written before the
merge still load."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from orchestrace.core.errors import OrchestraceError
from orchestrace.learn.datasets import RetryTask, RouteData
from orchestrace.learn.envs.delegate import CascadeEnv, DelegateEnv
from orchestrace.learn.envs.retry import RetryStopEnv
from orchestrace.learn.envs.swarm import SwarmConfig, SwarmEnv
from orchestrace.learn.envs.swarm_parallel import parallel_env
from orchestrace.learn.rl import exact, grpo, ppo, reinforce
from orchestrace.learn.rl.rollouts import NumpyPolicy, run_episode
from orchestrace.learn.rl.tasks import GymTask, OutcomeTable
from orchestrace.learn.rl.train_gym import train_policy
from orchestrace.learn.stopping.banks import SynthParams, synthetic_bank
from orchestrace.learn.stopping.policy import StopPolicy
from orchestrace.learn.stopping.pool import build_pool
from orchestrace.learn.stopping.task import PoolTask

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


def _cascade(n: int = 12) -> RouteData:
    """Three models by price; the cheap one is right on even queries, and says so ("#### 4")."""
    texts = [f"what is {i} + {i}" for i in range(n)]
    resp = [
        [f"#### {2 * i}" if i % 2 == 0 else "maybe 3.5, however", "approximately 7", f"#### {2 * i}"]
        for i in range(n)
    ]
    quality = np.array([[float(i % 2 == 0), float(i % 3 == 0), 1.0] for i in range(n)])
    return RouteData("toy-cascade", [f"q{i}" for i in range(n)], texts, ["all"] * n, ["cheap", "mid", "strong"],
                     quality, np.tile([0.001, 0.004, 0.01], (n, 1)), responses=resp)  # fmt: skip


def _task(env: str):  # noqa: ANN202
    if env == "StopVote":
        bank = synthetic_bank(30, SynthParams(a=1.0, b=1.0, distractors=3, alpha=0.5, samples=8), seed=0)
        return PoolTask(build_pool(bank, budget=8, perms=2, seed=0), 0.02)
    if env == "RetryStop":
        return GymTask(RetryStopEnv(RETRY, cost=0.1), [{"task": i} for i in range(3)], "RetryStop")
    if env == "Delegate":
        return GymTask(DelegateEnv(_route(), lam=0.5), [{"query": i} for i in range(40)], "Delegate")
    if env == "Cascade":
        return GymTask(CascadeEnv(_cascade(), lam=0.2), [{"query": i} for i in range(12)], "Delegate")
    if env == "Swarm":
        return GymTask(SwarmEnv(task_seed=0), [{"task": i} for i in range(20)], "Swarm")
    return GymTask(parallel_env(branches=3, task_seed=0), [{"task": i} for i in range(20)], "Swarm")


def _weights(policy) -> list[np.ndarray]:  # noqa: ANN001
    return [x for w, b in policy.weights for x in (w, b)]


ENVS = ["StopVote", "RetryStop", "Delegate", "Cascade", "Swarm", "ParallelSwarm"]
RUNS = [(a, e) for a in MODULES for e in ENVS]


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


def _random_actor(task: GymTask) -> torch.nn.Module:
    """The task's policy net with weights far from uniform, so every gradient term matters."""
    actor, _ = task.networks(0, critic=False)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in actor.parameters():
            p.normal_(0.0, 0.7)
    return actor


def _probs(actor: torch.nn.Module, obs: np.ndarray) -> torch.Tensor:
    return torch.softmax(actor(torch.as_tensor(np.asarray(obs, np.float32))[None]), dim=-1)[0]


def _by_hand(env: Any, options: dict, actor: torch.nn.Module, prefix: Sequence[int] = ()) -> torch.Tensor:
    """E[R] under ``actor`` from the state ``prefix`` reaches: every action played from a fresh
    reset, the reward the env pays at the end (read from the trace)."""

    def replay(actions: list[int]):  # noqa: ANN202
        out = env.reset(options=options)[0], 0.0, False
        for a in actions:
            obs, r, term, trunc, _ = env.step(a)
            out = obs, r, term or trunc
        return out

    obs, _, _ = replay(list(prefix))
    p = _probs(actor, obs)
    total = torch.zeros(())
    for a in range(len(p)):
        _, r, done = replay([*prefix, a])
        total = total + p[a] * (r if done else _by_hand(env, options, actor, [*prefix, a]))
    return total


def _by_hand_parallel(
    env: Any, options: dict, actor: torch.nn.Module, prefix: Sequence[tuple[int, ...]] = ()
) -> torch.Tensor:
    """The same for the PettingZoo env: every joint action of the leads, each lead's probability
    from its own observation."""

    def replay(joint: list[tuple[int, ...]]):  # noqa: ANN202
        obs, _ = env.reset(options=options)
        r = 0.0
        for ks in joint:
            obs, rew, *_ = env.step(dict(zip(env.possible_agents, ks, strict=True)))
            r = next(iter(rew.values())) if rew else 0.0
        return obs, r, not env.agents

    obs, _, _ = replay(list(prefix))
    ps = [_probs(actor, obs[a]) for a in env.possible_agents]
    total = torch.zeros(())
    for ks in itertools.product(*(range(len(p)) for p in ps)):
        w = torch.prod(torch.stack([p[k] for p, k in zip(ps, ks, strict=True)]))
        _, r, done = replay([*prefix, ks])
        total = total + w * (r if done else _by_hand_parallel(env, options, actor, [*prefix, ks]))
    return total


def _grads(actor: torch.nn.Module, value: torch.Tensor) -> list[torch.Tensor]:
    return [g.clone() for g in torch.autograd.grad(value, list(actor.parameters()))]


TINY = SwarmConfig(max_agents=2, min_stages=2, max_stages=3, max_width=3, ctx_sub=6, ctx_main=8)


@pytest.mark.parametrize("env", ["Swarm", "Cascade", "ParallelSwarm"])
def test_exact_gradient_is_the_gradient_of_the_expected_return_by_hand(env: str) -> None:
    """Tiny configs (Swarm: 3 widths, 2-3 stages; Parallel: 2 leads x 2 widths, whole tree under
    the cap; the cascade over 3 models): exact PG's objective and gradient on a batch equal the
    expected return enumerated by hand through reset / step and its autograd gradient."""
    if env == "Swarm":
        task = GymTask(SwarmEnv(TINY, task_seed=3, l1=0.2, l2=1.0), [{"task": i} for i in range(6)], "Swarm")
        hand = _by_hand
    elif env == "Cascade":
        task = _task("Cascade")
        hand = _by_hand
    else:
        cfg = SwarmConfig(max_agents=1, min_stages=2, max_stages=3, max_width=3, ctx_sub=6, ctx_main=8)
        task = GymTask(parallel_env(branches=2, cfg=cfg, task_seed=3, l1=0.2, l2=1.0),
                       [{"task": i} for i in range(6)], "Swarm")  # fmt: skip
        hand = _by_hand_parallel
    actor = _random_actor(task)
    starts = np.array([0, 1, 2, 3, 4, 5, 1])
    trees = task.outcome_table(actor, starts, np.random.default_rng(0), 0)
    assert all(len(t.prefix) == 0 for t in trees)  # every tree whole
    surrogate, j = exact.tree_objective(actor, trees)
    expected = torch.stack([hand(task.env, task.options[i], actor) for i in starts]).mean()
    assert j.item() == pytest.approx(expected.item(), rel=1e-5)
    by_hand = _grads(actor, expected)
    for a, b in zip(_grads(actor, surrogate), by_hand, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert any(g.abs().max() > 1e-3 for g in by_hand)
    # the entropy bonus: the mean entropy of the policy over the trees' decision nodes
    ent = [-(p * p.log()).sum() for t in trees for p in (_probs(actor, o) for o in t.obs)]
    with_bonus, _ = exact.tree_objective(actor, trees, entropy=0.3)
    assert with_bonus.item() - j.item() == pytest.approx(0.3 * torch.stack(ent).mean().item(), rel=1e-4)
    if env == "Swarm":  # some episodes end early on a late stage, and widths change the reward
        assert any(len(t.reward) < 3 ** int((t.node >= 0).sum(1).max()) for t in trees)


def test_exact_parallel_swarm_with_a_sampled_prefix_is_unbiased(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the cap the Parallel Swarm enumerates the last stage only: averaged over the prefix's
    joint actions with their probabilities, the estimator's gradient (one episode: no baseline) is
    the gradient of the expected return by hand."""
    from orchestrace.learn.envs import swarm_parallel

    monkeypatch.setattr(swarm_parallel, "MAX_LEAVES", 4)  # 2 leads x 2 widths: one stage fits
    cfg = SwarmConfig(max_agents=1, min_stages=2, max_stages=2, max_width=3, ctx_sub=6, ctx_main=8)
    env = parallel_env(branches=2, cfg=cfg, task_seed=5, l1=0.2, l2=1.0)
    task = GymTask(env, [{"task": 0}], "Swarm")
    actor = _random_actor(task)
    expected = _by_hand_parallel(env, {"task": 0}, actor)
    obs, _ = env.reset(options={"task": 0})
    ps = [_probs(actor, obs[a]).detach() for a in env.possible_agents]
    total = [torch.zeros_like(p) for p in actor.parameters()]
    leaves = []
    for ks in itertools.product(range(2), range(2)):
        it = iter(ks)
        tree = env.action_tree({"task": 0}, lambda _o, it=it: next(it))
        assert tree.prefix_act.tolist() == list(ks)
        leaves.append(len(tree.reward))
        w = float(ps[0][ks[0]] * ps[1][ks[1]])
        for t, g in zip(total, _grads(actor, exact.tree_objective(actor, [tree])[0]), strict=True):
            t += w * g
    assert sorted(set(leaves)) == [1, 4]  # a serial first stage runs late and ends the episode
    for a, b in zip(total, _grads(actor, expected), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_exact_refuses_trees_beyond_the_cap() -> None:
    """One stage of 6 leads x 9 widths has 531,441 joint choices: refused with the size; so is a
    Swarm of 6 stages, and per-lead credit on the Parallel Swarm."""
    with pytest.raises(OrchestraceError, match=r"OT650.*531,441 leaves"):
        exact.train(
            GymTask(parallel_env(branches=6, task_seed=0), [{"task": 0}], "Swarm"), exact.Args(iterations=1)
        )
    cfg = SwarmConfig(min_stages=6, max_stages=6)
    with pytest.raises(OrchestraceError, match=r"OT650.*531,441 leaves.*6 stages"):
        train_policy("exact", SwarmEnv(cfg, task_seed=0), [{"task": 0}], env_name="Swarm", iters=1)
    with pytest.raises(OrchestraceError, match=r"OT650.*credit"):
        exact.train(GymTask(parallel_env(credit="loo"), [{"task": 0}], "Swarm"), exact.Args(iterations=1))


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
    fixture), to a few float32 ulps: summation order differs between BLAS builds and machines (a
    fresh clone elsewhere was 2 ulps off at 1e-7); PPO's GAE also rounds differently now."""
    from orchestrace.learn.stopping.training import train_policy as train_stop

    ref = json.loads((OLD_POLICY.parent / "stopvote-pre-merge-6-iterations.json").read_text())["stop_prob"][
        algo
    ]
    bank = synthetic_bank(150, SynthParams(a=1.0, b=1.0, distractors=3, alpha=0.5, samples=12), seed=0)
    pool = build_pool(bank, budget=12, perms=4, seed=0)
    pol, _ = train_stop(bank, 0.02, algo=algo, budget=12, iterations=6, pool=pool)
    x = pool.feats[:50].reshape(-1, pool.feats.shape[-1])[:20]
    np.testing.assert_allclose(pol.stop_prob(x), ref, rtol=0, atol=1e-6)
