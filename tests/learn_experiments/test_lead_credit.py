"""Per-lead credit as each lead's reward in the PettingZoo Parallel Swarm (``credit=`` option)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from tracekit import ev, mk

from orchestrace.core.errors import OrchestraceError
from orchestrace.core.model import Trace
from orchestrace.learn.envs.swarm import swarm_reward
from orchestrace.learn.envs.swarm_parallel import SwarmParallelEnv, lead_rewards
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


def _two_leads() -> Trace:
    """main decides, lead_0 and lead_1 act on it (lead_1's action fails), main aggregates both."""
    es = [
        ev("d", 0, "orchestrator_decision", "main"),
        ev("a0", 1, "message", "lead_0", to="main"),
        ev("a1", 1, "message", "lead_1", to="main", status="error"),
        ev("agg", 2, "aggregate", "main"),
    ]
    return mk(
        es,
        [
            ("d", "a0", "causal"),
            ("d", "a1", "causal"),
            ("a0", "agg", "aggregate"),
            ("a1", "agg", "aggregate"),
        ],
    )


@pytest.mark.parametrize(
    ("method", "credit", "reward"),
    [
        # docs/credit.md: v(S) = R |K(S) & A| / |A| - (failed events in K(S)), A = all 4 events; an
        # event survives with a surviving predecessor (edges only), so without main nothing survives
        # and agg needs a0 or a1: v(main) = R/4, v(main, lead_0) = 3R/4, v(main, lead_1) = 3R/4 - 1,
        # v(all) = R - 1. LOO: lead_0 = (R - 1) - (3R/4 - 1) = R/4; lead_1 = (R - 1) - 3R/4 = R/4 - 1.
        ("loo", {"lead_0": 0.25, "lead_1": -0.75}, {"lead_0": 1.0, "lead_1": 0.0}),
        # Shapley over {main, lead_0, lead_1}: lead_0 = 1/6 (R/2) + 2/6 (R/4) = R/6;
        # lead_1 = 1/6 (R/2 - 1) + 2/6 (R/4 - 1) = R/6 - 1/2
        ("shapley", {"lead_0": 1 / 6, "lead_1": -1 / 3}, {"lead_0": 0.75, "lead_1": 0.25}),
    ],
)
def test_lead_rewards_by_hand(method: str, credit: dict, reward: dict) -> None:
    # R = 1; the rest, R - (sum of the leads' credits), is spread equally over the two leads
    rew, raw = lead_rewards(_two_leads(), 1.0, method, ["lead_0", "lead_1"])
    assert raw == pytest.approx(credit, abs=1e-12)
    assert rew == pytest.approx(reward, abs=1e-12)


@pytest.mark.parametrize("method", ["loo", "shapley"])
def test_lead_rewards_sum_to_the_team_reward(method: str) -> None:
    env = SwarmParallelEnv(branches=3, credit=method, l1=0.2, l2=1.0)
    rng = np.random.default_rng(0)
    for task in range(4):
        rew, info = _episode(env, task, rng.integers(0, 9, size=(10, 3)).tolist())
        big_r, credit = info["reward"], info["lead_credit"]
        spread = (big_r - sum(credit.values())) / 3
        for a in LEADS:
            assert rew[a] == pytest.approx(credit[a] + spread, abs=1e-12)
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
    a = train_swarm_parallel(seed=3, iters=3, batch=4, eval_tasks=3, credit="loo").result
    b = train_swarm_parallel(seed=3, iters=3, batch=4, eval_tasks=3, credit="loo").result
    assert a.learning_curve == b.learning_curve and a.methods == b.methods and a.credit == "loo"
    with pytest.raises(OrchestraceError) as e:
        train_swarm_parallel(iters=1, credit="nope")
    assert e.value.code == "OT651"


def test_loo_training_beats_random() -> None:
    r = train_swarm_parallel(seed=0, iters=25, batch=16, credit="loo", eval_tasks=30).result
    env = SwarmParallelEnv(task_seed=SWARM_TEST_SEED)
    rng = np.random.default_rng(0)
    rand = []
    for i in range(30):
        env.reset(options={"task": i})
        while env.agents:
            _, _, _, _, inf = env.step({a: int(rng.integers(0, 9)) for a in env.agents})
        rand.append(swarm_reward(inf["lead_0"]["trace"])["r_perf"])
    learned = r.methods["learned_per_lead"]
    assert learned.r_perf.mean > np.mean(rand) + 0.15  # measured 0.97 vs 0.67
    assert learned.finish_rate > 0.75


def test_cli_unknown_credit_is_one_line() -> None:
    res = subprocess.run([sys.executable, "-m", "orchestrace", "train", "swarm", "--parallel", "--credit", "nope"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode != 0
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "OT651" in lines[0] and "nope" in lines[0], res.stderr
