"""GRPO: group-relative advantages, no critic, on any env (:mod:`.tasks`: StopVote's pool or a
Gymnasium / PettingZoo env).

A group is the ``group`` rollouts of one start: the same task or query, the env reset with the same
options (StopVote: the same question with the same worker samples in the same order, forks of one
trace prefix; ``PoolTask.group_by="question"`` instead draws an order per rollout). With a
PettingZoo env a group holds every agent of those rollouts. Each episode's advantage is its
reward minus the group mean, scaled (``adv_scale``, :func:`group_advantages`); every decision of
the episode shares it. The update is PPO's clipped surrogate + entropy bonus (no KL term, as in
Dr. GRPO / DAPO), ``epochs`` x ``minibatches`` steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .curve import TrainResult, record
from .optim import optimiser
from .ppo import clipped_update
from .rollouts import Batch, agent_figures
from .tasks import Task


@dataclass
class Args:
    iterations: int = 80
    batch: int = 256  # episodes per iteration: batch // group groups
    group: int = 8  # rollouts per group
    adv_scale: str = "none"  # "none" (Dr. GRPO), "group" (original GRPO) or "batch"
    epochs: int = 2
    minibatches: int = 1
    shuffle: bool = False  # minibatches of a fresh permutation each epoch (False: the batch in play order)
    lr: float = 1e-2  # advantages are not std-normalised, so they are small
    clip: float = 0.2
    entropy: float = 0.003
    max_grad_norm: float = 0.5
    eval_every: int = 5
    target_kl: float | None = None  # no further epoch once an epoch's approximate KL passed it
    threads: int = 1
    seed: int = 0


def group_advantages(b: Batch, group: int, scale: str = "batch") -> np.ndarray:
    """Per decision: its episode's reward minus the mean over the group of rollouts of the same
    start, divided by the group's std (``scale="group"``, the original GRPO), by the std over the
    whole batch (``"batch"``: keeps a group whose rewards differ by a few cents small next to one
    whose answers differ in quality) or not at all (``"none"``, Dr. GRPO: the std division turns a
    StopVote group whose rewards differ only by a few samples' cost into advantages of +-1 and
    drives the policy to stop at once)."""
    assert b.rollout is not None
    gid = b.rollout // group
    n = np.bincount(gid)
    mean = np.bincount(gid, weights=b.ep_reward) / n
    adv = b.ep_reward - mean[gid]
    if scale == "group":
        adv = adv / (np.sqrt(np.bincount(gid, weights=adv**2) / n)[gid] + 1e-6)
    out = np.repeat(adv, b.decisions).astype(np.float32)
    return out / (out.std() + 1e-8) if scale == "batch" and len(out) > 1 else out


def train(task: Task, args: Args = Args(), progress: Callable[[int], None] | None = None) -> TrainResult:
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    actor, _ = task.networks(args.seed, critic=False)
    opt = optimiser(actor, None, args.lr, None)
    history: list[dict[str, float]] = []
    for it in range(args.iterations):
        b = task.play(actor, task.starts(it, rng, args.batch, args.group), rng)
        figures: dict[str, float] = {}
        if len(b.act):
            adv = group_advantages(b, args.group, args.adv_scale)
            figures = clipped_update(actor, None, opt, b, adv, None, rng, epochs=args.epochs,
                                     minibatches=args.minibatches, clip=args.clip, ent_coef=args.entropy,
                                     vf_coef=0.0, norm_adv=False, max_grad_norm=args.max_grad_norm,
                                     shuffle=args.shuffle, target_kl=args.target_kl)  # fmt: skip
            figures |= agent_figures(b, adv)
        record(history, it, float(b.ep_reward.mean()), task, actor, iterations=args.iterations,
               eval_every=args.eval_every, progress=progress, figures=figures)  # fmt: skip
    return TrainResult(task.policy(actor, "grpo", args.seed), history)
