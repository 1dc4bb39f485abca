"""REINFORCE, PPO and GRPO over one loop, for the RetryStop / Delegate / Swarm Gymnasium envs and
the PettingZoo Parallel Swarm (one policy shared by every agent).

CleanRL-style. Every env pays its reward once, at the end, read from the episode's trace
(``env.step`` computes it from ``info["trace"]``); the loop only ever sees that number. Each
iteration draws ``batch // group`` episode starts (options) from the training items, plays each
``group`` times with the current policy (numpy, :func:`~.gym_reinforce.collect`) and updates:

* ``reinforce``: :func:`~.gym_reinforce.reinforce_update` (learned value, group-mean or
  stop-now baseline), one gradient step per batch;
* ``ppo``: GAE(lambda) with gamma = 1 over a learned critic (reward R at the last decision, 0
  before), clipped surrogate + value loss + entropy bonus, ``epochs`` x ``minibatches`` steps;
* ``grpo``: the ``group`` rollouts of one start (same task/query, env reset with the same options
  and seed) form a group; every decision of an episode gets ``R - mean_g``, scaled by a std;
  clipped surrogate + entropy bonus, no critic (``adv_scale``: see :func:`group_advantages`).

For a PettingZoo ``ParallelEnv`` every agent's trajectory is an episode of the batch (its reward
is the one the env hands that agent, read from the trace: the team reward or its own credit); the policy and
critic are shared by all agents (parameter sharing, independent policy gradient) and a GRPO group
holds every agent of the ``group`` rollouts of one start.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...core.errors import OrchestraceError
from .gym_reinforce import Batch, NumpyPolicy, PolicyMeta, TrainResult, _mlp, _to_numpy, collect

ALGOS = ("reinforce", "ppo", "grpo")


def check_algo(algo: str) -> None:
    if algo not in ALGOS:
        raise OrchestraceError("OT650", f"unknown algorithm {algo!r} (one of {', '.join(ALGOS)})")


def collect_parallel(env: Any, policy: NumpyPolicy, options: Sequence[dict[str, Any]],
                     rng: np.random.Generator) -> Batch:  # fmt: skip
    """Play one PettingZoo Parallel episode per option through ``reset``/``step`` with dicts of
    actions; every agent's trajectory becomes one episode of the batch (rollout index kept)."""
    obs_l, act_l, ret_l, rews, dec, infos, rollout = [], [], [], [], [], [], []
    for j, opt in enumerate(options):
        obs, _ = env.reset(options=opt)
        traj: dict[str, tuple[list, list]] = {a: ([], []) for a in env.agents}
        total = dict.fromkeys(env.agents, 0.0)
        info: dict[str, Any] = {}
        while env.agents:
            acts = {a: policy.act(obs[a], rng) for a in env.agents}
            for a, k in acts.items():
                traj[a][0].append(obs[a])
                traj[a][1].append(k)
            obs, rew, _, _, info = env.step(acts)
            for a, r in rew.items():
                total[a] += float(r)
        for a, (o, k) in traj.items():
            obs_l += o
            act_l += k
            ret_l += [total[a]] * len(k)
            rews.append(total[a])
            dec.append(len(k))
            infos.append(info.get(a, {}))
            rollout.append(j)
    f = policy.meta.obs_dim
    return Batch(
        np.asarray(obs_l, np.float32).reshape(-1, f), np.asarray(act_l, np.int64), np.asarray(ret_l, np.float32),
        np.asarray(rews), np.asarray(dec, np.int64), np.zeros(len(act_l), np.float32), infos,
        np.asarray(rollout, np.int64),
    )  # fmt: skip


def gae(values: np.ndarray, ep_reward: np.ndarray, decisions: np.ndarray, lam: float) -> np.ndarray:
    """GAE(lambda), gamma = 1, per episode: reward R at its last decision, 0 before, V = 0 after."""
    adv = np.zeros(len(values), np.float32)
    end = 0
    for n, r_ep in zip(decisions.tolist(), ep_reward.tolist(), strict=True):
        end += n
        run, v_next, r = 0.0, 0.0, r_ep
        for t in range(end - 1, end - n - 1, -1):
            run = r + v_next - values[t] + lam * run
            adv[t], v_next, r = run, values[t], 0.0
    return adv


def group_advantages(b: Batch, group: int, scale: str = "batch") -> np.ndarray:
    """Per decision: its episode's reward minus the mean over the group of rollouts of the same
    start, divided by the group's std (``scale="group"``, the original GRPO), by the std over the
    whole batch (``"batch"``: keeps a group whose rewards differ by a few cents small next to one
    whose answers differ in quality) or not at all (``"none"``, Dr. GRPO)."""
    gid = b.rollout // group
    n = np.bincount(gid)
    mean = np.bincount(gid, weights=b.ep_reward) / n
    adv = b.ep_reward - mean[gid]
    if scale == "group":
        adv = adv / (np.sqrt(np.bincount(gid, weights=adv**2) / n)[gid] + 1e-6)
    out = np.repeat(adv, b.decisions).astype(np.float32)
    return out / (out.std() + 1e-8) if scale == "batch" and len(out) > 1 else out


