"""StopVote and other orchestration environments (Gymnasium), registered under ``orchestrace/``.

Importing this package registers them, so ``gymnasium.make("orchestrace/Swarm-v0")`` works after
``import orchestrace.learn.envs``, and ``gymnasium.make("orchestrace.learn.envs:orchestrace/Swarm-v0")``
works with no import at all (Gymnasium imports the module named before the colon). Environments
that replay data take it as keyword arguments of ``make`` (``tasks=``, ``bank=``, ``data=``).
The PettingZoo parallel Swarm is ``orchestrace.learn.envs.swarm_v0.parallel_env()``.
"""

from __future__ import annotations

import gymnasium

#: id -> entry point of every registered environment
ENV_IDS = {
    "orchestrace/Swarm-v0": "orchestrace.learn.envs.swarm_traces:make_env",  # tasks= may be runs
    "orchestrace/RetryStop-v0": "orchestrace.learn.envs.retry:RetryStopEnv",
    "orchestrace/StopVote-v0": "orchestrace.learn.envs.stopvote:StopVoteEnv",
    "orchestrace/Delegate-v0": "orchestrace.learn.envs.delegate:DelegateEnv",
    "orchestrace/DelegateCascade-v0": "orchestrace.learn.envs.delegate:CascadeEnv",
}

for _id, _entry in ENV_IDS.items():
    if _id not in gymnasium.registry:
        gymnasium.register(id=_id, entry_point=_entry)
