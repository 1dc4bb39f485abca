"""RetryStop (O5): retry a task until it succeeds, or give up.

An episode replays one task's real attempts (Reflexion on ALFWorld and HumanEval, GPT-4 samples on
Game of 24). The first attempt is always made; after every failed attempt the orchestrator sees
features of the trace prefix and chooses 0 = retry or 1 = give up. The episode also ends at a
success, when the logged attempts run out, or at the budget.

The reward is read back from the episode's trace (:func:`retry_reward`, the stop reward of
``reward.stop`` over attempts):
``R = 1[some attempt returned ok] - c x sum(attempt_cost)``, where an attempt's cost is its real
cost divided by the family's mean attempt cost (so ``c`` is the price of one typical attempt in
units of one success; every ALFWorld/HumanEval attempt costs 1, Game-of-24 samples cost their
logged USD share).
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np

from ...core.build import TraceBuilder
from ...core.model import Event, Trace
from ...reward.stop import stop_reward
from ..datasets import RetryTask, words
from .defaults import DEFAULT_TASKS, tasks_arg

ORCH = "orchestrator"
ACTOR = "actor"
FEATURE_NAMES = (
    "attempts_frac",
    "log_attempts",
    "cost_so_far",
    "sim_last_two",
    "distinct_frac",
    "hopeless_frac",
    "near_miss_frac",
    "last_len",
    "bias",
)
N_FEATURES = len(FEATURE_NAMES)
DEFAULT_BUDGET = {"alfworld": 15, "humaneval": 10, "game24": 50, "game24-standard": 50}
#: Families whose attempts are i.i.d. samples, so any order of them is an equally likely history.
EXCHANGEABLE = ("game24", "game24-standard")

_HOPELESS = re.compile(r"no solution|not possible|impossible|cannot|answer: none|stuck|loop", re.I)
_ANSWER = re.compile(r"Answer:(.*)")
_EXPR = re.compile(r"^[\d\s+\-*/().]+$")


def near_miss(text: str) -> bool:
    """A failed attempt that claims a complete answer the checker can evaluate and that evaluates to
    the target (Game of 24: ``expr = 24`` with wrong numbers). Other families never set it."""
    m = _ANSWER.findall(text)
    if not m:
        return False
    lhs = m[-1].split("=")[0].strip()
    if not lhs or not _EXPR.match(lhs) or "**" in lhs:
        return False
    try:
        return abs(float(eval(lhs, {"__builtins__": {}})) - 24.0) < 1e-6  # noqa: S307 (digits and + - * / ( ) only)
    except (SyntaxError, ZeroDivisionError, TypeError, ValueError, OverflowError):
        return False


def _jaccard(a: str, b: str) -> float:
    sa, sb = set(words(a)), set(words(b))
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def retry_features(failures: list[str], cost_so_far: float, budget: int) -> np.ndarray:
    """Features of a trace prefix whose attempts all failed, from what those attempts returned."""
    t = len(failures)
    return np.array(
        [
            t / budget,
            np.log1p(t),
            cost_so_far / budget,
            _jaccard(failures[-1], failures[-2]) if t >= 2 else 0.0,
            len(set(failures)) / t,
            float(np.mean([bool(_HOPELESS.search(f)) for f in failures])),
            float(np.mean([near_miss(f) for f in failures])),
            np.log1p(len(failures[-1])) / 10.0,
            1.0,
        ],
        dtype=np.float32,
    )


def retry_trace(
    task: RetryTask, n_attempts: int, gave_up: bool, cost_coef: float, unit_cost: float, tag: str = ""
) -> Trace:
    """Trace of one episode: spawn the actor once, then per attempt a decision, a message and the
    actor's return (status ok = the verifier accepted it), then the final decision."""
    b = TraceBuilder()
    b.add(Event(id="d0", t=0.0, type="orchestrator_decision", agent=ORCH, attrs={"decision": "attempt"}))
    prev = b.add(
        Event(id="spawn", t=0.0, type="spawn", agent=ORCH, to=ACTOR, role="solver"), ("d0", "causal")
    )
    for i in range(n_attempts):
        ok = task.success[i]
        if i > 0:
            decision = Event(
                id=f"d{i}", t=float(i), type="orchestrator_decision", agent=ORCH, attrs={"decision": "retry"}
            )
            prev = b.add(decision, (prev, "causal"))
        m = b.add(
            Event(
                id=f"m{i}", t=float(i), type="message", agent=ORCH, from_=ORCH, to=ACTOR, content_ref=task.id
            ),
            (prev, "causal"),
        )
        prev = b.add(
            Event(
                id=f"r{i}",
                t=i + 0.5,
                t_end=i + 1.0,
                type="return",
                agent=ACTOR,
                from_=ACTOR,
                to=ORCH,
                content=task.content[i][:2000],
                status="ok" if ok else "error",
                cost_usd=task.cost[i] if task.family.startswith("game24") else None,
                attrs={"attempt": i, "attempt_cost": task.cost[i] / unit_cost},
            ),
            (m, "message"),
        )
    success = any(task.success[:n_attempts])
    end = "success" if success else ("give_up" if gave_up else "exhausted")
    b.add(
        Event(
            id="end", t=float(n_attempts), type="orchestrator_decision", agent=ORCH, attrs={"decision": end}
        ),
        (prev, "causal"),
    )
    spent = float(sum(task.cost[:n_attempts]) / unit_cost)
    team = 1.0 if success else 0.0
    return b.trace(
        trace_id=f"retry-{task.id}{tag}",
        task_id=task.id,
        system="orchestrace.learn.retry",
        topology="centralized",
        rewards={"team": team, "orchestration": team - cost_coef * spent},
        costs={"tokens": 0.0, "wall_clock_s": float(n_attempts), "usd": float(sum(task.cost[:n_attempts]))},
        metrics={"task_success": team, "attempts": float(n_attempts)},
        metadata={"env": "RetryStop", "family": task.family, "cost_coef": cost_coef},
    )


