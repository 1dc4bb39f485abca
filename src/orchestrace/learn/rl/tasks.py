"""What an environment gives the algorithms: networks, episode starts, rollouts as a :class:`Batch`,
the outcome table exact PG needs, an evaluation for the learning curve and the saved policy.

Two kinds of env, one interface (:class:`Task`), so every algorithm file has one loop:

* ``stopping.task.PoolTask``, StopVote: episodes are rows of the precomputed episode pool, a batch
  is one forward pass; the policy is a ``StopPolicy`` (one logit, a Bernoulli stop probability).
* :class:`GymTask`, the Gymnasium envs (RetryStop, Delegate, Swarm) and the PettingZoo Parallel
  Swarm: episodes are played through ``reset`` / ``step`` (``rollouts.collect``); the policy is a
  :class:`NumpyPolicy` (softmax over the env's actions).

Exact PG needs the reward of every outcome of an episode. Where the future does not depend on the
action that is a table: stopping envs over replayed samples (StopVote, RetryStop: the reward of
stopping at each decision) and one-step envs with an outcome table (Delegate routing). Where it
does (Swarm, the Parallel Swarm, the Delegate cascade) it is the episode's action tree
(:mod:`.tree`): the env's own ``action_tree`` (Swarm, Parallel Swarm) or, for any other
deterministic Gymnasium env, one enumerated by replaying actions from the reset.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from ...core.errors import OrchestraceError
from ..scalar_log import is_logging
from .rollouts import Batch, NumpyPolicy, PolicyMeta, collect, collect_parallel, mlp, to_numpy
from .tree import ActionTree, replay_tree


@dataclass
class OutcomeTable:
    """Every outcome of a batch of episodes. ``stop_action`` set (stopping envs): ``obs`` [N, D, F] at
    each decision, ``reward`` [N, D] of stopping there, ``ends`` [N] the column of the forced end
    (None: the last one). ``stop_action`` None (one-step envs): ``obs`` [N, F], ``reward`` [N, A]."""

    obs: np.ndarray
    reward: np.ndarray
    stop_action: int | None
    ends: np.ndarray | None = None


class SavedPolicy(Protocol):
    """What training returns: a policy with numpy inference that saves itself (StopVote's
    ``StopPolicy``, the Gymnasium envs' ``NumpyPolicy``)."""

    def save(self, path: str) -> Any: ...


class Task(Protocol):
    name: str

    def networks(self, seed: int, critic: bool) -> tuple[nn.Module, nn.Module | None]: ...
    def starts(self, it: int, rng: np.random.Generator, batch: int, group: int) -> np.ndarray: ...
    def play(self, actor: nn.Module, starts: np.ndarray, rng: np.random.Generator) -> Batch: ...
    def has_outcome_table(self) -> bool: ...
    def outcome_table(
        self, actor: nn.Module, starts: np.ndarray, rng: np.random.Generator, it: int
    ) -> OutcomeTable | list[ActionTree]: ...
    def evaluate(self, actor: nn.Module) -> dict[str, float]: ...
    def policy(self, actor: nn.Module, algo: str, seed: int) -> SavedPolicy: ...


def check_outcome_table(task: Task) -> None:
    if not task.has_outcome_table():
        raise OrchestraceError(
            "OT650",
            f"exact PG needs the reward of every outcome of an episode (an outcome table or the "
            f"action tree); {task.name} has neither (a PettingZoo env without ``action_tree``): use "
            "reinforce, ppo or grpo",
        )


# ---------------------------------------------------------------- Gymnasium / PettingZoo


@dataclass
class GymTask:
    """A Gymnasium env or a PettingZoo ParallelEnv (one policy shared by every agent: each agent's
    trajectory is an episode of the batch) over the episode starts ``options``. ``init_bias``:
    initial action logits. ``on_iter(i)`` runs before iteration i draws (reward annealing).
    ``heldout(policy)``: the greedy policy's held-out figures, measured for an open scalar log."""

    env: Any
    options: Sequence[dict[str, Any]]
    name: str
    hidden: Sequence[int] = (32,)
    init_bias: Sequence[float] | None = None
    on_iter: Callable[[int], None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    heldout: Callable[[NumpyPolicy], dict[str, float]] | None = None
    _tables: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, init=False, repr=False)
    _trees: dict[int, ActionTree] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        from pettingzoo import ParallelEnv

        self.parallel = isinstance(self.env, ParallelEnv)
        if self.parallel:
            a = self.env.possible_agents[0]
            space_o, space_a = self.env.observation_space(a), self.env.action_space(a)
        else:
            space_o, space_a = self.env.observation_space, self.env.action_space
        self.meta = PolicyMeta(self.name, int(space_o.shape[0]), int(space_a.n), list(self.hidden), 0, {})

    def networks(self, seed: int, critic: bool) -> tuple[nn.Module, nn.Module | None]:
        """Near-uniform start (or ``init_bias``); resets the env with ``seed``."""
        torch.manual_seed(seed)
        m = self.meta
        actor = mlp([m.obs_dim, *m.hidden, m.n_actions])
        value = mlp([m.obs_dim, *m.hidden, 1]) if critic else None
        with torch.no_grad():
            actor[-1].weight.mul_(0.01)
            if self.init_bias is not None:
                actor[-1].bias.copy_(torch.tensor(list(self.init_bias), dtype=torch.float32))
        self.env.reset(seed=seed)
        return actor, value

    def starts(self, it: int, rng: np.random.Generator, batch: int, group: int) -> np.ndarray:
        """``batch // group`` starts drawn with replacement, each played ``group`` times."""
        if self.on_iter is not None:
            self.on_iter(it)
        return np.repeat(rng.integers(len(self.options), size=max(1, batch // group)), group)

    def play(self, actor: nn.Module, starts: np.ndarray, rng: np.random.Generator) -> Batch:
        play = collect_parallel if self.parallel else collect
        return play(self.env, to_numpy(actor, self.meta), [self.options[i] for i in starts], rng)

    def has_outcome_table(self) -> bool:
        return not self.parallel or hasattr(self.env, "action_tree")

    def _has_table(self) -> bool:
        return hasattr(self.env, "stop_now_reward") or hasattr(self.env, "action_rewards")

    def _table_row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Start ``i`` played to its end without stopping (stopping envs: action 1 stops, 0 goes
        on), the reward of stopping read at each decision, the end's reward last; or, one-step,
        the reward of every action."""
        if i not in self._tables:
            env = self.env
            obs, _ = env.reset(options=self.options[i])
            if hasattr(env, "action_rewards"):
                self._tables[i] = (
                    np.asarray(obs, np.float32)[None],
                    np.asarray(env.action_rewards(), np.float32),
                )
            else:
                seen, rewards = [], []
                while True:
                    if getattr(env, "needs_decision", lambda: True)():
                        seen.append(obs)
                        rewards.append(env.stop_now_reward())
                    obs, r, term, trunc, _ = env.step(0)
                    if term or trunc:
                        break
                seen.append(np.zeros_like(obs))  # the forced end: no decision, its obs is never read
                rewards.append(r)
                self._tables[i] = (np.asarray(seen, np.float32), np.asarray(rewards, np.float32))
        return self._tables[i]

    def _tree(self, i: int, choose: Callable[[np.ndarray], int]) -> ActionTree:
        """Start ``i``'s action tree: the env's own, or replayed (cached unless the env's reward
        weights change during training)."""
        if hasattr(self.env, "action_tree"):
            return self.env.action_tree(self.options[i], choose)
        if hasattr(self.env, "set_weights"):
            return replay_tree(self.env, self.options[i], self.name)
        if i not in self._trees:
            self._trees[i] = replay_tree(self.env, self.options[i], self.name)
        return self._trees[i]

    def outcome_table(
        self, actor: nn.Module, starts: np.ndarray, rng: np.random.Generator, it: int
    ) -> OutcomeTable | list[ActionTree]:
        if not self._has_table():  # actions change what comes next: the action tree of each start
            pol = to_numpy(actor, self.meta)
            return [self._tree(int(i), lambda x: pol.act(x, rng)) for i in starts]
        rows = [self._table_row(int(i)) for i in starts]
        if hasattr(self.env, "action_rewards"):
            return OutcomeTable(np.concatenate([o for o, _ in rows]), np.stack([r for _, r in rows]), None)
        d = max(len(r) for _, r in rows)
        obs = np.zeros((len(rows), d, self.meta.obs_dim), np.float32)
        reward = np.zeros((len(rows), d), np.float32)
        for k, (o, r) in enumerate(rows):
            obs[k, : len(r)], reward[k, : len(r)] = o, r
        return OutcomeTable(obs, reward, stop_action=1, ends=np.array([len(r) - 1 for _, r in rows]))

    def evaluate(self, actor: nn.Module) -> dict[str, float]:
        """Only for a log (``--log``): the experiment drivers report held-out results after
        training, so without one nothing is measured here."""
        if self.heldout is None or not is_logging():
            return {}
        return self.heldout(to_numpy(actor, self.meta))

    def policy(self, actor: nn.Module, algo: str, seed: int) -> NumpyPolicy:
        m = self.meta
        return to_numpy(
            actor, PolicyMeta(m.env, m.obs_dim, m.n_actions, m.hidden, seed, {"algo": algo, **self.extra})
        )
