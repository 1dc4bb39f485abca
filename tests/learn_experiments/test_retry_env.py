"""RetryStop: traces validate, the reward read from the trace matches hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from orchestrace.core.validate import validate_trace
from orchestrace.learn.datasets import RetryTask, load_retry
from orchestrace.learn.envs.retry import RetryStopEnv, fixed_cap_reward, near_miss, retry_reward, retry_trace
from orchestrace.learn.rl.rollouts import run_episode


def _errors(tr) -> list:
    return [f for f in validate_trace(tr) if f.severity == "error"]


TOY = [
    RetryTask(
        "a",
        "alfworld",
        [False, False, True],
        ["stuck in a loop", "stuck in a loop again", "success"],
        [1.0] * 3,
    ),
    RetryTask("b", "alfworld", [True], ["success"], [1.0]),
    RetryTask("c", "alfworld", [False] * 4, ["x", "y", "z", "w"], [1.0] * 4),
]


def test_reward_from_trace_by_hand() -> None:
    env = RetryStopEnv(TOY, cost=0.1)
    # always retry: task a succeeds at attempt 3 -> 1 - 3 x 0.1
    _, acts, r, info = run_episode(env, lambda _o: 0, {"task": 0})
    assert r == pytest.approx(0.7) and acts == [0, 0] and info["attempts"] == 3
    assert retry_reward(info["trace"], 0.1) == pytest.approx(0.7)
    # give up after the first failure: 0 - 0.1
    _, acts, r, info = run_episode(env, lambda _o: 1, {"task": 0})
    assert r == pytest.approx(-0.1) and acts == [1] and not info["success"]
    # task b succeeds at once: no decision is asked of the policy
    _, acts, r, _ = run_episode(env, lambda _o: 1, {"task": 1})
    assert acts == [] and r == pytest.approx(0.9)
    # task c exhausts its 4 logged attempts
    _, _, r, info = run_episode(env, lambda _o: 0, {"task": 2})
    assert r == pytest.approx(-0.4) and info["trace"].events[-1].attrs["decision"] == "exhausted"


def test_fixed_caps_by_hand() -> None:
    assert fixed_cap_reward(TOY[0], 1, 0.1, 1.0, 15)[:2] == (pytest.approx(-0.1), False)
    assert fixed_cap_reward(TOY[0], 2, 0.1, 1.0, 15)[:2] == (pytest.approx(-0.2), False)
    assert fixed_cap_reward(TOY[0], 5, 0.1, 1.0, 15) == (pytest.approx(0.7), True, 3)


def test_features_see_repetition_and_hopelessness() -> None:
    env = RetryStopEnv(TOY, cost=0.1)
    obs, _ = env.reset(options={"task": 0})
    obs, *_ = env.step(0)
    # two reflections share 4 of 5 distinct words ("stuck in a loop" + "again")
    assert obs[3] == pytest.approx(4 / 5)
    assert obs[5] == pytest.approx(1.0)  # both mention a loop


def test_near_miss_checks_the_arithmetic() -> None:
    assert near_miss("Steps: ...\nAnswer: (6 - 4) * 12 = 24")
    assert not near_miss("Answer: (6 - 4) * 5 = 24")  # evaluates to 10
    assert not near_miss("Answer: None")
    assert not near_miss("Answer: __import__('os') = 24")


@pytest.mark.parametrize("family", ["alfworld", "humaneval", "game24"])
def test_real_episodes_emit_valid_traces(family: str, public_excerpt) -> None:
    tasks = load_retry(family, public_excerpt)
    env = RetryStopEnv(tasks, cost=0.05)
    rng = np.random.default_rng(0)
    for i in range(0, len(tasks), max(1, len(tasks) // 12)):
        _, _, r, info = run_episode(env, lambda _o: int(rng.random() < 0.3), {"task": i, "perm": 1})
        assert _errors(info["trace"]) == []
        assert r == pytest.approx(retry_reward(info["trace"], 0.05))


def test_permutations_only_for_exchangeable_families(public_excerpt) -> None:
    g = load_retry("game24", public_excerpt)
    env = RetryStopEnv(g, cost=0.01)
    v = env.view(3, 2)
    assert sorted(v.cost) == pytest.approx(sorted(g[3].cost)) and v.content != g[3].content
    assert sum(v.success) == sum(g[3].success)
    a = RetryStopEnv(TOY)
    assert a.view(0, 5) is TOY[0]


def test_gymnasium_checker(public_excerpt) -> None:
    check_env(RetryStopEnv(load_retry("humaneval", public_excerpt), cost=0.1), skip_render_check=True)


def test_trace_of_give_up_is_a_chain() -> None:
    tr = retry_trace(TOY[2], 2, True, 0.1, 1.0)
    assert [e.type for e in tr.events] == [
        "orchestrator_decision", "spawn", "message", "return", "orchestrator_decision", "message", "return",
        "orchestrator_decision",
    ]  # fmt: skip
    assert tr.events[-1].attrs["decision"] == "give_up" and tr.rewards["team"] == 0.0


def test_stop_now_baseline_is_the_give_up_reward() -> None:
    env = RetryStopEnv(TOY, cost=0.1)
    _, _, _, info = run_episode(env, lambda _o: 0, {"task": 2})
    # decisions after 1, 2 and 3 failed attempts: giving up there pays 1, 2, 3 attempts
    assert info["stop_now"] == pytest.approx([-0.1, -0.2, -0.3])
    assert retry_reward(retry_trace(TOY[2], 2, True, 0.1, 1.0), 0.1) == pytest.approx(info["stop_now"][1])