def retry_reward(trace: Trace, cost_coef: float) -> float:
    """R = 1[an attempt returned ok] (the trace's ``rewards["team"]``) - c x sum of the returns'
    ``attempt_cost``: the stop decision's reward (``reward.stop.stop_reward``) over attempts."""
    return stop_reward(trace, cost_coef, cost_key="attempt_cost")


class RetryStopEnv(gym.Env):
    """Gymnasium view: obs = :data:`FEATURE_NAMES`; action 0 = retry, 1 = give up.

    ``reset(options={"task": i, "perm": p})`` picks a task (default: random) and, for exchangeable
    families, the p-th seeded reordering of its samples (p = 0: the logged order). The terminal
    ``info`` holds the ``trace``; the terminal reward is :func:`retry_reward` of that trace.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        tasks: list[RetryTask] | str = DEFAULT_TASKS,
        cost: float = 0.05,
        budget: dict[str, int] | None = None,
    ) -> None:
        self.tasks = tasks = tasks_arg(tasks)  # a family or excerpt name or a tasks file too
        self.cost = cost
        self.budget = {**DEFAULT_BUDGET, **(budget or {})}
        fams = {t.family for t in tasks}
        self.unit = {f: float(np.mean([c for t in tasks if t.family == f for c in t.cost])) for f in fams}
        self.observation_space = self._bounded_space()
        self.action_space = gym.spaces.Discrete(2)
        self.episodes = len(tasks)
        self._cache: dict[
            tuple[int, int, int], np.ndarray
        ] = {}  # replayed tasks: prefix features never change
        self._views: dict[tuple[int, int], RetryTask] = {}

    def _bounded_space(self) -> gym.spaces.Box:
        """A finite Box over every :func:`retry_features` value these tasks can give (any attempt
        order, since exchangeable families are replayed reordered): counts, costs and text lengths
        are bounded by the data, the rest are fractions."""
        low = np.zeros(N_FEATURES, np.float64)
        high = np.ones(N_FEATURES, np.float64)
        for t in self.tasks:
            b = self.budget.get(t.family, 15)
            n = self._limit(t)
            high[0] = max(high[0], n / b)
            high[1] = max(high[1], np.log1p(n))
            total = sum(t.cost) / self.unit[t.family] / b  # every prefix, in any order, costs at most all
            high[2] = max(high[2], total)
            low[2] = min(low[2], total)
            high[7] = max(high[7], max(np.log1p(len(c)) / 10.0 for c in t.content))
        pad = 1e-6  # float32 rounding of sums taken in another order
        return gym.spaces.Box(
            (low - pad * (1 + np.abs(low))).astype(np.float32),
            (high + pad * (1 + high)).astype(np.float32),
            (N_FEATURES,),
            np.float32,
        )

    def view(self, i: int, perm: int = 0) -> RetryTask:
        """Task i with its attempts in the perm-th order (only exchangeable families are reordered)."""
        t = self.tasks[i]
        if perm == 0 or t.family not in EXCHANGEABLE:
            return t
        key = (i, perm)
        if key not in self._views:
            o = np.random.default_rng([i, perm]).permutation(len(t.success))
            self._views[key] = RetryTask(
                t.id, t.family, [t.success[j] for j in o], [t.content[j] for j in o], [t.cost[j] for j in o]
            )
        return self._views[key]

    def _limit(self, task: RetryTask) -> int:
        return min(len(task.success), self.budget.get(task.family, len(task.success)))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        opt = options or {}
        i = int(opt["task"]) if "task" in opt else int(self.np_random.integers(len(self.tasks)))
        self._key = (i, int(opt.get("perm", 0)) if self.tasks[i].family in EXCHANGEABLE else 0)
        self._task = self.view(*self._key)
        self._n = 1
        return self._obs(), {"task": self._task.id}

    def _obs(self) -> np.ndarray:
        key = (*self._key, self._n)
        if key not in self._cache:
            t = self._task
            cost = sum(t.cost[: self._n]) / self.unit[t.family]
            self._cache[key] = retry_features(t.content[: self._n], cost, self.budget.get(t.family, 15))
        return self._cache[key].copy()

    def _done(self) -> bool:
        return bool(self._task.success[self._n - 1]) or self._n >= self._limit(self._task)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self._done():  # the first attempt already ended the episode (policy action ignored)
            return self._finish(gave_up=False)
        if int(action) == 1:
            return self._finish(gave_up=True)
        self._n += 1
        if self._done():
            return self._finish(gave_up=False)
        return self._obs(), 0.0, False, False, {}

    def stop_now_reward(self) -> float:
        """Reward of giving up now: no success so far, every attempt made is paid."""
        t = self._task
        return -self.cost * sum(t.cost[: self._n]) / self.unit[t.family]

    def needs_decision(self) -> bool:
        """False when the episode is already decided (first attempt succeeded or nothing left)."""
        return not self._done()

    def _finish(self, gave_up: bool) -> tuple[np.ndarray, float, bool, bool, dict]:
        t = self._task
        tr = retry_trace(t, self._n, gave_up, self.cost, self.unit[t.family])
        info = {"trace": tr, "success": bool(tr.rewards["team"]), "attempts": self._n, "family": t.family}
        return self._obs(), retry_reward(tr, self.cost), True, False, info


def fixed_cap_reward(
    task: RetryTask, cap: int, cost_coef: float, unit: float, budget: int
) -> tuple[float, bool, int]:
    """Reward, success and attempts of the baseline 'retry up to ``cap`` attempts'."""
    limit = min(len(task.success), budget, max(cap, 1))
    f = task.first_success
    n = f + 1 if f is not None and f < limit else limit
    tr = retry_trace(task, n, n < min(len(task.success), budget), cost_coef, unit)
    return retry_reward(tr, cost_coef), bool(tr.rewards["team"]), n
