"""The action tree of one episode, what exact policy gradients sum over where an action changes
what comes next (Swarm, the Parallel Swarm, the Delegate cascade).

Every env here is deterministic given the episode's start (its options) and the actions taken, so
the policy's expected return from a start is a finite sum over the action sequences the env
allows: ``J = sum_leaf prod_{d on the path} pi(a_d | o_d) R(leaf)``. An :class:`ActionTree` holds
that sum's ingredients: the observation at every decision node, each leaf's path (node, action)
and reward. Beyond :data:`MAX_LEAVES` an env may sample a prefix of the episode with the policy and
enumerate only the rest (``prefix``), or refuse (``OT650``, with the tree's size).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.errors import OrchestraceError

#: the most leaves an env enumerates for one episode (Swarm's full tree: 9^4 = 6,561)
MAX_LEAVES = 20_000


@dataclass
class ActionTree:
    """``obs`` [Nodes, F] at each decision; ``node`` / ``act`` [L, D] the decisions on each leaf's
    path (node -1: the path ended earlier); ``reward`` [L]. ``prefix`` / ``prefix_act`` [P]: nodes
    (rows of ``obs``) and actions sampled before the enumerated part; empty when the whole episode
    is enumerated."""

    obs: np.ndarray
    node: np.ndarray
    act: np.ndarray
    reward: np.ndarray
    prefix: np.ndarray
    prefix_act: np.ndarray


def too_large(env: str, leaves: int, what: str) -> OrchestraceError:
    return OrchestraceError(
        "OT650",
        f"exact PG: the action tree of one {env} episode has {leaves:,} leaves ({what}), more than the "
        f"{MAX_LEAVES:,} it enumerates: use a smaller configuration, or reinforce, ppo or grpo",
    )


def paths_tree(obs: list[np.ndarray], paths: list[tuple[list[int], list[int], float]]) -> ActionTree:
    """An :class:`ActionTree` without a sampled prefix from node observations and leaf paths."""
    d = max((len(n) for n, _, _ in paths), default=0)
    node = np.full((len(paths), d), -1, np.int64)
    act = np.zeros((len(paths), d), np.int64)
    for i, (n, a, _) in enumerate(paths):
        node[i, : len(n)], act[i, : len(a)] = n, a
    empty = np.zeros(0, np.int64)
    return ActionTree(np.asarray(obs, np.float32), node, act,
                      np.array([r for _, _, r in paths], np.float32), empty, empty)  # fmt: skip


def replay_tree(env: Any, options: dict[str, Any], name: str) -> ActionTree:
    """Any Gymnasium env with ``Discrete`` actions that is deterministic given ``reset(options)``
    and the actions: every node is reached by replaying its actions from the reset, every leaf's
    reward is what ``env.step`` pays (read from the trace). For small trees (the cascade: one leaf
    per model it can stop at, plus going straight to the priciest)."""
    n_act = int(env.action_space.n)
    obs_rows: list[np.ndarray] = []
    paths: list[tuple[list[int], list[int], float]] = []

    def replay(actions: list[int]) -> np.ndarray:
        obs, _ = env.reset(options=options)
        for a in actions:
            obs, _, term, trunc, _ = env.step(a)
            assert not (term or trunc), "a replayed prefix ended the episode"
        return obs

    def visit(actions: list[int], nodes: list[int]) -> None:
        i = len(obs_rows)
        obs_rows.append(np.asarray(replay(actions), np.float32))
        for a in range(n_act):
            replay(actions)
            _, r, term, trunc, _ = env.step(a)
            if term or trunc:
                paths.append(([*nodes, i], [*actions, a], float(r)))
                if len(paths) > MAX_LEAVES:
                    raise too_large(name, len(paths), "counted while enumerating")
            else:
                visit([*actions, a], [*nodes, i])

    visit([], [])
    return paths_tree(obs_rows, paths)
