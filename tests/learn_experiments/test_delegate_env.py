"""Delegate: reward from the trace by hand, the threshold router, and a router that must learn."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from orchestrace.core.validate import validate_trace
from orchestrace.learn.datasets import RouteData, load_routellm
from orchestrace.learn.envs.delegate import (
    DelegateEnv,
    cost_scale,
    delegate_reward,
    delegate_trace,
    route_rewards,
    threshold_router,
)
from orchestrace.learn.rl.rollouts import NumpyPolicy, run_episode
from orchestrace.learn.rl.train_gym import train_policy


def toy(n: int = 200) -> RouteData:
    """Two groups: 'easy' queries the cheap model answers, 'hard' ones only the expensive one."""
    texts, groups, qual = [], [], []
    for i in range(n):
        hard = i % 2 == 1
        texts.append(("prove the theorem about primes " if hard else "what colour is the sky ") + str(i))
        groups.append("hard" if hard else "easy")
        qual.append([0.0, 1.0] if hard else [1.0, 1.0])
    cost = np.tile([0.001, 0.01], (n, 1))
    return RouteData(
        "toy", [f"q{i}" for i in range(n)], texts, groups, ["cheap", "strong"], np.array(qual), cost
    )


def test_reward_by_hand() -> None:
    d = toy()
    assert cost_scale(d) == pytest.approx(0.01)
    tr = delegate_trace(d, 1, 0, lam=0.5, scale=0.01)  # hard query to the cheap model
    assert validate_trace(tr) == []
    assert delegate_reward(tr, 0.5, 0.01) == pytest.approx(0.0 - 0.5 * 0.001 / 0.01)
    tr = delegate_trace(d, 1, 1, lam=0.5, scale=0.01)
    assert delegate_reward(tr, 0.5, 0.01) == pytest.approx(1.0 - 0.5)


def test_threshold_router_uses_group_tables() -> None:
    d = toy()
    route = threshold_router(d, tau=0.9)
    assert route("easy") == 0 and route("hard") == 1 and route("unseen") == 1  # overall: cheap 0.5 < 0.9
    assert threshold_router(d, tau=0.4)("unseen") == 0


def test_learned_router_reaches_the_oracle_on_the_toy() -> None:
    d = toy()
    env = DelegateEnv(d, lam=0.5)
    res = train_policy("reinforce", env, [{"query": i} for i in range(len(d.ids))], env_name="Delegate", iters=60, batch=64,
                          hidden=(16,), lr=1e-2, seed=0)  # fmt: skip
    choice = res.policy.probs(env.feats).argmax(axis=1)
    r = route_rewards(d, choice, 0.5, env.scale)[0].mean()
    oracle = np.mean([0.95, 0.5])  # easy: 1 - 0.05, hard: 1 - 0.5
    assert r == pytest.approx(oracle, abs=0.01)
    assert res.history[-1]["batch_reward"] > res.history[0]["batch_reward"]


def test_policy_roundtrip(tmp_path) -> None:
    d = toy(20)
    env = DelegateEnv(d, lam=0.5)
    res = train_policy(
        "reinforce", env, [{"query": i} for i in range(20)], env_name="Delegate", iters=2, batch=8, seed=3
    )
    path = res.policy.save(tmp_path / "p")
    back = NumpyPolicy.load(path, env="Delegate")
    assert np.allclose(back.probs(env.feats), res.policy.probs(env.feats))
    from orchestrace.core.errors import OrchestraceError

    with pytest.raises(OrchestraceError):
        NumpyPolicy.load(path, env="Swarm")


def test_real_queries_emit_valid_traces(public_excerpt) -> None:
    d = load_routellm("gsm8k", public_excerpt)
    env = DelegateEnv(d, lam=0.1)
    check_env(env, skip_render_check=True)
    for q in range(0, len(d.ids), 5):
        for m in (0, 1):
            _, _, r, info = run_episode(env, lambda _o, m=m: m, {"query": q})
            assert validate_trace(info["trace"]) == []
            assert r == pytest.approx(d.quality[q, m] - 0.1 * d.cost[q, m] / env.scale)


def test_cascade_paths_and_reward_by_hand(public_excerpt) -> None:
    from orchestrace.learn.envs.delegate import CascadeEnv, response_features, rule_cascade

    d = load_routellm("gsm8k", public_excerpt)
    env = CascadeEnv(d, lam=0.2)
    q = 5
    cheap, strong = env.ladder
    cases = {(0, 0): [cheap], (0, 1): [cheap, strong], (1,): [strong]}
    for acts, called in cases.items():
        it = iter(acts)
        _, got, r, info = run_episode(env, lambda _o, it=it: next(it), {"query": q})
        assert list(got) == list(acts)
        assert validate_trace(info["trace"]) == []
        want = d.quality[q, called[-1]] - 0.2 * sum(d.cost[q, j] for j in called) / env.scale
        assert r == pytest.approx(want) and info["calls"] == len(called)
    f = response_features("Janet has 9 eggs.\n#### 18")
    assert f[1] == 1.0 and f[4] == 0.0
    assert response_features("She makes about 2.5 dollars, approximately")[3] == 1.0
    obs = np.concatenate([np.zeros(env.feats.shape[1]), response_features("no marker here"), [1.0]])
    assert rule_cascade(obs) == 1


@pytest.mark.parametrize(
    ("train", "kw", "said"),
    [
        # numpy's "Probabilities contain NaN" (exit 3), or trained on a reward that pays for cost
        ("delegate", {"lam": float("nan")}, "--lambda must be a finite number >= 0, got nan"),
        ("delegate", {"lam": -1.0}, "--lambda must be a finite number >= 0, got -1.0"),
        ("delegate", {"iters": 0}, "--iters must be >= 1, got 0"),
        ("swarm", {"l1": float("nan")}, "--l1 must be a finite number >= 0, got nan"),
        ("swarm", {"eval_tasks": -1}, "--eval-tasks must be >= 1, got -1"),  # IndexError
        ("swarm_parallel", {"branches": 0}, "--branches must be >= 1, got 0"),  # IndexError
    ],
)
def test_experiment_numbers_no_run_can_use_are_refused(train: str, kw: dict, said: str) -> None:
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.learn.experiments import delegate, swarm

    run = {
        "delegate": lambda **k: delegate.train_delegate(table=toy(), **{"iters": 1, **k}),
        "swarm": lambda **k: swarm.train_swarm(**{"iters": 1, "train_tasks": 4, "eval_tasks": 2, **k}),
        "swarm_parallel": lambda **k: swarm.train_swarm_parallel(
            **{"iters": 1, "train_tasks": 4, "eval_tasks": 2, **k}
        ),
    }[train]
    with pytest.raises(OrchestraceError) as e:
        run(**kw)
    assert e.value.code == "OT665" and e.value.message == said
