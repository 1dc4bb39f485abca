"""Per-lead credit as each lead's reward in the PettingZoo Parallel Swarm (``credit=`` option)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.credit import compute_credit
from orchestrace.learn.envs.swarm import swarm_reward
from orchestrace.learn.envs.swarm_parallel import SwarmParallelEnv, lead_view
from orchestrace.learn.experiments import SWARM_TEST_SEED, train_swarm_parallel

LEADS = ["lead_0", "lead_1", "lead_2"]


def _episode(env: SwarmParallelEnv, task: int, ks: list[list[int]]) -> tuple[dict, dict]:
    env.reset(options={"task": task})
    s = 0
    while env.agents:
        _, rew, _, _, info = env.step(dict(zip(LEADS, ks[s], strict=True)))
        s += 1
    return rew, info["lead_0"]


def _lead_of(agent: str) -> str:
    parts = agent.split(".")
    return parts[1] if len(parts) == 3 else agent


@pytest.mark.parametrize("method", ["loo", "shapley"])
def test_lead_rewards_are_the_credit_modules_values(method: str) -> None:
    env = SwarmParallelEnv(branches=3, credit=method, l1=0.2, l2=1.0)
    rng = np.random.default_rng(0)
    for task in range(4):
        rew, info = _episode(env, task, rng.integers(0, 9, size=(10, 3)).tolist())
        big_r = info["reward"]
        ((_, uc),) = compute_credit([lead_view(info["trace"], big_r)], method, "agent", channel="parl")
        spread = (big_r - sum(uc.values[a] for a in LEADS)) / 3
        for a in LEADS:
            assert info["lead_credit"][a] == pytest.approx(uc.values[a], abs=1e-12)
            assert rew[a] == pytest.approx(uc.values[a] + spread, abs=1e-12)
        assert sum(rew.values()) == pytest.approx(big_r, abs=1e-9)
        assert len({round(v, 9) for v in rew.values()}) > 1  # leads are told apart


def test_loo_by_hand() -> None:
    # Every event is an ancestor of the final aggregate (A = all n events) and removing a lead removes
    # exactly its branch (its own and its workers' events); so LOO_b = R * n_b / n - (error events of b).
    env = SwarmParallelEnv(branches=3, credit="loo", l1=0.2, l2=1.0)
    rng = np.random.default_rng(1)
    for task in range(4):
        _, info = _episode(env, task, rng.integers(0, 9, size=(10, 3)).tolist())
        ev = info["trace"].events
        for a in LEADS:
            mine = [e for e in ev if _lead_of(e.agent) == a]
            err = sum(e.status == "error" for e in mine)
            assert info["lead_credit"][a] == pytest.approx(
                info["reward"] * len(mine) / len(ev) - err, abs=1e-9
            )


def test_a_lead_that_contributed_nothing_gets_zero_loo() -> None:
    # Serial leads (k = 0) blow the Critical Steps budget at stage 0: R = 0 (l1 = l2 = 0), so a lead
    # whose branch had no failed subtask contributed nothing and its LOO credit is exactly 0.
    env = SwarmParallelEnv(branches=3, credit="loo")
    for task in range(20):
        rew, info = _episode(env, task, [[0, 0, 0]] * 10)
        clean = [a for a in LEADS if not any(e.status == "error" for e in info["trace"].events
                                             if _lead_of(e.agent) == a)]  # fmt: skip
        if info["reward"] == 0.0 and clean:
            for a in clean:
                assert info["lead_credit"][a] == 0.0
            assert sum(rew.values()) == pytest.approx(0.0, abs=1e-9)
            return
    pytest.fail("no late episode with a clean lead in 20 tasks")


def test_team_credit_is_the_shared_reward() -> None:
    env = SwarmParallelEnv(branches=3, l1=0.2, l2=1.0)
    rew, info = _episode(env, 0, [[2, 2, 2]] * 10)
    assert set(rew.values()) == {info["reward"]} and "lead_credit" not in info


def test_same_seed_same_policy_and_unknown_credit() -> None:
    a = train_swarm_parallel(seed=3, iters=3, batch=4, eval_tasks=3, credit="loo")
    b = train_swarm_parallel(seed=3, iters=3, batch=4, eval_tasks=3, credit="loo")
    assert (
        a["learning_curve"] == b["learning_curve"] and a["methods"] == b["methods"] and a["credit"] == "loo"
    )
    with pytest.raises(OrchestraceError) as e:
        train_swarm_parallel(iters=1, credit="nope")
    assert e.value.code == "OT651"


def test_loo_training_beats_random() -> None:
    r = train_swarm_parallel(seed=0, iters=25, batch=16, credit="loo", eval_tasks=30)
    env = SwarmParallelEnv(task_seed=SWARM_TEST_SEED)
    rng = np.random.default_rng(0)
    rand = []
    for i in range(30):
        env.reset(options={"task": i})
        while env.agents:
            _, _, _, _, inf = env.step({a: int(rng.integers(0, 9)) for a in env.agents})
        rand.append(swarm_reward(inf["lead_0"]["trace"])["r_perf"])
    learned = r["methods"]["learned_per_lead"]
    assert learned["r_perf"]["mean"] > np.mean(rand) + 0.15  # measured 0.97 vs 0.67
    assert learned["finish_rate"] > 0.75


def test_cli_unknown_credit_is_one_line() -> None:
    res = subprocess.run([sys.executable, "-m", "orchestrace", "train", "swarm", "--parallel", "--credit", "nope"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode != 0
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "OT651" in lines[0] and "nope" in lines[0], res.stderr
