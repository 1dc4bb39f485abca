"""Swarm: hand-computed Critical Steps, measured == analytic, PARL terms == R7, the baselines."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from orchestrace.core.validate import validate_trace
from orchestrace.learn.envs.swarm import (
    BASELINES,
    SwarmConfig,
    SwarmEnv,
    SwarmTask,
    assign,
    baseline_ks,
    heuristic_k,
    make_task,
    stage_critical,
    swarm_reward,
    swarm_trace,
)
from orchestrace.learn.rl.rollouts import run_episode
from orchestrace.reward.orchestration import r7_orchestration


def test_assignment_and_stage_critical_by_hand() -> None:
    assert assign([5, 3, 2], 2) == [[0], [1, 2]]  # loads 5 and 5; heaviest first, ties by index
    # decision + messages 1..i + work + return, max over agents, + aggregate
    assert stage_critical([5, 3, 2], 2) == 2 + max(0 + 1 + 5 + 1, 1 + 1 + 5 + 1)
    # k = 0: the decision and its direct first tool call (1 step), 9 more tool calls, the aggregate
    assert stage_critical([5, 3, 2], 0) == 1 + 9 + 1
    assert stage_critical([5, 3, 2], 3) == 2 + max(1 + 5 + 1, 2 + 3 + 1, 3 + 2 + 1)
    assert stage_critical([4], 3) == 2 + max(
        1 + 4 + 1, 2 + 0 + 1, 3 + 0 + 1
    )  # idle agents still cost messages


def test_measured_critical_steps_equal_the_schedule() -> None:
    cfg = SwarmConfig()
    rng = np.random.default_rng(0)
    for i in range(12):
        task = make_task(7, i, cfg)
        ks = [int(k) for k in rng.integers(0, cfg.max_agents + 1, size=len(task.stages))]
        tr, run = swarm_trace(task, ks, cfg)
        assert [f for f in validate_trace(tr) if f.severity == "error"] == []
        m = swarm_reward(tr, measure=True)
        assert m["critical_steps"] == run.critical
        # the light PARL terms equal R7's own (Kimi forms, useful = >= 2 steps)
        r7 = r7_orchestration(tr, parallel_cap=cfg.parallel_cap, min_steps=2).channels
        light = swarm_reward(tr)
        assert light["r_parallel"] == pytest.approx(r7["r_parallel"])
        assert light["r_finish"] == pytest.approx(r7["r_finish"])


def test_spurious_parallelism_and_context_overflow() -> None:
    cfg = SwarmConfig(budget_frac=10.0)
    one = SwarmTask("t", [[4]])
    tr, _ = swarm_trace(one, [3], cfg)
    r = swarm_reward(tr)
    assert r["r_finish"] == pytest.approx(1 / 3)  # two sub-agents got no subtask
    assert r["r_perf"] == 1.0 and r["r_parallel"] == pytest.approx(1 / 8)
    big = SwarmTask("t", [[9, 9]])
    tr, _ = swarm_trace(big, [1], cfg)  # 18 steps in one sub-agent (context 16): the second fails
    assert swarm_reward(tr)["r_perf"] == pytest.approx(0.5) and swarm_reward(tr)["r_finish"] == 0.0
    tr, _ = swarm_trace(big, [2], cfg)
    assert swarm_reward(tr)["r_perf"] == 1.0 and swarm_reward(tr)["r_finish"] == 1.0


def test_budget_cuts_the_episode() -> None:
    cfg = SwarmConfig(budget_frac=0.6)
    task = SwarmTask("t", [[5, 5, 5, 5], [5, 5, 5, 5]])
    # serial Critical Steps 2 x 22 = 44, budget ceil(26.4) = 27; serial stage 1 already takes 22,
    # stage 2 would end at 44 > 27: late, not counted
    tr, run = swarm_trace(task, [0, 0], cfg)
    assert run.late and run.stages_run == 2
    r = swarm_reward(tr, l1=0.5, l2=0.5)
    assert r["r_perf"] == pytest.approx(4 / 8)  # stage 1 ok (20 own steps <= 24), stage 2 late
    tr, run = swarm_trace(task, [4, 4], cfg)  # 2 x (2 + 4 + 1 + 5 + 1) = 26 <= 27
    assert not run.late and swarm_reward(tr)["r_perf"] == 1.0


def test_heuristic_never_spawns_idle_agents() -> None:
    cfg = SwarmConfig()
    for i in range(30):
        for s in make_task(3, i, cfg).stages:
            assert heuristic_k(s, cfg) >= 1 and heuristic_k(s, cfg) <= len(s)


def test_env_and_baselines() -> None:
    env = SwarmEnv(task_seed=1)
    check_env(env, skip_render_check=True)
    cfg = env.cfg
    means = {}
    for b in BASELINES:
        rs = []
        for i in range(40):
            _, _, r, info = run_episode(
                env, lambda _o, b=b: baseline_ks(b, env._task, cfg)[len(env._ks)], {"task": i}
            )
            rs.append(info["r_perf"])
        means[b] = np.mean(rs)
    assert means["serial"] < 0.3 < means["makespan_heuristic"]  # serial collapse fails


def test_a_policy_of_the_old_observation_is_a_clear_error(tmp_path) -> None:
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.learn.experiments import eval_swarm
    from orchestrace.learn.rl.rollouts import NumpyPolicy, PolicyMeta

    old = NumpyPolicy(PolicyMeta("Swarm", 18, 9, [], 0, {}), [(np.zeros((9, 18)), np.zeros(9))])  # (out, in)
    path = old.save(tmp_path / "swarm-18")
    with pytest.raises(OrchestraceError, match="18 features, the Swarm env has 26"):
        eval_swarm(path, eval_tasks=1)


@pytest.mark.parametrize(
    ("meta", "weights", "said"),
    [
        # a matmul error at the first decision (exit 3), a NaN policy, a missing tensor (exit 3)
        ({}, [(np.zeros((9, 3)), np.zeros(9))], "layer 0 is (9, 3) + (9,), expected (9, 26) + (9,)"),
        ({}, [(np.full((9, 26), np.nan), np.zeros(9))], "layer 0 holds weights that are not finite"),
        ({"hidden": "ab"}, None, "Expected `array`, got `str` - at `$.hidden`"),
        ({"obs_dim": "26"}, None, "Expected `int`, got `str` - at `$.obs_dim`"),
    ],
)
def test_a_policy_file_whose_layers_do_not_fit_is_refused(tmp_path, meta, weights, said) -> None:
    import json

    from safetensors.numpy import save_file

    from orchestrace.core.errors import OrchestraceError
    from orchestrace.learn.rl.rollouts import NumpyPolicy

    cfg = {"env": "Swarm", "obs_dim": 26, "n_actions": 9, "hidden": [], "seed": 0, "extra": {}, **meta}
    w = weights or [(np.zeros((9, 26)), np.zeros(9))]
    tensors = {
        k: v.astype(np.float32)
        for i, (a, b) in enumerate(w)
        for k, v in ((f"l{i}.weight", a), (f"l{i}.bias", b))
    }
    save_file(tensors, str(tmp_path / "p.safetensors"), metadata={"config": json.dumps(cfg)})
    with pytest.raises(OrchestraceError) as e:
        NumpyPolicy.load(tmp_path / "p.safetensors")
    assert e.value.code == "OT664" and said in e.value.message


def test_a_policy_whose_recorded_cost_is_no_number_is_named(tmp_path) -> None:
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.learn.experiments.protocol import policy_number
    from orchestrace.learn.rl.rollouts import NumpyPolicy, PolicyMeta

    pol = NumpyPolicy(
        PolicyMeta("RetryStop", 9, 2, [], 0, {"cost": "abc"}), [(np.zeros((2, 9)), np.zeros(2))]
    )
    with pytest.raises(
        OrchestraceError, match="the policy's cost must be a finite number >= 0, got 'abc'"
    ) as e:
        policy_number(pol, "cost", 0.02, "p.safetensors")  # eval retry's float("abc"): exit 3
    assert e.value.path == "p.safetensors"
