"""PettingZoo Parallel Swarm: API conformance, valid nested traces, recursive Critical Steps."""

from __future__ import annotations

import numpy as np
from pettingzoo.test import parallel_api_test

from orchestrace.core.validate import validate_trace
from orchestrace.learn.envs.swarm import stage_critical, swarm_reward
from orchestrace.learn.envs.swarm_parallel import SwarmParallelEnv, hier_stage_critical


def test_parallel_api() -> None:
    parallel_api_test(SwarmParallelEnv(), num_cycles=10)


def test_hier_critical_by_hand() -> None:
    # top decision, message b+1 to lead b, lead stage, lead return, top aggregate; lead 1 does [4]
    # itself: its decision with the first tool call (1), 3 more tool calls, its aggregate = 5 steps
    durs, ks = [[5, 3, 2], [4]], [2, 0]
    assert hier_stage_critical(durs, ks) == 2 + max(0 + 1 + stage_critical([5, 3, 2], 2) + 1, 1 + 1 + 5 + 1)


def test_all_leads_act_and_share_the_trace_reward() -> None:
    env = SwarmParallelEnv(branches=3)
    rng = np.random.default_rng(0)
    for i in range(6):
        obs, _ = env.reset(options={"task": i})
        assert set(obs) == {"lead_0", "lead_1", "lead_2"}
        while env.agents:
            obs, rew, term, trunc, info = env.step({a: int(rng.integers(0, 9)) for a in env.agents})
        inf = info["lead_0"]
        tr = inf["trace"]
        assert [f for f in validate_trace(tr) if f.severity == "error"] == []
        measured = swarm_reward(tr, measure=True)
        assert measured["critical_steps"] == inf["critical"]  # nested hierarchy, no extra rule
        assert len(set(rew.values())) == 1 and rew["lead_0"] == inf["reward"]
        leads = {e.to for e in tr.events if e.type == "spawn" and e.agent == "orchestrator"}
        assert leads == {"lead_0", "lead_1", "lead_2"}


def test_parallel_eval_runs_every_lead() -> None:
    from orchestrace.learn.experiments import eval_swarm_parallel

    r = eval_swarm_parallel(None, eval_tasks=3)
    m = r.methods
    assert m["serial"].finish_rate < m["makespan_heuristic"].finish_rate == 1.0
    assert m["max_agents"].finish_rate < 1.0  # idle workers under every lead
