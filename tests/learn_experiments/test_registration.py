"""Environments under the ``orchestrace/`` namespace: ``gymnasium.make``, ``make_vec``, the checkers, no warnings."""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import parallel_api_test

from orchestrace.learn.datasets import RetryTask, RouteData
from orchestrace.learn.envs import ENV_IDS
from orchestrace.learn.stopping.banks import Bank, BankQuestion


def test_make_by_module_prefix_needs_no_import() -> None:
    env = gymnasium.make("orchestrace.learn.envs:orchestrace/Swarm-v0")
    assert env.spec is not None and env.spec.id == "orchestrace/Swarm-v0"
    assert set(ENV_IDS) <= set(gymnasium.registry)


def test_swarm_passes_check_env_with_no_warning() -> None:
    env = gymnasium.make("orchestrace/Swarm-v0", task_seed=1)
    box = env.observation_space
    assert np.isfinite(box.low).all() and np.isfinite(box.high).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every checker warning fails the test
        check_env(env.unwrapped)  # with a spec, so render modes are checked too
    for i in range(200):  # the bounds hold on real episodes
        obs, _ = env.reset(options={"task": i})
        done = False
        while not done:
            assert box.contains(obs)
            obs, _, done, _, _ = env.step(env.action_space.sample())
        assert box.contains(obs)


def test_swarm_vector_env() -> None:
    envs = gymnasium.make_vec("orchestrace/Swarm-v0", num_envs=2, vectorization_mode="sync")
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (2, envs.single_observation_space.shape[0])
    obs, rew, term, trunc, _ = envs.step(np.array([1, 2]))
    assert rew.shape == (2,)
    envs.close()


def test_swarm_parallel_api_with_no_warning() -> None:
    from orchestrace.learn.envs import swarm_v0

    env = swarm_v0.parallel_env()
    assert all(np.isfinite(env.observation_space(a).low).all() for a in env.possible_agents)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(env, num_cycles=20)
    rng = np.random.default_rng(0)
    for i in range(100):  # the bounds hold for every lead on real episodes
        obs, _ = env.reset(options={"task": i})
        while env.agents:
            assert all(env.observation_space(a).contains(o) for a, o in obs.items())
            obs, *_ = env.step({a: int(rng.integers(0, 9)) for a in env.agents})


def _route_data() -> RouteData:
    texts = [("prove the theorem " if i % 2 else "what colour is the sky ") + str(i) for i in range(20)]
    qual = np.array([[0.0, 1.0] if i % 2 else [1.0, 1.0] for i in range(20)])
    groups = ["hard" if i % 2 else "easy" for i in range(20)]
    cost = np.tile([0.001, 0.01], (20, 1))
    answers = [["blue", "blue"] if i % 2 == 0 else ["no idea", "a proof"] for i in range(20)]
    ids = [f"q{i}" for i in range(20)]
    return RouteData("toy", ids, texts, groups, ["cheap", "strong"], qual, cost, responses=answers)


DATA = {
    "orchestrace/RetryStop-v0": lambda: {
        "tasks": [RetryTask("a", "alfworld", [False, True], ["stuck", "success"], [1.0, 1.0])]
    },
    "orchestrace/StopVote-v0": lambda: {
        "bank": Bank("t", [BankQuestion("q", "?", "b", ["a", "b", "b", "a", None, "a"])]),
        "perms": 2,
        "budget": 6,
    },
    "orchestrace/Delegate-v0": lambda: {"data": _route_data()},
    "orchestrace/DelegateCascade-v0": lambda: {"data": _route_data()},
}


@pytest.mark.parametrize("env_id", sorted(DATA))
def test_data_envs_make_with_their_data(env_id: str) -> None:
    env = gymnasium.make(env_id, **DATA[env_id]())
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs) and env.spec.id == env_id
    obs, _, _, _, _ = env.step(env.action_space.sample())
    assert env.observation_space.contains(obs)


def test_every_registered_env_is_made_here() -> None:
    assert set(ENV_IDS) == {*DATA, "orchestrace/Swarm-v0"}


@pytest.mark.parametrize("env_id", ["orchestrace/Delegate-v0", "orchestrace/DelegateCascade-v0"])
def test_delegate_spaces_are_finite_and_hold_every_observation(env_id: str) -> None:
    env = gymnasium.make(env_id, data=_route_data())
    box = env.observation_space
    assert np.isfinite(box.low).all() and np.isfinite(box.high).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    for q in range(20):
        for first in (0, 1):
            obs, _ = env.reset(options={"query": q})
            action, done = first, False
            while not done:
                assert box.contains(obs)
                obs, _, done, _, _ = env.step(action)
                action = 1  # escalate as far as the cascade goes
            assert box.contains(obs)


def test_stop_vote_space_is_finite_and_holds_every_observation() -> None:
    from orchestrace.learn.stopping.banks import SynthParams, synthetic_bank

    bank = synthetic_bank(12, SynthParams(), seed=0)
    env = gymnasium.make("orchestrace/StopVote-v0", bank=bank, perms=2, budget=10)
    box = env.observation_space
    assert np.isfinite(box.low).all() and np.isfinite(box.high).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    for e in range(env.unwrapped.pool.episodes):
        obs, _ = env.reset(options={"episode": e})
        done = False
        while not done:
            assert box.contains(obs)
            obs, _, done, _, _ = env.step(0)  # draw on to the budget: every prefix
        assert box.contains(obs)


def test_retry_stop_space_is_finite_and_holds_every_observation(public_excerpt) -> None:
    from orchestrace.learn.datasets import load_retry

    env = gymnasium.make("orchestrace/RetryStop-v0", tasks=load_retry("humaneval", public_excerpt), cost=0.1)
    box = env.observation_space
    assert np.isfinite(box.low).all() and np.isfinite(box.high).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    for i in range(len(env.unwrapped.tasks)):
        obs, _ = env.reset(options={"task": i})
        done = False
        while not done:
            assert box.contains(obs)
            obs, _, done, _, _ = env.step(0)  # always retry: every prefix up to the budget
        assert box.contains(obs)
