"""PettingZoo Parallel API: Swarm with several sub-orchestrators acting at once.

The task has ``branches`` independent workstreams, each a stage DAG of the single-agent Swarm.
The top orchestrator spawns one lead per branch (once), and at every stage sends each lead its
branch's subtasks; all leads choose *simultaneously* how many workers to spawn (0..K), run their
part of the stage exactly as :func:`orchestrace.learn.envs.swarm.run_stage` does, aggregate,
and return to the top orchestrator, which aggregates the stage. The trace is one nested hierarchy,
so Critical Steps recurse through the leads (orchestrace.measure needs no extra rule).

By default (``credit="team"``) every lead receives the shared team reward (R1) at the end: the
PARL reward R of the whole trace (:func:`~orchestrace.learn.envs.swarm.swarm_reward`). With a
per-trace credit method (``loo``/``difference``/``shapley``) each lead instead receives its own
credit read from the trace by ``orchestrace.credit`` (:func:`lead_rewards`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import msgspec
import numpy as np
from pettingzoo import ParallelEnv

from ...core.build import TraceBuilder
from ...core.errors import OrchestraceError
from ...core.model import Event, Trace
from ..rl.tree import MAX_LEAVES, ActionTree, paths_tree, too_large
from .swarm import (
    N_FEATURES,
    ORCH,
    SwarmConfig,
    SwarmTask,
    make_task,
    parl_rates,
    run_stage,
    stage_critical,
    stage_features,
    stage_outcome,
    sub_agents,
    swarm_reward,
)
from .swarm import observation_space as swarm_observation_space

#: "team" (shared reward) or a credit method whose value for one trace depends on that trace alone
LEAD_CREDIT = ("team", "loo", "difference", "shapley")


def check_credit(credit: str) -> None:
    if credit not in LEAD_CREDIT:
        raise OrchestraceError("OT651", f"unknown lead credit {credit!r} (one of {', '.join(LEAD_CREDIT)})")


def lead_view(trace: Trace, reward: float) -> Trace:
    """The trace with every worker's events owned by the lead that spawned it (worker ``s<k>.<lead>.w<i>``),
    so the agent-level unit of a lead is its whole branch, and the episode's reward as channel ``parl``."""

    def lead(agent: str) -> str:
        parts = agent.split(".")
        return parts[1] if len(parts) == 3 else agent

    events = [msgspec.structs.replace(e, agent=lead(e.agent)) for e in trace.events]
    return msgspec.structs.replace(trace, events=events, rewards={**(trace.rewards or {}), "parl": reward})


def lead_rewards(
    trace: Trace, reward: float, method: str, leads: list[str]
) -> tuple[dict[str, float], dict[str, float]]:
    """(reward per lead, raw credit per lead): ``orchestrace.credit`` with ``method`` at the agent unit
    over :func:`lead_view` (value channel R = the episode's PARL reward). The orchestrator's credit,
    the residual and any error penalties are not any one lead's, so R - sum of the leads' credits is
    spread equally over the leads: the leads' rewards sum to R, and they differ exactly as their
    credits do."""
    from ...credit import compute_credit

    ((_, uc),) = compute_credit([lead_view(trace, reward)], method, "agent", channel="parl")
    raw = {a: float(uc.values.get(a, 0.0)) for a in leads}
    spread = (reward - sum(raw.values())) / len(leads)
    return {a: c + spread for a, c in raw.items()}, raw


def hier_stage_critical(durs: list[list[int]], ks: list[int]) -> int:
    """Top decision, message b to lead b, lead b's stage, its return; then the top aggregate."""
    return int(hier_critical(np.array([stage_critical(d, k) for d, k in zip(durs, ks, strict=True)])))


def hier_critical(lead_critical: np.ndarray) -> np.ndarray:
    """:func:`hier_stage_critical` from each lead's stage Critical Steps ``[..., leads]``."""
    return 2 + (np.arange(lead_critical.shape[-1]) + 2 + lead_critical).max(axis=-1)


