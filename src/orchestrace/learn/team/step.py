"""One ``train team`` iteration's three verbs for ``learn/loop.py`` (:class:`TeamStep`: collect
rollouts, update the adapters, evaluate on held-out questions) and the loading of a step."""

from __future__ import annotations

import ctypes
import hashlib
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ...core.errors import OrchestraceError
from ...core.model import Trace
from ...reward.spec import RewardSpec, compute_rewards
from ..loop import Panel
from .accuracy import accuracy_figures
from .batch import CallRow, charge_cut_off, cut_off, read_batch
from .checkpoints import load_policy, save_policy
from .config import TeamConfig, reward_spec, split
from .forks import FORK_METHODS, run_forks
from .loss import policy_loss
from .model import LoraSettings, TeamModel
from .placement import RolloutPlace, remote_rollouts
from .program import BadInput, adapters_for
from .rollouts import Rollout, run_rollouts


def release_freed_memory() -> None:
    """Give the heap pages the update freed back to the OS (glibc ``malloc_trim``): otherwise the
    held-out evaluation after an update allocates on top of them and set the run's peak RSS."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def mean_advantages(rows: list[CallRow]) -> dict[str, float]:
    """Each agent's mean advantage over its calls: where the credit sends the update. Summed
    exactly and rounded to 12 decimals: under a group baseline it is 0 by construction, and float
    noise (-1.4e-17) drew curves.png's advantage panel on a 1e-17 scale."""
    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(r.agent, []).append(r.advantage)
    return {agent: round(math.fsum(v) / len(v), 12) + 0.0 for agent, v in sorted(by.items())}


def _pick(cfg: TeamConfig, pool: list[str], iteration: int) -> list[str]:
    rng = random.Random(f"{cfg.seed}/{iteration}")
    return rng.sample(pool, min(cfg.questions, len(pool)))


#: curves.png of a train team run: what a reader looks for, a few labelled panels
PANELS = [
    Panel(
        "Accuracy (held-out questions; training reward)",
        [
            ("eval_team_accuracy", "held-out team"),
            ("eval_solver_accuracy", "held-out solvers"),
            ("eval_aggregator_accuracy", "held-out aggregator"),
            ("train_reward", "training reward"),
        ],
        ylim=(-0.02, 1.02),
    ),
    Panel("Mean advantage per agent (training batch)", [("train_*_advantage", "*")]),
    Panel(
        "PPO update",
        [("train_approx_kl", "approximate KL"), ("train_clip_fraction", "clip fraction")],
    ),
    Panel(
        "Seconds per iteration",
        [("train_rollout_s", "rollouts"), ("train_update_s", "update")],
        ylabel="s",
        ylim=(0, None),
    ),
]


