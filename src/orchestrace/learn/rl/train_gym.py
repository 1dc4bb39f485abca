"""Training on the RetryStop / Delegate / Swarm Gymnasium envs and the PettingZoo Parallel Swarm
(one policy shared by every agent) with any algorithm: this builds the env's :class:`~.tasks.GymTask`
and the algorithm's ``Args`` from keyword arguments and calls the algorithm file's ``train``, the
same one StopVote trains with.

Every env pays its reward once, at the end, read from the episode's trace (``env.step`` computes it
from ``info["trace"]``). Each iteration draws ``batch // group`` episode starts (options) from the
training items and plays each ``group`` times with the current policy:

* ``reinforce``: learned value, group-mean (``group > 1``) or stop-now baseline, one gradient step
  per batch (:mod:`.reinforce`);
* ``ppo``: GAE(lambda) with gamma = 1 over a learned critic, ``epochs`` x ``minibatches`` steps
  (:mod:`.ppo`);
* ``grpo``: the ``group`` rollouts of one start form a group, every decision of an episode gets
  ``R - mean_g`` scaled by ``adv_scale`` (:mod:`.grpo`);
* ``exact``: the exact policy gradient over the env's outcome table (RetryStop, Delegate routing)
  or the episode's action tree (Swarm, the cascade; the Parallel Swarm's last stage after a
  sampled prefix), :mod:`.exact`.

For a PettingZoo ``ParallelEnv`` every agent's trajectory is an episode of the batch (its reward is
the one the env hands that agent, read from the trace: the team reward or its own credit); the
policy and critic are shared by all agents (parameter sharing, independent policy gradient) and a
GRPO group holds every agent of the ``group`` rollouts of one start.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..scalar_log import child_run
from . import algorithm, check_target_kl
from .curve import TrainResult
from .rollouts import NumpyPolicy
from .tasks import GymTask


def train_policy(
    algo: str,
    env: Any,
    train_options: Sequence[dict[str, Any]],
    *,
    env_name: str,
    iters: int = 150,
    batch: int = 64,
    lr: float = 3e-3,
    hidden: Sequence[int] = (32,),
    ent_coef: float = 0.01,
    vf_coef: float = 0.5,
    seed: int = 0,
    group: int = 1,
    baseline: str = "value",
    epochs: int = 4,
    minibatches: int = 4,
    clip: float = 0.2,
    gae_lambda: float = 0.95,
    adv_scale: str = "batch",
    target_kl: float | None = None,
    init_bias: Sequence[float] | None = None,
    on_iter: Callable[[int], None] | None = None,
    progress: bool = False,
    extra: dict[str, Any] | None = None,
    heldout: Callable[[NumpyPolicy], dict[str, float]] | None = None,
    run: str | None = None,
) -> TrainResult:
    """Train a softmax policy with ``algo`` on episodes drawn (with replacement) from
    ``train_options``; ``group`` rollouts per drawn start (GRPO's group size; REINFORCE's
    group-mean baseline when > 1; PPO and exact PG ignore grouping). One Adam over actor and
    critic (critic loss weighted by ``vf_coef``), gradient norm clipped to 1 (REINFORCE) or 0.5.
    ``init_bias``: initial action logits. ``on_iter(i)`` runs before iteration i collects (used to
    anneal reward weights). ``target_kl`` (ppo, grpo): no further epoch of an update once its
    approximate KL passed this. ``heldout(policy)``: the greedy policy's held-out figures, measured
    only when a scalar log is open (``--log``; at the first and last iteration and every tenth of
    the run), under ``heldout/``; ``run``: the log's run name (default ``<env_name>-<algo>``).
    Same seed, same policy (a log changes nothing the training draws)."""
    mod = algorithm(algo)
    check_target_kl(target_kl, algo)
    task = GymTask(env, train_options, env_name, hidden, init_bias, on_iter, dict(extra or {}), heldout)
    common = dict(iterations=iters, batch=batch, lr=lr, seed=seed, eval_every=max(1, iters // 10))
    if algo == "reinforce":
        args: Any = mod.Args(**common, group=group, critic_lr=None, vf_coef=vf_coef, entropy=ent_coef,
                             baseline=baseline, max_grad_norm=1.0)  # fmt: skip
    elif algo == "ppo":
        args = mod.Args(**common, epochs=epochs, minibatches=minibatches, critic_lr=None, vf_coef=vf_coef,
                        clip=clip, gae_lambda=gae_lambda, entropy=ent_coef, clip_apart=False,
                        target_kl=target_kl)  # fmt: skip
    elif algo == "grpo":
        args = mod.Args(**common, group=group, adv_scale=adv_scale, epochs=epochs, minibatches=minibatches,
                        clip=clip, entropy=ent_coef, shuffle=True, target_kl=target_kl)  # fmt: skip
    else:
        args = mod.Args(**common, entropy=ent_coef)
    bar = None
    if progress:
        from tqdm import tqdm

        # piped stderr: no bar (its redraws would make one endless line), one line at the end
        bar = tqdm(total=iters, desc=f"train {env_name} ({algo})", unit="it", disable=None)
    with child_run(run or f"{env_name}-{algo}"):  # its own TensorBoard run when a log is open (--log)
        res = mod.train(task, args, bar.update if bar is not None else None)
    if bar is not None:
        bar.close()
        if bar.disable:
            print(f"train {env_name} ({algo}): {iters} iterations", file=sys.stderr)
    return res