class SwarmParallelEnv(ParallelEnv):
    """Agents ``lead_0..lead_{B-1}``; one simultaneous decision per stage; obs per lead = Swarm
    stage features of its branch (budget terms refer to the shared budget)."""

    metadata = {"name": "orchestrace_swarm_parallel_v0", "render_modes": []}

    def __init__(
        self,
        branches: int = 3,
        cfg: SwarmConfig | None = None,
        task_seed: int = 0,
        l1: float = 0.0,
        l2: float = 0.0,
        credit: str = "team",
    ) -> None:
        check_credit(credit)
        self.credit = credit
        self.cfg = cfg or SwarmConfig(max_stages=3)
        self.branches = branches
        self.task_seed = task_seed
        self.l1, self.l2 = l1, l2
        self.possible_agents = [f"lead_{b}" for b in range(branches)]
        self.agents: list[str] = []
        self._rng = np.random.default_rng(task_seed)

    def set_weights(self, l1: float, l2: float) -> None:
        """PARL weights of r_parallel and r_finish in the reward (annealed during training)."""
        self.l1, self.l2 = l1, l2

    @functools.cache  # noqa: B019 (PettingZoo's documented pattern: spaces per agent are constant)
    def observation_space(self, agent: str) -> gym.spaces.Space:
        return swarm_observation_space(self.cfg, leads=self.branches)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> gym.spaces.Space:
        return gym.spaces.Discrete(self.cfg.max_agents + 1)

    def tasks(self, i: int) -> list[SwarmTask]:
        """The branches of task i, cut to a common number of stages."""
        ts = [make_task(self.task_seed, i * self.branches + b, self.cfg) for b in range(self.branches)]
        n = min(len(t.stages) for t in ts)
        return [SwarmTask(t.id, t.stages[:n], t.deps[:n]) for t in ts]

    def _budget(self) -> int:
        serial = sum(hier_stage_critical([t.stages[s] for t in self._tasks], [0] * self.branches)
                     for s in range(self._n))  # fmt: skip
        return int(np.ceil(self.cfg.budget_frac * serial))

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        opt = options or {}
        self._i = int(opt["task"]) if "task" in opt else int(self._rng.integers(1 << 30))
        self._tasks = self.tasks(self._i)
        self._n = len(self._tasks[0].stages)
        self._budget_steps = self._budget()
        self._b = TraceBuilder()
        self._b.add(
            Event(
                id="root", t=0.0, type="orchestrator_decision", agent=ORCH, attrs={"decision": "spawn_leads"}
            )
        )
        for a in self.possible_agents:
            self._b.add(
                Event(id=f"spawn.{a}", t=0.0, type="spawn", agent=ORCH, to=a, role="lead"), ("root", "spawn")
            )
        self._s, self._t, self._after, self._crit = 0, 1.0, "root", 1
        self._ctx = [0] * self.branches
        self._ks: list[list[int]] = []
        self._ok = 0
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def _obs(self) -> dict[str, np.ndarray]:
        obs = self._lead_obs(min(self._s, self._n - 1), self._crit, self._ctx)
        return dict(zip(self.possible_agents, obs, strict=True))

    def _lead_obs(self, s: int, crit: int, ctx: Sequence[int]) -> list[np.ndarray]:
        out = []
        for b in range(self.branches):
            f = stage_features(self._tasks[b], s, 0, ctx[b], self.cfg)
            f[4] = (self._budget_steps - crit) / self._budget_steps  # the shared budget
            out.append(f)
        return out

    def action_tree(self, options: dict[str, Any], choose: Callable[[np.ndarray], int]) -> ActionTree:
        """The episode ``options`` starts, its stages before the last ``d`` played with ``choose``
        (each lead draws its width from the policy: the sampled prefix), then every joint width
        choice of the last ``d`` stages enumerated, ``d`` the most stages whose
        ``(K + 1) ^ (leads x d)`` leaves fit :data:`~.tree.MAX_LEAVES` (3 leads, K = 8: d = 1, 729
        leaves). Each leaf's reward is the team PARL reward :func:`swarm_reward` reads from the
        trace: the prefix's events as recorded, each enumerated stage's from its
        :func:`~.swarm.stage_outcome` per lead. ``OT650`` when one stage alone has more joint
        choices than the cap, and for per-lead credit (a removal game per trace, not enumerated)."""
        if self.credit != "team":
            raise OrchestraceError("OT650", f"exact PG on the Parallel Swarm sums the team reward over the "
                                   f"action tree; per-lead credit ({self.credit!r}) is not enumerated: use "
                                   "credit='team', or reinforce, ppo or grpo")  # fmt: skip
        joint = (self.cfg.max_agents + 1) ** self.branches
        if joint > MAX_LEAVES:
            raise too_large(
                "Parallel Swarm",
                joint,
                f"{self.cfg.max_agents + 1} widths ^ {self.branches} leads, one stage",
            )
        depth = 1
        while joint ** (depth + 1) <= MAX_LEAVES:
            depth += 1
        obs, _ = self.reset(options=options)
        pre_obs: list[np.ndarray] = []
        pre_act: list[int] = []
        while self.agents and self._n - self._s > depth:
            acts = {a: int(choose(obs[a])) for a in self.agents}
            pre_obs += [obs[a] for a in self.possible_agents]
            pre_act += [acts[a] for a in self.possible_agents]
            obs, rew, *_ = self.step(acts)
            if not self.agents:  # a late stage of the prefix ended the episode: one leaf, no decision
                r = float(next(iter(rew.values())))
                tree = paths_tree([], [([], [], r)])
                return ActionTree(np.asarray(pre_obs, np.float32), tree.node, tree.act, tree.reward,
                                  np.arange(len(pre_obs)), np.asarray(pre_act, np.int64))  # fmt: skip
        tree = self._enumerate(offset=len(pre_obs))
        return ActionTree(np.asarray([*pre_obs, *tree.obs], np.float32).reshape(-1, N_FEATURES), tree.node,
                          tree.act, tree.reward, np.arange(len(pre_obs)), np.asarray(pre_act, np.int64))  # fmt: skip

    def _enumerate(self, offset: int) -> ActionTree:
        """Every joint width choice from the current stage to the end (node ids from ``offset``),
        a stage's joint choices at once: each lead's :func:`~.swarm.stage_outcome` per width, picked
        for every joint choice, summed as :func:`swarm_reward` reads the trace (:func:`parl_rates`)."""
        cfg, n_lead, k1 = self.cfg, self.branches, self.cfg.max_agents + 1
        n_sub = sum(len(st) for t in self._tasks for st in t.stages)
        subs = sub_agents(self._b.events)
        workers = [v for a, v in subs.items() if a not in self.possible_agents]
        leads = [subs[a] for a in self.possible_agents]
        joint = np.array(list(itertools.product(range(k1), repeat=n_lead)), np.int64)  # [J, leads]
        lanes = np.arange(n_lead)
        obs: list[np.ndarray] = []
        blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # leaves' nodes, actions, rewards

        def visit(s: int, crit: int, ctx: tuple[int, ...], nodes: list[int], acts: list[int], ok: int,
                  w: np.ndarray, steps: np.ndarray, ok_ret: np.ndarray, err: np.ndarray) -> None:  # fmt: skip
            """``w``: workers spawned, useful, finished so far; ``steps``, ``ok_ret``, ``err``: each
            lead's steps, whether it returned ok, whether it recorded an error."""
            ids = [offset + len(obs) + b for b in range(n_lead)]
            obs.extend(self._lead_obs(s, crit, ctx))
            durs = [t.stages[s] for t in self._tasks]
            outs = [[stage_outcome(tuple(d), k, cfg.ctx_sub, cfg.ctx_main - c) for k in range(k1)]
                    for d, c in zip(durs, ctx, strict=True)]  # fmt: skip

            def pick(field: str) -> np.ndarray:  # [J, leads]: each lead's value under each joint choice
                return np.array([[getattr(o, field) for o in row] for row in outs])[lanes, joint]

            crit2 = crit + hier_critical(pick("critical"))
            late = crit2 > self._budget_steps
            ok_b = pick("ok")
            full = ok_b == np.array([len(d) for d in durs])  # a lead returns ok iff every subtask is
            ok2 = ok + np.where(late, 0, ok_b.sum(1))
            w2 = w + np.stack(
                [pick("spawned").sum(1), pick("useful").sum(1), pick("finished").sum(1)], axis=1
            )
            steps2 = steps + pick("owner_steps") + 1  # the lead's stage events, then its return
            ok_ret2, err2 = ok_ret | full, err | pick("owner_error") | ~full
            done = late | (s + 1 >= self._n)
            d = np.flatnonzero(done)
            if len(d):
                useful = w2[d, 1] + (steps2[d] >= 2).sum(1)
                finished = w2[d, 2] + (ok_ret2[d] & ~err2[d]).sum(1)
                r_par, r_fin = parl_rates(w2[d, 0] + n_lead, useful, finished, cfg.parallel_cap)
                blocks.append((np.tile([*nodes, *ids], (len(d), 1)),
                               np.concatenate([np.tile(np.array(acts, np.int64), (len(d), 1)), joint[d]], axis=1),
                               ok2[d] / n_sub + self.l1 * r_par + self.l2 * r_fin))  # fmt: skip
            for r in np.flatnonzero(~done):
                ctx2 = tuple(c + outs[b][joint[r, b]].used for b, c in enumerate(ctx))
                visit(s + 1, int(crit2[r]), ctx2, [*nodes, *ids], [*acts, *joint[r].tolist()], int(ok2[r]), w2[r],
                      steps2[r], ok_ret2[r], err2[r])  # fmt: skip

        w0 = np.array([len(workers), sum(1 for v in workers if v.steps >= 2),
                       sum(1 for v in workers if v.ok_return and not v.error)])  # fmt: skip
        visit(self._s, self._crit, tuple(self._ctx), [], [], self._ok, w0, np.array([a.steps for a in leads]),
              np.array([a.ok_return for a in leads]), np.array([a.error for a in leads]))  # fmt: skip
        depth = max(b[0].shape[1] for b in blocks)
        node = np.concatenate(
            [np.pad(n, ((0, 0), (0, depth - n.shape[1])), constant_values=-1) for n, _, _ in blocks]
        )
        act = np.concatenate([np.pad(a, ((0, 0), (0, depth - a.shape[1]))) for _, a, _ in blocks])
        empty = np.zeros(0, np.int64)
        reward = np.concatenate([r for _, _, r in blocks]).astype(np.float32)
        return ActionTree(np.asarray(obs, np.float32), node.astype(np.int64), act, reward, empty, empty)

    def step(self, actions: dict[str, int]) -> tuple[dict, dict, dict, dict, dict]:
        ks = [int(actions.get(a, 0)) for a in self.possible_agents]
        s, b_ = self._s, self._b
        durs = [t.stages[s] for t in self._tasks]
        self._crit += hier_stage_critical(durs, ks)
        late = self._crit > self._budget_steps
        d = b_.add(Event(id=f"s{s}.top", t=self._t, type="orchestrator_decision", agent=ORCH,
                         attrs={"decision": "assign_stage", "stage": s}), (self._after, "causal"))  # fmt: skip
        rets, t_agg, ok_stage = [], self._t + 1, 0
        for b, a in enumerate(self.possible_agents):
            tm = self._t + 1 + b
            m = b_.add(Event(id=f"s{s}.msg.{a}", t=tm, type="message", agent=ORCH, from_=ORCH, to=a,
                             tool="assign_task", attrs={"stage": s}),
                       (d if b == 0 else f"s{s}.msg.{self.possible_agents[b - 1]}", "causal"),
                       *([(f"spawn.{a}", "causal")] if s == 0 else []))  # fmt: skip
            t_end, agg, ok, used = run_stage(b_, a, f"s{s}.{a}", tm + 1, m, durs[b], ks[b], self.cfg.ctx_sub,
                                             self.cfg.ctx_main - self._ctx[b], {"stage": s}, after_type="message")  # fmt: skip
            self._ctx[b] += used
            status = "ok" if ok == len(durs[b]) else "error"
            rets.append(b_.add(Event(id=f"s{s}.ret.{a}", t=t_end, t_end=t_end + 1, type="return", agent=a, from_=a,
                                     to=ORCH, status=status, attrs={"subtasks_ok": ok}), (agg, "causal")))  # fmt: skip
            ok_stage += ok
            t_agg = max(t_agg, t_end + 1)
        attrs: dict[str, Any] = {"subtasks_ok": ok_stage, "subtasks": sum(len(x) for x in durs), "stage": s,
                                 "critical_so_far": self._crit}  # fmt: skip
        if late:
            attrs.update(late=True, budget=self._budget_steps)
        all_ok = ok_stage == attrs["subtasks"] and not late
        self._after = b_.add(Event(id=f"s{s}.agg", t=t_agg, type="aggregate", agent=ORCH,
                                   status="ok" if all_ok else "error", attrs=attrs),
                             *[(r, "return") for r in rets])  # fmt: skip
        if not late:
            self._ok += ok_stage
        self._t = t_agg + 1
        self._ks.append(ks)
        self._s += 1
        done = late or self._s >= self._n
        agents = list(self.agents)
        if not done:
            return (self._obs(), {a: 0.0 for a in agents}, {a: False for a in agents},
                    {a: False for a in agents}, {a: {} for a in agents})  # fmt: skip
        tr = self.trace()
        rw = swarm_reward(tr, self.l1, self.l2, self.cfg.parallel_cap)
        self.agents = []
        info = {"trace": tr, **rw, "critical": self._crit, "late": late}
        rew = dict.fromkeys(agents, rw["reward"])
        if self.credit != "team":
            rew, info["lead_credit"] = lead_rewards(tr, rw["reward"], self.credit, agents)
        return ({a: np.zeros(N_FEATURES, np.float32) for a in agents}, rew, {a: True for a in agents}, {a: False for a in agents},
                {a: info for a in agents})  # fmt: skip

    def trace(self) -> Trace:
        n_sub = sum(len(st) for t in self._tasks for st in t.stages)
        return self._b.trace(
            trace_id=f"swarm-parallel-{self.task_seed}-{self._i}",
            task_id=f"swarm-parallel-{self.task_seed}-{self._i}",
            system="orchestrace.learn.swarm_parallel",
            topology="hierarchical",
            rewards={"team": self._ok / n_sub},
            costs={"tokens": 0.0, "wall_clock_s": self._t, "critical_steps": float(self._crit)},
            metadata={
                "env": "SwarmParallel",
                "n_subtasks": n_sub,
                "budget_critical_steps": self._budget_steps,
                "spawn": self._ks,
            },  # fmt: skip
        )


def parallel_env(**kwargs: Any) -> SwarmParallelEnv:
    return SwarmParallelEnv(**kwargs)
