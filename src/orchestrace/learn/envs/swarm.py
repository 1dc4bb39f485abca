"""Swarm (O1): how many sub-agents to spawn for each stage of a decomposable task.

A task is a DAG of subtasks in stages (every subtask of stage s depends on subtasks of stage
s - 1), each subtask taking a number of agent steps. At each stage the orchestrator picks
k in 0..K: k = 0 does the stage itself (serially, in its own context), k >= 1 spawns k fresh
sub-agents, assigns them the subtasks (longest first, to the least loaded; one ``assign_task``
message per sub-agent, each a step of the orchestrator), waits for their returns and aggregates.

What makes the choice non-trivial (all visible in the trace):

* every ``assign_task`` message is one orchestrator step on the critical path, so more sub-agents
  cost Critical Steps (Kimi: ``create_subagent``/``assign_task`` are tool calls);
* a sub-agent's context holds ``ctx_sub`` steps: a subtask that ends past it fails, and so does a
  stage the orchestrator does itself once its own context (``ctx_main`` steps for the whole
  episode) is full; serial collapse fails;
* a sub-agent that receives no subtask returns an error (spurious parallelism);
* the Critical Steps budget: a stage that ends past it is late and counts as failed, and the
  episode ends there.

Reward (PARL, spec §3.3), all read from the trace by :func:`swarm_reward`:
``r_perf`` = subtasks completed ok in on-time stages / all subtasks; ``r_parallel`` and
``r_finish`` = :func:`orchestrace.reward.orchestration.r7_orchestration` (Kimi forms; a useful
sub-agent took >= 2 steps, cap ``parallel_cap``); ``R = r_perf + l1 r_parallel + l2 r_finish`` with
l1, l2 annealed to 0 during training. Critical Steps is the budget, not a reward term.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from ...core.build import TraceBuilder
from ...core.errors import BadInput
from ...core.model import Event, Trace
from ...runtime.programs.swarm import assign
from ..rl.tree import MAX_LEAVES, ActionTree, paths_tree, too_large

ORCH = "orchestrator"
FEATURE_NAMES = (
    "width",
    "work",
    "max_dur",
    "mean_dur",
    "budget_left",
    "stages_left",
    "work_left",
    "main_ctx_used",
    "slack",
    "bias",
    *(f"width_is_{w}" for w in range(1, 9)),  # one-hot width (8 = 8 or more): narrow stages stand apart
    # the makespan heuristic's k for this stage, one-hot: the policy starts from the best rule's
    # choice (held-out r_perf, seeds 0-2: +0.000, +0.006, +0.002 over the heuristic; without the
    # feature seed 0 stayed 0.006 under it)
    *(f"heuristic_k_is_{k}" for k in range(1, 9)),
)
N_FEATURES = len(FEATURE_NAMES)
DUR_MIN, DUR_MAX = 2, 10  # agent steps of one subtask


@dataclass
class SwarmConfig:
    max_agents: int = 8  # K: actions are 0..K
    ctx_sub: int = 16  # steps a sub-agent can hold
    ctx_main: int = 24  # steps of own work the orchestrator can hold over the episode
    budget_frac: float = 0.6  # Critical Steps budget = budget_frac x the serial schedule's Critical Steps
    parallel_cap: int = 8
    min_stages: int = 2
    max_stages: int = 4
    max_width: int = 8
    narrow_p: float = 0.25


@dataclass
class SwarmTask:
    id: str
    stages: list[list[int]]  # durations (agent steps) of the subtasks of each stage
    deps: list[list[list[int]]] = field(default_factory=list)  # deps[s][j]: subtasks of stage s-1

    @property
    def n_subtasks(self) -> int:
        return sum(len(s) for s in self.stages)


def make_task(seed: int, index: int, cfg: SwarmConfig) -> SwarmTask:
    """A random stage DAG; the same (seed, index) always gives the same task."""
    rng = np.random.default_rng([seed, index])
    n = int(rng.integers(cfg.min_stages, cfg.max_stages + 1))
    stages, deps = [], []
    for s in range(n):
        w = (
            int(rng.integers(1, 3))
            if rng.random() < cfg.narrow_p
            else int(rng.integers(3, cfg.max_width + 1))
        )
        stages.append([DUR_MIN + int(x) for x in rng.binomial(DUR_MAX - DUR_MIN, 0.4, size=w)])
        if s == 0:
            deps.append([[] for _ in range(w)])
        else:
            prev = len(stages[s - 1])
            deps.append(
                [sorted({int(x) for x in rng.integers(prev, size=int(rng.integers(1, 3)))}) for _ in range(w)]
            )
    return SwarmTask(f"swarm-{seed}-{index}", stages, deps)


def stage_critical(durations: list[int], k: int) -> int:
    """Critical Steps of one stage: decision (+ its spawn group), messages 1..i, sub-agent i's
    work and return, then the aggregate; k = 0: the decision with its direct first tool call (one
    step, as Kimi counts a stage's main action), the remaining work, the aggregate."""
    if k == 0:
        return 2 + max(0, sum(durations) - 1)
    groups = assign(durations, k)
    return 2 + max(i + 1 + sum(durations[j] for j in g) + 1 for i, g in enumerate(groups))


def serial_critical(task: SwarmTask) -> int:
    return sum(stage_critical(s, 0) for s in task.stages)


def budget_of(task: SwarmTask, cfg: SwarmConfig) -> int:
    return int(np.ceil(cfg.budget_frac * serial_critical(task)))


def run_stage(
    b: TraceBuilder,
    owner: str,
    prefix: str,
    t0: float,
    after: str | None,
    durations: list[int],
    k: int,
    ctx_sub: int,
    own_ctx_left: int,
    stage_attrs: dict[str, Any],
    after_type: str = "causal",
) -> tuple[float, str, int, int]:
    """Record one stage run by ``owner`` starting at t0 after event ``after``.

    Returns (time after the aggregate, aggregate id, subtasks ok, own context steps used)."""
    dep = [(after, after_type)] if after else []
    d = b.add(Event(id=f"{prefix}.d", t=t0, type="orchestrator_decision", agent=owner,
                    attrs={"decision": "spawn", "k": k, **stage_attrs}), *dep)  # fmt: skip
    ok_total = 0
    used = 0
    if k == 0:
        prev, t = d, t0 + 1
        for j, dur in enumerate(durations):
            fails = used + dur > own_ctx_left
            used += dur
            for s in range(dur):
                c = b.add(Event(id=f"{prefix}.t{j}.{s}", t=t, t_end=t + 0.5, type="tool_call", agent=owner,
                                tool="work", call_id=f"{prefix}.t{j}.{s}"), (prev, "causal"))  # fmt: skip
                last = s == dur - 1
                prev = b.add(Event(id=f"{prefix}.t{j}.{s}r", t=t + 0.5, t_end=t + 1, type="tool_result", agent=owner,
                                   tool="work", call_id=c, status="error" if fails and last else "ok",
                                   attrs={"subtask": j} if last else None), (c, "tool_dependency"))  # fmt: skip
                t += 1
            ok_total += 0 if fails else 1
        returns, t_agg = [prev], t
    else:
        groups = assign(durations, k)
        workers = [f"{prefix}.w{i}" for i in range(k)]
        for i, w in enumerate(workers):
            b.add(
                Event(id=f"{prefix}.sp{i}", t=t0, type="spawn", agent=owner, to=w, role="worker"),
                (d, "spawn"),
            )
        returns, t_agg = [], t0 + 1
        for i, (w, g) in enumerate(zip(workers, groups, strict=True)):
            tm = t0 + 1 + i
            m = b.add(Event(id=f"{prefix}.m{i}", t=tm, type="message", agent=owner, from_=owner, to=w, tool="assign_task",
                            attrs={"subtasks": g}), (f"{prefix}.sp{i}", "causal"),
                      *([(f"{prefix}.m{i - 1}", "temporal")] if i else []))  # fmt: skip
            prev, prev_type, t, load, ok = m, "message", tm + 1, 0, 0
            for j in g:
                dur = durations[j]
                fails = load + dur > ctx_sub
                load += dur
                for s in range(dur):
                    c = b.add(Event(id=f"{prefix}.w{i}.t{j}.{s}", t=t, t_end=t + 0.5, type="tool_call", agent=w,
                                    tool="work", call_id=f"{prefix}.w{i}.t{j}.{s}"), (prev, prev_type))  # fmt: skip
                    last = s == dur - 1
                    prev = b.add(Event(id=f"{prefix}.w{i}.t{j}.{s}r", t=t + 0.5, t_end=t + 1, type="tool_result",
                                       agent=w, tool="work", call_id=c,
                                       status="error" if fails and last else "ok",
                                       attrs={"subtask": j} if last else None), (c, "tool_dependency"))  # fmt: skip
                    prev_type = "tool_dependency"
                    t += 1
                ok += 0 if fails else 1
            good = bool(g) and ok == len(g)
            r = b.add(Event(id=f"{prefix}.w{i}.ret", t=t, t_end=t + 1, type="return", agent=w, from_=w, to=owner,
                            status="ok" if good else "error",
                            attrs={"subtasks_ok": ok, "subtasks": len(g)} if g else {"reason": "no subtask assigned"}),
                      (prev, "message" if prev_type == "message" else "causal"))  # fmt: skip
            returns.append(r)
            ok_total += ok
            t_agg = max(t_agg, t + 1)
    agg_id = f"{prefix}.agg"
    b.add(Event(id=agg_id, t=t_agg, type="aggregate", agent=owner, status="ok" if ok_total == len(durations) else "error",
                attrs={"subtasks_ok": ok_total, "subtasks": len(durations)}),
          *[(r, "aggregate" if k else "causal") for r in returns])  # fmt: skip
    return t_agg + 1, agg_id, ok_total, used


@dataclass(frozen=True)
class SubAgent:
    """What the PARL terms read of one spawned agent: its steps, an ok return, an error event."""

    steps: int
    ok_return: bool
    error: bool


def sub_agents(events: list[Event]) -> dict[str, SubAgent]:
    """Every spawned agent of ``events`` (in spawn order) as :class:`SubAgent`."""
    from ...reward import STEP_TYPES

    subs = dict.fromkeys(e.to for e in events if e.type == "spawn" and e.to)
    steps = dict.fromkeys(subs, 0)
    ok_ret = dict.fromkeys(subs, False)
    err = dict.fromkeys(subs, False)
    for e in events:
        if e.agent in steps:
            steps[e.agent] += e.type in STEP_TYPES
            ok_ret[e.agent] |= e.type == "return" and e.status != "error"
            err[e.agent] |= e.status == "error"
    return {a: SubAgent(steps[a], ok_ret[a], err[a]) for a in subs}  # type: ignore[index]


def parl_rates(spawned: Any, useful: Any, finished: Any, parallel_cap: int) -> tuple[Any, Any]:
    """(r_parallel, r_finish) from counts of spawned agents, useful ones (>= 2 steps) and finished
    ones (an ok return, no error); numbers or numpy arrays of them (exact PG's joint choices)."""
    some = np.asarray(spawned) > 0
    par = np.minimum(useful, parallel_cap) / parallel_cap if parallel_cap > 0 else np.zeros(np.shape(spawned))
    return np.where(some, par, 0.0), np.where(some, np.asarray(finished) / np.maximum(spawned, 1), 0.0)


def parl_terms(trace: Trace, parallel_cap: int = 8) -> tuple[float, float]:
    """(r_parallel, r_finish) with exactly the Kimi-form definitions of
    :func:`orchestrace.reward.orchestration.r7_orchestration` (``min_steps=2``), read from the
    events alone (no graph, so it is cheap enough for every training episode; the tests check it
    against R7)."""
    subs = sub_agents(trace.events).values()
    useful = sum(1 for a in subs if a.steps >= 2)
    r_par, r_fin = parl_rates(
        len(subs), useful, sum(1 for a in subs if a.ok_return and not a.error), parallel_cap
    )
    return float(r_par), float(r_fin)


@dataclass(frozen=True)
class StageOutcome:
    """One stage run with k agents, read from the events :func:`run_stage` records: its Critical
    Steps, subtasks ok and own context used; its workers' counts for the PARL terms (spawned,
    useful, finished); the owner's steps and whether it recorded an error (the owner is a
    spawned lead in the Parallel Swarm)."""

    critical: int
    ok: int
    used: int
    spawned: int
    useful: int
    finished: int
    owner_steps: int
    owner_error: bool


@functools.lru_cache(maxsize=1 << 16)
def stage_outcome(durations: tuple[int, ...], k: int, ctx_sub: int, own_ctx_left: int) -> StageOutcome:
    """:class:`StageOutcome` of one stage (cached: exact PG reads every stage of every tree)."""
    from ...reward import STEP_TYPES

    b = TraceBuilder()
    _, _, ok, used = run_stage(b, "owner", "s", 0.0, None, list(durations), k, ctx_sub, own_ctx_left, {})
    subs = sub_agents(b.events).values()
    own = [e for e in b.events if e.agent == "owner"]
    return StageOutcome(
        stage_critical(list(durations), k), ok, used, len(subs), sum(1 for a in subs if a.steps >= 2),
        sum(1 for a in subs if a.ok_return and not a.error), sum(1 for e in own if e.type in STEP_TYPES),
        any(e.status == "error" for e in own),
    )  # fmt: skip


def spawn_tree(task: SwarmTask, cfg: SwarmConfig) -> tuple[list[np.ndarray], list[tuple[list[int], list[int]]], np.ndarray]:  # fmt: skip
    """Every spawn sequence of ``task`` as :class:`SwarmEnv` plays it (an episode ends after its
    last or its first late stage): the observation at each decision node, each leaf's path
    (nodes, widths) and its reward terms ``[L, 3]`` (r_perf, r_parallel, r_finish), summed from
    each stage's :func:`stage_outcome` exactly as :func:`swarm_reward` reads them from the trace."""
    budget, n_sub, n = budget_of(task, cfg), task.n_subtasks, len(task.stages)
    obs: list[np.ndarray] = []
    paths: list[tuple[list[int], list[int]]] = []
    counts: list[tuple[int, int, int, int]] = []  # per leaf: subtasks ok on time, spawned, useful, finished

    def visit(s: int, crit: int, ctx: int, nodes: list[int], ks: list[int], so_far: tuple[int, int, int, int]) -> None:  # fmt: skip
        i = len(obs)
        obs.append(stage_features(task, s, crit, ctx, cfg))
        durs = tuple(task.stages[s])
        for k in range(cfg.max_agents + 1):
            o = stage_outcome(durs, k, cfg.ctx_sub, cfg.ctx_main - ctx)
            late = crit + o.critical > budget
            ok, sp, us, fin = so_far
            c = (ok + (0 if late else o.ok), sp + o.spawned, us + o.useful, fin + o.finished)
            if late or s == n - 1:
                paths.append(([*nodes, i], [*ks, k]))
                counts.append(c)
            else:
                visit(s + 1, crit + o.critical, ctx + o.used, [*nodes, i], [*ks, k], c)

    visit(0, 0, 0, [], [], (0, 0, 0, 0))
    c = np.array(counts)
    r_par, r_fin = parl_rates(c[:, 1], c[:, 2], c[:, 3], cfg.parallel_cap)
    return obs, paths, np.stack([c[:, 0] / n_sub, r_par, r_fin], axis=1)


def swarm_reward(
    trace: Trace, l1: float = 0.0, l2: float = 0.0, parallel_cap: int = 8, measure: bool = False
) -> dict[str, float]:
    """PARL reward of a Swarm trace: ``r_perf`` = the ``subtasks_ok`` of the orchestrator's stage
    aggregates that are not late, over all subtasks, ``r_parallel`` and ``r_finish`` by :func:`parl_terms`; with ``measure=True`` also the
    trace's Critical Steps and total steps from ``orchestrace.measure`` (and the R7 terms from
    :func:`~orchestrace.reward.orchestration.r7_orchestration` itself)."""
    total = float((trace.metadata or {}).get("n_subtasks", 0)) or 1.0
    done = sum(
        float((e.attrs or {}).get("subtasks_ok", 0))
        for e in trace.events
        if e.type == "aggregate" and e.agent == ORCH and not (e.attrs or {}).get("late")
    )
    out = {"r_perf": done / total}
    if measure:
        from ...reward.orchestration import r7_orchestration

        ch = r7_orchestration(trace, parallel_cap=parallel_cap, min_steps=2).channels
        out.update(r_parallel=ch["r_parallel"], r_finish=ch["r_finish"], critical_steps=ch["critical_steps"],
                   total_steps=ch["total_steps"])  # fmt: skip
    else:
        out["r_parallel"], out["r_finish"] = parl_terms(trace, parallel_cap)
    out["reward"] = out["r_perf"] + l1 * out["r_parallel"] + l2 * out["r_finish"]
    return out


@dataclass(frozen=True)
class SwarmRun:
    """How a recorded episode went: its Critical Steps, whether its last stage ended past the
    budget, the subtasks done in time and the stages run."""

    critical: int
    late: bool
    ok: int
    stages_run: int


def swarm_trace(task: SwarmTask, ks: list[int], cfg: SwarmConfig, tag: str = "") -> tuple[Trace, SwarmRun]:
    """Run the stages with spawn counts ``ks`` (stops after a late stage) and record the trace."""
    b = TraceBuilder()
    budget = budget_of(task, cfg)
    t, after, crit, ctx_left, n_ok, late = 0.0, None, 0, cfg.ctx_main, 0, False
    for s, (durs, k) in enumerate(zip(task.stages, ks, strict=False)):
        crit += stage_critical(durs, k)
        late = crit > budget
        t, after, ok, used = run_stage(b, ORCH, f"s{s}", t, after, durs, k, cfg.ctx_sub, ctx_left,
                                       {"stage": s, "critical_so_far": crit})  # fmt: skip
        ctx_left -= used
        if late:
            agg = b.events[-1]
            agg.status = "error"
            agg.attrs = {**(agg.attrs or {}), "late": True, "budget": budget}
            break
        n_ok += ok
    stages_run = s + 1
    tr = b.trace(
        trace_id=f"{task.id}{tag}",
        task_id=task.id,
        system="orchestrace.learn.swarm",
        topology="swarm",
        rewards={"team": n_ok / task.n_subtasks},
        costs={"tokens": 0.0, "wall_clock_s": t, "critical_steps": float(crit)},
        metrics={"critical_steps": float(crit), "serial_critical_steps": float(serial_critical(task))},
        metadata={"env": "Swarm", "n_subtasks": task.n_subtasks, "budget_critical_steps": budget,
                  "stages": len(task.stages), "stages_run": stages_run, "spawn": list(ks[:stages_run])},
    )  # fmt: skip
    return tr, SwarmRun(crit, late, n_ok, stages_run)


def observation_space(cfg: SwarmConfig, leads: int = 0) -> gym.spaces.Box:
    """A finite Box that holds every :func:`stage_features` value under ``cfg`` (why: agents and
    ``check_env`` need real bounds). ``leads`` > 0: budget terms count a hierarchy of that many
    lead agents (the PettingZoo env). Bounds are worst cases, not typical ranges."""
    k, w, n = cfg.max_agents, cfg.max_width, cfg.max_stages
    stage_max = 3 + k + DUR_MAX * w  # stage_critical: decision, messages, heaviest agent, return, aggregate
    crit_max = n * stage_max if leads == 0 else 1 + n * (3 + leads + stage_max)
    budget_min = max(1, int(np.ceil(cfg.budget_frac * cfg.min_stages * (2 + DUR_MIN))))
    budget_max = int(np.ceil(cfg.budget_frac * n * (2 + DUR_MAX * w)))
    low = np.zeros(N_FEATURES, np.float32)
    high = np.ones(N_FEATURES, np.float32)
    low[4] = 1 - crit_max / budget_min  # budget_left
    low[8] = min(0, budget_min - crit_max)  # slack
    high[:4] = [w / k, DUR_MAX * w / (cfg.ctx_sub * k / 2), DUR_MAX / cfg.ctx_sub, DUR_MAX / cfg.ctx_sub]
    high[7] = max(1.0, n * DUR_MAX * w / cfg.ctx_main)  # main_ctx_used
    high[8] = budget_max
    return gym.spaces.Box(low, high, (N_FEATURES,), np.float32)


def stage_features(task: SwarmTask, s: int, crit: int, ctx_used: int, cfg: SwarmConfig) -> np.ndarray:
    durs = task.stages[s]
    budget = budget_of(task, cfg)
    total_work = sum(sum(x) for x in task.stages)
    later = task.stages[s + 1 :]
    left = budget - crit
    need = sum(sum(x) for x in task.stages[s:]) + 2 * (len(task.stages) - s)
    hk = min(heuristic_k(durs, cfg), 8)
    return np.array(
        [
            len(durs) / cfg.max_agents,
            sum(durs) / (cfg.ctx_sub * cfg.max_agents / 2),
            max(durs) / cfg.ctx_sub,
            float(np.mean(durs)) / cfg.ctx_sub,
            left / budget,
            len(later) / cfg.max_stages,
            sum(sum(x) for x in later) / max(total_work, 1),
            ctx_used / cfg.ctx_main,
            left / max(need, 1),
            1.0,
            *(float(min(len(durs), 8) == w) for w in range(1, 9)),
            *(float(hk == k) for k in range(1, 9)),
        ],
        dtype=np.float32,
    )


class SwarmEnv(gym.Env):
    """Gymnasium view: one decision (spawn count 0..K) per stage; obs = :data:`FEATURE_NAMES`.

    ``reset(options={"task": i})`` plays ``make_task(task_seed, i)``, or ``tasks[i]`` when the env
    is given its tasks (e.g. read from recorded runs). The terminal reward is the
    PARL reward of the trace (:func:`swarm_reward`) with the current weights ``l1``, ``l2`` (set
    them with :meth:`set_weights` to anneal)."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        cfg: SwarmConfig | None = None,
        task_seed: int = 0,
        l1: float = 0.0,
        l2: float = 0.0,
        tasks: list[SwarmTask] | None = None,
    ) -> None:
        self.cfg = cfg or SwarmConfig()
        self.task_seed = task_seed
        if tasks is not None and not (
            isinstance(tasks, list | tuple) and tasks and all(isinstance(t, SwarmTask) for t in tasks)
        ):  # a str was an AttributeError at reset ('str' object has no attribute 'stages')
            raise BadInput(
                "OT606",
                "tasks must be a non-empty list of SwarmTask (recorded swarm runs: "
                "gymnasium.make('orchestrace/Swarm-v0', tasks=PATH_OR_GLOB) or "
                f"swarm_traces.tasks_from_traces), got {type(tasks).__name__}",
            )
        self.tasks = list(tasks) if tasks is not None else None
        self.l1, self.l2 = l1, l2
        self.observation_space = observation_space(self.cfg)
        self.action_space = gym.spaces.Discrete(self.cfg.max_agents + 1)
        self._trees: dict[int, tuple[ActionTree, np.ndarray]] = {}

    def set_weights(self, l1: float, l2: float) -> None:
        self.l1, self.l2 = l1, l2

    def task(self, i: int) -> SwarmTask:
        if self.tasks is not None:
            return self.tasks[i % len(self.tasks)]
        return make_task(self.task_seed, i, self.cfg)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        opt = options or {}
        i = int(opt["task"]) if "task" in opt else int(self.np_random.integers(1 << 30))
        self._task = self.task(i)
        self._ks: list[int] = []
        self._crit = 0
        self._ctx = 0
        return self._obs(), {"task": self._task.id}

    def _obs(self) -> np.ndarray:
        s = min(len(self._ks), len(self._task.stages) - 1)
        return stage_features(self._task, s, self._crit, self._ctx, self.cfg)

    def action_tree(self, options: dict[str, Any], choose: Any = None) -> ActionTree:
        """Every spawn sequence of the episode ``options`` starts (:func:`spawn_tree`; cached per
        task, the reward weighted with the current ``l1``, ``l2``); ``choose`` is not needed: the
        whole tree is enumerated (``OT650`` beyond :data:`~.tree.MAX_LEAVES` leaves)."""
        i = int(options["task"])
        if i not in self._trees:
            task = self.task(i)
            size = (self.cfg.max_agents + 1) ** len(task.stages)
            if size > MAX_LEAVES:
                raise too_large(
                    "Swarm", size, f"{self.cfg.max_agents + 1} widths ^ {len(task.stages)} stages"
                )
            obs, paths, terms = spawn_tree(task, self.cfg)
            self._trees[i] = (paths_tree(obs, [(n, k, 0.0) for n, k in paths]), terms.astype(np.float32))
        t, terms = self._trees[i]
        reward = (terms @ np.array([1.0, self.l1, self.l2], np.float32)).astype(np.float32)
        return ActionTree(t.obs, t.node, t.act, reward, t.prefix, t.prefix_act)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        k = int(action)
        durs = self._task.stages[len(self._ks)]
        self._ks.append(k)
        self._crit += stage_critical(durs, k)
        if k == 0:
            self._ctx += sum(durs)
        late = self._crit > budget_of(self._task, self.cfg)
        if late or len(self._ks) == len(self._task.stages):
            tr, run = swarm_trace(self._task, self._ks, self.cfg)
            rw = swarm_reward(tr, self.l1, self.l2, self.cfg.parallel_cap)
            info = {"trace": tr, **rw, **asdict(run), "serial_critical": serial_critical(self._task),
                    "spawned": sum(self._ks), "stages": len(self._task.stages)}  # fmt: skip
            return self._obs(), rw["reward"], True, False, info
        return self._obs(), 0.0, False, False, {}


# ----------------------------------------------------------------------------- baselines


def heuristic_k(durations: list[int], cfg: SwarmConfig) -> int:
    """Myopic makespan rule: the k (never more agents than subtasks) with the fewest stage Critical
    Steps among those where no sub-agent overflows its context; ties go to fewer agents."""
    return _heuristic_k(tuple(durations), cfg.max_agents, cfg.ctx_sub)


@functools.lru_cache(maxsize=1 << 16)
def _heuristic_k(durations: tuple[int, ...], max_agents: int, ctx_sub: int) -> int:
    """Cached: every observation carries the rule's k (exact PG's trees read thousands)."""
    ds = list(durations)
    best, best_key = 1, None
    for k in range(1, min(len(ds), max_agents) + 1):
        over = any(sum(ds[j] for j in g) > ctx_sub for g in assign(ds, k))
        key = (over, stage_critical(ds, k), k)
        if best_key is None or key < best_key:
            best, best_key = k, key
    return best


BASELINES = ("serial", "one_per_subtask", "max_agents", "k2", "k4", "makespan_heuristic")


def baseline_ks(name: str, task: SwarmTask, cfg: SwarmConfig) -> list[int]:
    if name == "serial":
        return [0] * len(task.stages)
    if name == "one_per_subtask":
        return [min(len(s), cfg.max_agents) for s in task.stages]
    if name == "max_agents":
        return [cfg.max_agents] * len(task.stages)
    if name in ("k2", "k4"):
        return [int(name[1:])] * len(task.stages)
    if name == "makespan_heuristic":
        return [heuristic_k(s, cfg) for s in task.stages]
    raise ValueError(f"unknown Swarm baseline {name!r}")
