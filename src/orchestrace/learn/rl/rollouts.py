"""Rollouts of the Gymnasium and PettingZoo envs (RetryStop, Delegate, Swarm, the Parallel Swarm),
the :class:`Batch` every algorithm trains on, and the softmax policy those envs save.

Rollouts run the policy in numpy (one tiny forward per decision). Policies save as safetensors +
JSON and run without torch (:class:`NumpyPolicy`). The algorithms are ``reinforce.py``,
``ppo.py``, ``grpo.py`` and ``exact.py``; what an env gives them is in ``tasks.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import msgspec
import numpy as np

from ...core.errors import BadInput, OrchestraceError
from ...core.paths import make_dirs

#: the decision a policy answers, by the environment it was trained on (``orchestrace.decision``)
ENV_DECISION = {"RetryStop": "retry_stop", "Delegate": "delegate", "Swarm": "spawn"}


@dataclass
class PolicyMeta:
    env: str
    obs_dim: int
    n_actions: int
    hidden: list[int]
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _shape_error(meta: PolicyMeta, weights: list[tuple[np.ndarray, np.ndarray]]) -> str | None:
    """Why the layers cannot map ``obs_dim`` features to ``n_actions`` logits, or None: a layer of
    another shape was a matmul error at the first decision (exit 3), a NaN weight a NaN policy."""
    sizes = [meta.obs_dim, *meta.hidden, meta.n_actions]
    if min(sizes) < 1:
        return f"layer sizes must be >= 1, got obs_dim {meta.obs_dim}, hidden {meta.hidden}, n_actions {meta.n_actions}"
    for i, (w, b) in enumerate(weights):
        if w.shape != (sizes[i + 1], sizes[i]) or b.shape != (sizes[i + 1],):
            return f"layer {i} is {w.shape} + {b.shape}, expected ({sizes[i + 1]}, {sizes[i]}) + ({sizes[i + 1]},)"
        if not (np.all(np.isfinite(w)) and np.all(np.isfinite(b))):
            return f"layer {i} holds weights that are not finite"
    return None


class NumpyPolicy:
    """Softmax MLP (tanh hidden layers) over observations; numpy only."""

    def __init__(self, meta: PolicyMeta, weights: list[tuple[np.ndarray, np.ndarray]]) -> None:
        self.meta = meta
        self.weights = [(np.asarray(w, np.float32), np.asarray(b, np.float32)) for w, b in weights]

    def logits(self, x: np.ndarray) -> np.ndarray:
        h = np.asarray(x, np.float32)
        for i, (w, b) in enumerate(self.weights):
            h = h @ w.T + b
            if i < len(self.weights) - 1:
                h = np.tanh(h)
        return h

    def probs(self, x: np.ndarray) -> np.ndarray:
        z = self.logits(x)
        z = z - z.max(axis=-1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=-1, keepdims=True)

    def act(self, obs: np.ndarray, rng: np.random.Generator | None = None) -> int:
        """Sample an action (greedy argmax when ``rng`` is None)."""
        p = self.probs(obs[None])[0]
        return int(p.argmax()) if rng is None else int(rng.choice(len(p), p=p))

    def save(self, path: str | Path) -> Path:
        from safetensors.numpy import save as tensor_bytes

        base = Path(path)
        base = base.with_suffix("") if base.suffix in (".safetensors", ".json") else base
        make_dirs(base.parent)
        tensors = {}
        for i, (w, b) in enumerate(self.weights):
            tensors[f"l{i}.weight"], tensors[f"l{i}.bias"] = w, b
        cfg = json.dumps(asdict(self.meta))
        decision = ENV_DECISION.get(self.meta.env, self.meta.env)
        # written like the .json twin (safetensors' save_file creates files mode 0600)
        Path(str(base) + ".safetensors").write_bytes(
            tensor_bytes(tensors, metadata={"config": cfg, "orchestrace.decision": decision})
        )
        Path(str(base) + ".json").write_text(json.dumps(asdict(self.meta), indent=2) + "\n")
        return Path(str(base) + ".safetensors")

    @classmethod
    def load(cls, path: str | Path, env: str | None = None) -> NumpyPolicy:
        from safetensors import SafetensorError, safe_open

        p = Path(path)
        st = p if p.suffix == ".safetensors" else Path(str(p.with_suffix("")) + ".safetensors")
        if not st.exists():
            raise OrchestraceError(
                "OT664", "policy weights not found (expected a .safetensors file)", path=str(st)
            )
        try:
            with safe_open(str(st), "np") as f:
                meta = msgspec.convert(json.loads((f.metadata() or {})["config"]), PolicyMeta)
                n = len(meta.hidden) + 1
                weights = [(f.get_tensor(f"l{i}.weight"), f.get_tensor(f"l{i}.bias")) for i in range(n)]
        except (
            KeyError,
            ValueError,
            TypeError,
            OSError,
            RecursionError,
            msgspec.ValidationError,
            SafetensorError,
        ) as e:
            raise BadInput("OT664", f"not a policy file of this kind: {e}", path=str(st)) from None
        if env is not None and meta.env != env:
            raise BadInput("OT664", f"policy was trained on {meta.env!r}, not {env!r}", path=str(st))
        if (why := _shape_error(meta, weights)) is not None:
            raise BadInput("OT664", f"not a policy file of this kind: {why}", path=str(st))
        return cls(meta, weights)


@dataclass
class Batch:
    obs: np.ndarray  # [T, F]
    act: np.ndarray  # [T]
    # [T] float64, return of each decision: its episode's reward (every env pays once, at the end);
    # StopVote adds back the sample cost already paid (reward-to-go: the sunk cost is no consequence
    # of the decision)
    ret: np.ndarray
    ep_reward: np.ndarray  # [N]
    decisions: np.ndarray  # [N] decisions per episode
    # [T] reward of ending the episode at each decision, in the units of ``ret`` (0 if the env lacks it)
    stop_now: np.ndarray
    infos: list[dict]  # terminal info of each episode
    rollout: np.ndarray | None = None  # [N] env episode each episode comes from (PettingZoo: one per agent)
    agent: list[str] | None = None  # [N] the agent whose trajectory each episode is (PettingZoo only)

    def __post_init__(self) -> None:
        if self.rollout is None:
            self.rollout = np.arange(len(self.ep_reward))


def agent_figures(b: Batch, adv: np.ndarray) -> dict[str, float]:
    """Per agent of a PettingZoo batch (one policy shared by every agent): the mean reward of its
    trajectories and the mean advantage ``adv`` (per decision) its decisions got, so a log shows
    what each agent's credit did; nothing for a single-agent batch."""
    if b.agent is None:
        return {}
    agents = np.asarray(b.agent)
    per_decision = np.repeat(agents, b.decisions)
    out: dict[str, float] = {}
    for a in dict.fromkeys(b.agent):
        out[f"{a}_reward"] = float(b.ep_reward[agents == a].mean())
        if (per_decision == a).any():
            out[f"{a}_advantage"] = float(np.asarray(adv)[per_decision == a].mean())
    return out