@dataclass
class TeamStep:
    """collect / update / evaluate of ``learn/loop.py`` for the team program."""

    panels: ClassVar[list[Panel]] = PANELS

    cfg: TeamConfig
    model: TeamModel
    backend: Any
    optimizer: Any
    spec: RewardSpec
    loaded: str | None = None
    train_ids: list[str] = field(default_factory=list)
    heldout_ids: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    last_iteration: int = 0
    initial: dict[str, dict[str, Any]] = field(default_factory=dict)  # adapter tensors at the start
    remote: Any = None  # :func:`placement.remote_rollouts`: rollouts elsewhere (forks stay here)
    policy_ids: dict[str | None, str] = field(default_factory=dict)  # loaded policy -> its digest

    def policy_id(self) -> str:
        """A digest of the adapters now loaded, in every run's trace id: the runs of one question and
        seed by other weights (each evaluated iteration's held-out runs, a grid's cells) are other
        traces to a store (they shared an id, and ``ingest`` refused all but the first); the same
        weights give the same id. A step without a trainable model (a scripted completer) has no
        weights to name: ""."""
        if self.model is None:
            return ""
        if self.loaded not in self.policy_ids:
            h = hashlib.sha256()
            for name in sorted(self.model.adapters):
                for key, t in sorted(self.model.adapter_state(name).items()):
                    h.update(f"{name}/{key}".encode())
                    h.update(t.float().contiguous().numpy().tobytes())
            self.policy_ids[self.loaded] = h.hexdigest()[:10]
        return self.policy_ids[self.loaded]

    def rollouts(self, rollouts: list[Rollout]) -> list[Trace]:
        if self.remote is not None:
            return self.remote.run(self.model, rollouts)
        return run_rollouts(self.backend, rollouts)

    def restart(self, cfg: TeamConfig) -> None:
        """Back to the starting adapters and a fresh optimizer, for another run of the same model."""
        if (
            adapters_for(cfg.adapters, cfg.solvers, cfg.topology) != self.model.adapters
            or cfg.lora_rank != self.model.lora.rank
        ):
            raise BadInput("OT699", "a loaded team model can only be reused with the same adapters")
        for name, state in self.initial.items():
            self.model.load_adapter_state(name, state)
        self.cfg, self.spec, self.loaded = cfg, reward_spec(cfg), None
        self.policy_ids.clear()
        self.train_ids, self.heldout_ids = split(cfg)
        params = [p for name in self.model.adapters for p in self.model.trainable(name)]
        self.optimizer = self.model.torch.optim.Adam(params, lr=cfg.lr)

    def _ensure(self, policy: str | None) -> None:
        if policy != self.loaded:
            if policy is None:
                raise BadInput("OT699", "cannot go back to the starting adapters in a running loop")
            load_policy(self.model, policy, self.optimizer)
            self.loaded = policy

    def collect(self, iteration: int, policy: str | None, out_dir: Path) -> list[str]:
        self._ensure(policy)
        t0 = time.perf_counter()
        rollouts = [
            self.cfg.rollout(
                q,
                1_000_003 * self.cfg.seed + 1000 * iteration + 10 * j + g,
                str(out_dir / "traces" / f"{q}-g{g}.events.jsonl"),
                self.policy_id(),
            )
            for j, q in enumerate(_pick(self.cfg, self.train_ids, iteration))
            for g in range(self.cfg.group)
        ]
        self.rollouts(rollouts)
        paths = [r.path for r in rollouts]
        if self.cfg.credit in FORK_METHODS:
            self.fork(paths)
        self.timings["rollout_s"] = time.perf_counter() - t0
        return paths

    def fork(self, paths: list[str]) -> None:
        """Credit by forks: the counterfactual re-runs of every recorded run (beside its folder),
        here, with the adapters that recorded the runs."""
        run_forks(
            self.backend, paths, subsets=self.cfg.credit == "shapley-fork", resamples=self.cfg.resamples
        )

    def update(
        self, iteration: int, policy: str | None, traces: list[str], out_dir: Path
    ) -> tuple[str, dict[str, float]]:
        self._ensure(policy)
        t0 = time.perf_counter()
        batch = read_batch(traces, self.spec, self.cfg.credit, self.cfg.unit, self.cfg.resamples)
        if self.cfg.overlong_penalty:
            charge_cut_off(batch.rows, self.model.eos_ids, self.cfg.overlong_penalty)
        figures: dict[str, float] = {}
        steps = 0
        for epoch in range(self.cfg.epochs):
            self.optimizer.zero_grad()
            loss, fig = policy_loss(
                self.model, batch.rows, self.cfg.clip, backward=True, kl_coef=self.cfg.kl_coef
            )
            if epoch == 0:
                figures |= {"loss": float(loss.detach()), **fig}
            else:
                figures[f"loss_epoch{epoch}"] = float(loss.detach())
                figures["clip_fraction"] = fig["clip_fraction"]
                figures["approx_kl"] = fig["approx_kl"]
            # early stop (as CleanRL's target_kl): the adapters moved too far from the behaviour
            # policy; this epoch's KL is measured before its step, so the step is not taken
            if self.cfg.target_kl is not None and fig["approx_kl"] > self.cfg.target_kl:
                break
            self.optimizer.step()
            steps += 1
        release_freed_memory()
        path = save_policy(self.model, self.optimizer, out_dir / "policy", self.cfg, iteration)
        self.loaded = path
        n = len(batch.rewards)
        update_s = time.perf_counter() - t0
        rollout_s = self.timings.get("rollout_s", 0.0)
        sampled = sum(len(r.sample.completion_ids) for r in batch.rows)
        trained = sum(len(r.sample.prompt_ids) + len(r.sample.completion_ids) for r in batch.rows)
        figures |= {
            "reward": sum(batch.rewards) / n,
            **{f"rollout_{k}": v for k, v in accuracy_figures(batch.traces).items()},
            **{f"{agent}_advantage": v for agent, v in mean_advantages(batch.rows).items()},
            "calls": float(len(batch.rows)),
            "cut_off_share": sum(cut_off(r, self.model.eos_ids) for r in batch.rows) / len(batch.rows),
            "epochs": float(steps),
            "rollout_s": rollout_s,
            "update_s": update_s,
            "rollout_tokens_per_s": sampled / rollout_s if rollout_s > 0 else 0.0,
            "update_tokens_per_s": trained * steps / update_s,
        }
        return path, figures

    def evaluate(self, policy: str | None, out_dir: Path) -> dict[str, float]:
        i = int(out_dir.name.rpartition("-")[2])
        if i not in (0, self.last_iteration) and i % self.cfg.eval_every:
            return {}
        if policy is not None:
            self._ensure(policy)
        rollouts = [
            self.cfg.rollout(
                q, 7_000_000 + 10 * i + g, str(out_dir / "eval" / f"{q}-g{g}.events.jsonl"), self.policy_id()
            )
            for i, q in enumerate(self.heldout_ids)
            for g in range(self.cfg.eval_runs)
        ]
        traces = self.rollouts(rollouts)
        for tr in traces[:1]:  # the reward spec must yield a reward on this program's traces
            try:
                compute_rewards(tr, self.spec)
            except OrchestraceError as e:
                raise BadInput(
                    "OT402",
                    f"the reward spec yields no reward on this program's traces: {e.message}",
                    path=self.cfg.reward,
                ) from None
        return accuracy_figures(traces)


def make_step(cfg: TeamConfig, threads: int | None = None, place: RolloutPlace | None = None) -> TeamStep:
    """Load the model (and the rollout workers or server connection ``place`` asks for)."""
    from .backend import TrainableBackend

    cfg.check()
    spec = reward_spec(cfg)
    model = TeamModel(
        adapters_for(cfg.adapters, cfg.solvers, cfg.topology),
        LoraSettings(rank=cfg.lora_rank),
        threads=threads,
    )
    params = [p for name in model.adapters for p in model.trainable(name)]
    optimizer = model.torch.optim.Adam(params, lr=cfg.lr)
    train_ids, heldout_ids = split(cfg)
    initial = {name: model.adapter_state(name) for name in model.adapters}
    return TeamStep(
        cfg,
        model,
        TrainableBackend(model),
        optimizer,
        spec,
        None,
        train_ids,
        heldout_ids,
        initial=initial,
        remote=remote_rollouts(model, place or RolloutPlace(), threads),
    )
