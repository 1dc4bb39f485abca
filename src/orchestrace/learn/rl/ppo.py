"""PPO (clipped surrogate, GAE, a critic), on any env (:mod:`.tasks`: StopVote's pool or a
Gymnasium / PettingZoo env).

Per-decision rewards come from the decisions' returns (``Batch.ret``): the step from decision t to
t+1 earns G_t - G_{t+1}, the last decision G_t. Every env pays once, at the end, so that is R at
the last decision and 0 before; on StopVote, where G_t is the reward-to-go, continuing earns
-c x (cost of the samples drawn in between) and stopping the rest of R. gamma = 1; GAE(lambda)
over the critic; ``epochs`` x ``minibatches`` steps of the clipped surrogate + value loss +
entropy bonus.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .curve import TrainResult, record
from .distribution import log_probs
from .optim import clip_grad, optimiser, parameters
from .rollouts import Batch, agent_figures
from .surrogate import clipped_surrogate
from .tasks import Task


@dataclass
class Args:
    iterations: int = 60
    batch: int = 256  # episodes per iteration
    epochs: int = 4
    minibatches: int = 4
    lr: float = 3e-3
    critic_lr: float | None = 1e-2  # None: lr
    vf_coef: float = 1.0
    clip: float = 0.2
    gae_lambda: float = 0.95
    entropy: float = 0.003
    max_grad_norm: float = 0.5
    clip_apart: bool = True  # clip the actor's and the critic's gradient norms each (else together)
    eval_every: int = 5
    target_kl: float | None = None  # no further epoch once an epoch's approximate KL passed it
    threads: int = 1
    seed: int = 0


def gae(values: np.ndarray, b: Batch, lam: float) -> np.ndarray:
    """GAE(lambda), gamma = 1, per episode of the batch: step rewards from the returns (see the
    module docstring), V = 0 after the last decision."""
    adv = np.zeros(len(values), np.float32)
    ret = b.ret.tolist()
    end = 0
    for n in b.decisions.tolist():
        end += n
        run, v_next, g_next = 0.0, 0.0, 0.0
        for t in range(end - 1, end - n - 1, -1):
            run = ret[t] - g_next + v_next - values[t] + lam * run
            adv[t], v_next, g_next = run, values[t], ret[t]
    return adv


def clipped_update(actor: Any, critic: Any | None, opt: Any, b: Batch, adv: np.ndarray, ret: np.ndarray | None,
                   rng: np.random.Generator, *, epochs: int, minibatches: int, clip: float, ent_coef: float,
                   vf_coef: float, norm_adv: bool, max_grad_norm: float | None = 0.5, clip_apart: bool = False,
                   shuffle: bool = True, old_logp: np.ndarray | None = None,
                   target_kl: float | None = None) -> dict[str, float]:  # fmt: skip
    """PPO-clip epochs over the batch (the critic's squared error joins the loss when given; with
    ``clip_apart`` the actor's and the critic's gradients are clipped each to ``max_grad_norm``;
    ``shuffle``: minibatches of a fresh permutation each epoch, else the batch in play order).
    ``old_logp``: log-probabilities of the actions under the policy that took them, when that was
    not ``actor`` (recorded runs); the ratio then corrects for the policy that collected the data.
    ``target_kl``: no further epoch once an epoch's mean approximate KL passed it (CleanRL's
    early stop). Returns the last epoch's mean approximate KL, clip fraction and entropy."""
    obs, act = torch.from_numpy(b.obs), torch.from_numpy(b.act)
    adv_t = torch.from_numpy(adv)
    ret_t = torch.from_numpy(ret) if ret is not None else None
    if old_logp is not None:
        old = torch.from_numpy(np.asarray(old_logp, np.float32))
    else:
        with torch.no_grad():
            old = log_probs(actor, obs, act)[0]
    figures: dict[str, float] = {}
    for _ in range(epochs):
        order = rng.permutation(len(act)) if shuffle else np.arange(len(act))
        seen: list[tuple[float, float, float]] = []
        for idx in torch.from_numpy(order).chunk(minibatches):
            if len(idx) < 2:
                continue
            logp, ent = log_probs(actor, obs[idx], act[idx])
            a = adv_t[idx]
            if norm_adv:
                a = (a - a.mean()) / (a.std() + 1e-8)
            s = clipped_surrogate(logp, old[idx], a, clip, entropy=ent)
            seen.append((s.approx_kl, s.clip_fraction, s.entropy or 0.0))
            loss = s.loss - ent_coef * ent.mean()
            if critic is not None and ret_t is not None:
                loss = loss + vf_coef * ((critic(obs[idx])[:, 0] - ret_t[idx]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            if clip_apart and critic is not None:
                clip_grad(actor.parameters(), max_grad_norm)
                clip_grad(critic.parameters(), max_grad_norm)
            else:
                clip_grad(parameters(opt), max_grad_norm)
            opt.step()
        if seen:
            kl, clipped, entropy = np.mean(seen, axis=0).tolist()
            figures = {"approx_kl": kl, "clip_fraction": clipped, "entropy": entropy}
            if target_kl is not None and kl > target_kl:
                break
    return figures


def train(task: Task, args: Args = Args(), progress: Callable[[int], None] | None = None) -> TrainResult:
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    actor, critic = task.networks(args.seed, critic=True)
    assert critic is not None
    opt = optimiser(actor, critic, args.lr, args.critic_lr)
    history: list[dict[str, float]] = []
    for it in range(args.iterations):
        b = task.play(actor, task.starts(it, rng, args.batch, 1), rng)
        figures: dict[str, float] = {}
        if len(b.act):
            with torch.no_grad():
                v = critic(torch.from_numpy(b.obs))[:, 0].numpy()
            adv = gae(v, b, args.gae_lambda)
            figures = clipped_update(actor, critic, opt, b, adv, adv + v, rng, epochs=args.epochs,
                                     minibatches=args.minibatches, clip=args.clip, ent_coef=args.entropy,
                                     vf_coef=args.vf_coef, norm_adv=True, max_grad_norm=args.max_grad_norm,
                                     clip_apart=args.clip_apart, target_kl=args.target_kl)  # fmt: skip
            figures |= agent_figures(b, adv)
        record(history, it, float(b.ep_reward.mean()), task, actor, iterations=args.iterations,
               eval_every=args.eval_every, progress=progress, figures=figures)  # fmt: skip
    return TrainResult(task.policy(actor, "ppo", args.seed), history)