def run_episode(
    env: gym.Env, choose: Callable[[np.ndarray], int], options: dict[str, Any] | None, seed: int | None = None
) -> tuple[list[np.ndarray], list[int], float, dict]:
    """Play one episode; decisions where the env ``needs_decision()`` is False are not recorded.

    If the env has ``stop_now_reward()``, ``info["stop_now"]`` lists its value at each recorded
    decision (the reward of ending the episode there)."""
    obs, _ = env.reset(seed=seed, options=options)
    observations, actions, stop_now = [], [], []
    has_stop = hasattr(env, "stop_now_reward")
    while True:
        decide = getattr(env, "needs_decision", lambda: True)()
        a = choose(obs) if decide else 0
        if decide:
            observations.append(obs)
            actions.append(a)
            if has_stop:
                stop_now.append(env.stop_now_reward())  # type: ignore[attr-defined]
        obs, r, term, trunc, info = env.step(a)
        if term or trunc:
            if has_stop:
                info = {**info, "stop_now": stop_now}
            return observations, actions, float(r), info


def collect(
    env: gym.Env, policy: NumpyPolicy, options: Sequence[dict[str, Any]], rng: np.random.Generator
) -> Batch:
    obs, act, ret, rews, infos, dec, base = [], [], [], [], [], [], []
    for opt in options:
        o, a, r, info = run_episode(env, lambda x: policy.act(x, rng), opt)
        obs += o
        act += a
        ret += [r] * len(a)
        base += info.get("stop_now", [0.0] * len(a))
        rews.append(r)
        dec.append(len(a))
        infos.append(info)
    f = policy.meta.obs_dim
    return Batch(
        np.asarray(obs, np.float32).reshape(-1, f), np.asarray(act, np.int64), np.asarray(ret, np.float64),
        np.asarray(rews), np.asarray(dec, np.int64), np.asarray(base, np.float32), infos,
    )  # fmt: skip


def mlp(sizes: list[int]):  # noqa: ANN202 (torch is imported lazily)
    import torch.nn as nn

    layers: list[Any] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def to_numpy(actor: Any, meta: PolicyMeta) -> NumpyPolicy:
    import torch.nn as nn

    lin = [m for m in actor if isinstance(m, nn.Linear)]
    return NumpyPolicy(
        meta, [(m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy()) for m in lin]
    )


def collect_parallel(env: Any, policy: NumpyPolicy, options: Sequence[dict[str, Any]],
                     rng: np.random.Generator) -> Batch:  # fmt: skip
    """Play one PettingZoo Parallel episode per option through ``reset``/``step`` with dicts of
    actions; every agent's trajectory becomes one episode of the batch (rollout index kept)."""
    obs_l, act_l, ret_l, rews, dec, infos, rollout, agents = [], [], [], [], [], [], [], []
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
            agents.append(a)
    f = policy.meta.obs_dim
    return Batch(
        np.asarray(obs_l, np.float32).reshape(-1, f), np.asarray(act_l, np.int64), np.asarray(ret_l, np.float64),
        np.asarray(rews), np.asarray(dec, np.int64), np.zeros(len(act_l), np.float32), infos,
        np.asarray(rollout, np.int64), agents,
    )  # fmt: skip
