"""What decides a ``train team`` run's numbers (:class:`TeamConfig`), its reward spec, its
question split, the rollout of one question, and the check that a resumed folder is the same run."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...credit import UNITS
from ...reward.spec import RewardSpec, load_spec, spec_from_dict
from .program import ADAPTER_MODES, BadInput, family, team_agents
from .rollouts import Rollout

PROGRAM = "team"
CONFIG_FILE = "config.json"
DEFAULT_REWARD = {
    "terms": [{"channel": "team"}],
    "hooks": {"verifier": "orchestrace.learn.team.program:verify"},
}
#: credit methods a training step accepts (coma needs Q-values the program does not record);
#: ``loo-fork`` / ``shapley-fork``: the credit module's leave-one-out / exact Shapley with a game
#: whose values come from re-running each recorded run without some agents' answers
#: (:func:`forks.fork_game`), not from the trace's static graph
TRAIN_METHODS = ("broadcast", "grpo", "drmas", "loo", "shapley", "c3", "loo-fork", "shapley-fork")


@dataclass(frozen=True)
class TeamConfig:
    """Everything that decides a run's numbers; a resume must match it (``iterations`` aside)."""

    program: str = PROGRAM  # a runtime program taking the team program's config keys
    family: str = "countries"  # a task set: a shipped name or a task file (absolute path)
    verifier: str | None = None  # overrides the task set's verifier (``learn/tasks.py``)
    solvers: int = 2
    topology: str = "aggregate"  # or "revise" (a proposer, then a reviser): program.TOPOLOGIES
    adapters: str = "role"
    credit: str = "grpo"
    unit: str = "agent"
    # loo-fork / shapley-fork: the last agent's call sampled again this many times; with 2 or more
    # every sample of it trains, each against the mean of the others (forks.py, "the last agent")
    resamples: int = 1
    questions: int = 4  # training questions per iteration
    group: int = 4  # runs per training question (the GRPO group)
    train_pool: int = 150  # training questions (the next ``heldout`` of the split are held out)
    heldout: int = 40
    eval_runs: int = 1  # runs per held-out question
    eval_every: int = 1  # evaluate after every this many iterations (and always at 0 and the last)
    lr: float = 3e-4
    clip: float = 0.2
    epochs: int = 2
    target_kl: float | None = None  # stop an iteration's epochs once the approximate KL passes it
    kl_coef: float = 0.0  # each token's KL to the base model in the loss (TRL's beta, verl's kl_coef)
    overlong_penalty: float = 0.0  # taken off the advantage of every call cut off by its token limit
    temperature: float = 0.7
    aggregator_temperature: float = 0.7
    lora_rank: int = 8
    seed: int = 0
    reward: str | None = None  # a reward spec TOML (default: R1 from the team verifier)

    def check(self) -> None:
        if self.credit not in TRAIN_METHODS:
            raise BadInput(
                "OT695",
                f"unknown credit method {self.credit!r} for training; known: {', '.join(TRAIN_METHODS)}",
            )
        if self.unit not in UNITS:
            raise BadInput("OT695", f"unknown credit unit {self.unit!r}; known: {', '.join(UNITS)}")
        team_agents(self.topology, self.solvers)
        if self.adapters not in ADAPTER_MODES:
            raise BadInput(
                "OT695", f"unknown adapter mode {self.adapters!r}; known: {', '.join(ADAPTER_MODES)}"
            )
        for name in (
            "solvers",
            "questions",
            "group",
            "train_pool",
            "heldout",
            "eval_runs",
            "epochs",
            "lora_rank",
            "resamples",
        ):
            if getattr(self, name) < 1:
                raise BadInput("OT695", f"{name} must be >= 1, got {getattr(self, name)}")
        if self.resamples != 1 and self.credit not in ("loo-fork", "shapley-fork"):
            raise BadInput(
                "OT695",
                f"resamples is for the fork credit methods (loo-fork, shapley-fork), not {self.credit!r}",
            )
        if self.eval_every < 1:  # 0: a ZeroDivisionError at the first middle iteration, after training
            raise BadInput("OT695", f"eval_every must be >= 1, got {self.eval_every}")
        # checked here, before the model loads: torch refused a negative or NaN lr only then (exit
        # 3), and a NaN or negative clip trained on without a word
        for name in ("lr", "clip"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise BadInput("OT695", f"{name} must be a finite number > 0, got {getattr(self, name)}")
        for name in ("kl_coef", "overlong_penalty"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise BadInput("OT695", f"{name} must be a finite number >= 0, got {getattr(self, name)}")
        for name in ("temperature", "aggregator_temperature"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise BadInput("OT695", f"{name} must be a finite number >= 0, got {getattr(self, name)}")
        family(self.family, self.verifier).split(self.train_pool, self.heldout)
        reward_spec(self)  # a missing or bad spec file: refused here, not after the model loads
        if self.target_kl is not None and not (self.target_kl > 0 and math.isfinite(self.target_kl)):
            raise BadInput("OT695", f"target_kl must be a finite number > 0, got {self.target_kl}")

    def rollout(self, question: str, seed: int, path: str, policy: str = "") -> Rollout:
        """The run of the team program on ``question`` with this configuration (``policy``: the
        digest of the weights that run it, part of the trace id)."""
        return Rollout(
            program=self.program,
            seed=seed,
            path=path,
            trace_id=f"team-{question}-s{seed}" + (f"-{policy}" if policy else ""),
            config={
                "family": self.family,
                "verifier": self.verifier,
                "question": question,
                "solvers": self.solvers,
                "topology": self.topology,
                "adapters": self.adapters,
                "temperature": self.temperature,
                "aggregator_temperature": self.aggregator_temperature,
            },
        )


def reward_spec(cfg: TeamConfig) -> RewardSpec:
    return load_spec(cfg.reward) if cfg.reward else spec_from_dict(DEFAULT_REWARD)


def split(cfg: TeamConfig) -> tuple[list[str], list[str]]:
    """(training, held-out) question ids: the file's split, or one fixed shuffle (seed 0, not the
    run's seed), so every seed is evaluated on the same held-out questions."""
    return family(cfg.family, cfg.verifier).split(cfg.train_pool, cfg.heldout)


def read_config(p: Path) -> dict[str, Any]:
    """A loop folder's ``config.json``: a JSON object, else OT699 naming the file (an array there
    or bytes that are not UTF-8 were internal errors of its readers)."""
    try:
        old = json.loads(p.read_bytes())
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError, nested too deep
        raise BadInput("OT699", f"unreadable loop configuration: {e}", path=str(p)) from None
    if not isinstance(old, dict):
        raise BadInput(
            "OT699", f"the loop configuration is a JSON {type(old).__name__}, not an object", path=str(p)
        )
    return old


def check_resume(out: Path, cfg: TeamConfig) -> None:
    """A loop folder belongs to one configuration; refuse to continue it with another."""
    p = out / CONFIG_FILE
    if not p.is_file():
        return
    old = read_config(p)
    new = asdict(cfg)
    defaults = asdict(TeamConfig())  # a key added since the folder was written has its default
    diff = sorted(k for k in set(old) | set(new) if old.get(k, defaults.get(k)) != new.get(k))
    if diff:
        shown = ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in diff)
        raise BadInput(
            "OT699",
            f"this folder holds a run of another configuration ({shown}); use a new --out",
            path=str(p),
        )
