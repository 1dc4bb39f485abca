"""StopVote as a Gymnasium env (O5 + O4): one episode of ``stopping.pool`` at a time.

obs = the prefix features, action 0 = draw more, 1 = stop; the terminal ``info`` carries the
episode's trace and its reward is read from it (``reward.stop.stop_reward``). Training of
the stop decision runs on the pool itself (batched); this is the same data for Gymnasium users.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from ...reward.stop import stop_reward
from ..stopping.aggregate import Aggregator
from ..stopping.banks import Bank
from ..stopping.features import feature_names
from ..stopping.pool import build_pool, pool_trace
from .defaults import DEFAULT_BANK, bank_arg
from .spaces import data_box


class StopVoteEnv(gym.Env):
    """Gymnasium view: obs = prefix features, action 0 = draw more, 1 = stop.

    The terminal ``info`` carries the episode's ``trace``; its reward is ``reward.stop.stop_reward``.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        bank: Bank | str = DEFAULT_BANK,
        cost: float = 0.01,
        budget: int = 40,
        perms: int = 8,
        batch: int = 1,
        seed: int = 0,
        aggregator: Aggregator | None = None,
    ) -> None:
        bank = bank_arg(bank)  # an embedded family name or a bank file as well as a Bank
        self.pool = build_pool(bank, budget, perms, seed, batch=batch, aggregator=aggregator)
        self.cost = cost
        dim = len(feature_names(aggregator is not None))
        self.observation_space = data_box(self.pool.feats.reshape(-1, dim))  # every obs is a pool row
        self.action_space = gym.spaces.Discrete(2)
        self._e = 0
        self._step = 0
        self._rng = np.random.default_rng(seed)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        if options and "episode" in options:
            self._e = int(options["episode"])
        else:
            self._e = int(self._rng.integers(self.pool.episodes))
        self._step = 0
        self._probs: list[float] = []
        return self.pool.feats[self._e, 0].copy(), {"samples": int(self.pool.points[0])}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        last = len(self.pool.points) - 1
        if int(action) == 1 or self._step >= last - 1:
            s = self._step if int(action) == 1 else last
            tr = pool_trace(self.pool, self._e, s, self.cost)
            info = {
                "trace": tr,
                "correct": bool(self.pool.correct[self._e, s]),
                "samples": int(self.pool.points[s]),
            }
            return self.pool.feats[self._e, s].copy(), stop_reward(tr, self.cost), True, False, info
        self._step += 1
        return (
            self.pool.feats[self._e, self._step].copy(),
            0.0,
            False,
            False,
            {"samples": int(self.pool.points[self._step])},
        )