def clipped_update(actor: Any, critic: Any | None, opt: Any, b: Batch, adv: np.ndarray, ret: np.ndarray | None,
                   rng: np.random.Generator, *, epochs: int, minibatches: int, clip: float, ent_coef: float,
                   vf_coef: float, norm_adv: bool, max_grad_norm: float = 0.5) -> None:  # fmt: skip
    """PPO-clip epochs over the batch (the critic's squared error joins the loss when given)."""
    import torch

    from .common import clip_grad

    obs, act = torch.from_numpy(b.obs), torch.from_numpy(b.act)
    adv_t = torch.from_numpy(adv)
    ret_t = torch.from_numpy(ret) if ret is not None else None
    with torch.no_grad():
        old = torch.log_softmax(actor(obs), -1).gather(1, act[:, None])[:, 0]
    for _ in range(epochs):
        for idx in torch.from_numpy(rng.permutation(len(act))).chunk(minibatches):
            if len(idx) < 2:
                continue
            logp_all = torch.log_softmax(actor(obs[idx]), -1)
            ratio = torch.exp(logp_all.gather(1, act[idx, None])[:, 0] - old[idx])
            a = adv_t[idx]
            if norm_adv:
                a = (a - a.mean()) / (a.std() + 1e-8)
            pg = -torch.min(ratio * a, torch.clamp(ratio, 1 - clip, 1 + clip) * a).mean()
            ent = -(logp_all.exp() * logp_all).sum(-1).mean()
            loss = pg - ent_coef * ent
            if critic is not None and ret_t is not None:
                loss = loss + vf_coef * ((critic(obs[idx])[:, 0] - ret_t[idx]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            clip_grad(opt.params, max_grad_norm)
            opt.step()


def _spaces(env: Any) -> tuple[int, int, Callable[..., Batch]]:
    """(obs dim, actions, rollout function) of a Gymnasium env or a PettingZoo ParallelEnv."""
    from pettingzoo import ParallelEnv

    if isinstance(env, ParallelEnv):
        a = env.possible_agents[0]
        return int(env.observation_space(a).shape[0]), int(env.action_space(a).n), collect_parallel
    return int(env.observation_space.shape[0]), int(env.action_space.n), collect


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
    init_bias: Sequence[float] | None = None,
    on_iter: Callable[[int], None] | None = None,
    progress: bool = False,
    extra: dict[str, Any] | None = None,
) -> TrainResult:
    """Train a softmax policy with ``algo`` on episodes drawn (with replacement) from
    ``train_options``; ``group`` rollouts per drawn start (GRPO's group size; REINFORCE's
    group-mean baseline when > 1; PPO ignores grouping in its advantages).
    ``baseline``, ``vf_coef`` (REINFORCE): see :func:`~.gym_reinforce.reinforce_update`.
    ``init_bias``: initial action logits. ``on_iter(i)`` runs before iteration i collects (used to
    anneal reward weights). Same seed, same policy."""
    import torch

    from .common import Adam
    from .gym_reinforce import reinforce_update

    check_algo(algo)
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    obs_dim, n_act, rollout = _spaces(env)
    meta = PolicyMeta(env_name, obs_dim, n_act, list(hidden), seed, {"algo": algo, **(extra or {})})
    actor = _mlp([obs_dim, *hidden, n_act])
    critic = _mlp([obs_dim, *hidden, 1]) if algo != "grpo" else None
    with torch.no_grad():
        actor[-1].weight.mul_(0.01)  # near-uniform start
        if init_bias is not None:
            actor[-1].bias.copy_(torch.tensor(list(init_bias), dtype=torch.float32))
    params = [*actor.parameters(), *(critic.parameters() if critic is not None else [])]
    opt = Adam(params, lr=lr)
    curve: list[dict[str, float]] = []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=iters, desc=f"train {env_name} ({algo})", unit="it")
    env.reset(seed=seed)
    for it in range(iters):
        if on_iter is not None:
            on_iter(it)
        pick = np.repeat(rng.integers(len(train_options), size=max(1, batch // group)), group)
        b = rollout(env, _to_numpy(actor, meta), [train_options[i] for i in pick], rng)
        if len(b.act):
            if algo == "reinforce":
                reinforce_update(actor, critic, opt, b, group, baseline, vf_coef, ent_coef)
            elif algo == "ppo":
                assert critic is not None
                with torch.no_grad():
                    v = critic(torch.from_numpy(b.obs))[:, 0].numpy()
                adv = gae(v, b.ep_reward, b.decisions, gae_lambda)
                clipped_update(actor, critic, opt, b, adv, adv + v, rng, epochs=epochs, minibatches=minibatches,
                               clip=clip, ent_coef=ent_coef, vf_coef=vf_coef, norm_adv=True)  # fmt: skip
            else:
                adv = group_advantages(b, group, adv_scale)
                clipped_update(actor, None, opt, b, adv, None, rng, epochs=epochs, minibatches=minibatches,
                               clip=clip, ent_coef=ent_coef, vf_coef=0.0, norm_adv=False)  # fmt: skip
        curve.append({"iter": it, "reward": float(b.ep_reward.mean()), "decisions": float(len(b.act))})
        if bar is not None:
            bar.set_postfix(reward=f"{b.ep_reward.mean():.3f}")
            bar.update()
    if bar is not None:
        bar.close()
    return TrainResult(_to_numpy(actor, meta), curve)
