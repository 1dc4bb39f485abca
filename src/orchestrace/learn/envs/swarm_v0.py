"""PettingZoo-style name of the parallel Swarm (``swarm_v0.parallel_env()``, as PettingZoo's own families)."""

from .swarm_parallel import SwarmParallelEnv, parallel_env

__all__ = ["SwarmParallelEnv", "parallel_env"]
