"""On-policy multi-agent RL of the team's LoRA adapters from recorded traces (a CleanRL-style loop).

Why a compact loop and not TRL's GRPOTrainer: GRPOTrainer owns generation and gives one scalar
per completion for one policy; here rollouts are runtime programs with several agents, each call
answered by its own adapter, and the advantage of a call is the credit of its unit (agent, turn,
...) computed from the trace by ``credit/``. What a step needs is read back from the traces and
their call caches alone (:func:`read_batch`), so a step can be recomputed after the fact.

One iteration (``learn/loop.py`` drives it, one folder per iteration, resumable):

1. collect: ``questions`` training questions x ``group`` runs of the ``team`` program, all in one
   event loop so the trainable backend batches their calls; every trace validated.
2. update: R = the reward spec's total (default: R1 from :func:`program.verify`) of each trace,
   credit ``method/unit`` from the credit module, the advantage of an LLM call = the credit on its
   return event; PPO-clip on the recorded behaviour log-probs, per adapter (sum over adapters of
   each adapter's mean per-sequence token loss), ``epochs`` Adam steps.
3. evaluate: held-out questions never trained on, fixed seeds (the same runs before and after).
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import json
import os
import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...core.errors import OrchestraceError
from ...core.io import load_one
from ...core.model import Trace
from ...credit import UNITS, assign_credit
from ...reward.spec import RewardSpec, compute_rewards, load_spec, spec_from_dict, with_rewards
from ...runtime.backends.base import TokenSample
from ...runtime.cache import CallCache, cache_path
from ..loop import IterationRecord, run_loop
from .model import LoraSettings, TeamModel
from .program import ADAPTER_MODES, AGGREGATOR, BadInput, adapters_for, answer_correct, family, trace_question
from .rollouts import Rollout, run_rollouts

PROGRAM = "team"
CONFIG_FILE = "config.json"
POLICY_FILE = "team.json"
DEFAULT_REWARD = {
    "terms": [{"channel": "team"}],
    "hooks": {"verifier": "orchestrace.learn.team.program:verify"},
}
#: credit methods a training step accepts (coma needs Q-values the program does not record);
#: ``loo-fork``: the credit module's leave-one-out with a game whose values come from re-running
#: each recorded run without one agent (:func:`fork_game`), not from the trace's static graph
TRAIN_METHODS = ("broadcast", "grpo", "drmas", "loo", "shapley", "c3", "loo-fork")
FORK_DIR = "forks"


@dataclass(frozen=True)
class TeamConfig:
    """Everything that decides a run's numbers; a resume must match it (``iterations`` aside)."""

    program: str = PROGRAM  # a runtime program taking the team program's config keys
    family: str = "countries"
    solvers: int = 2
    adapters: str = "role"
    credit: str = "grpo"
    unit: str = "agent"
    questions: int = 4  # training questions per iteration
    group: int = 4  # runs per training question (the GRPO group)
    train_pool: int = 150  # training questions (the next ``heldout`` of the split are held out)
    heldout: int = 40
    eval_runs: int = 1  # runs per held-out question
    eval_every: int = 1  # evaluate after every this many iterations (and always at 0 and the last)
    lr: float = 3e-4
    clip: float = 0.2
    epochs: int = 2
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
        ):
            if getattr(self, name) < 1:
                raise BadInput("OT695", f"{name} must be >= 1, got {getattr(self, name)}")
        n = len(family(self.family).questions)
        if self.train_pool + self.heldout > n:
            raise BadInput(
                "OT695",
                f"family {self.family!r} has {n} questions: train_pool + heldout = {self.train_pool + self.heldout}",
            )


def reward_spec(cfg: TeamConfig) -> RewardSpec:
    return load_spec(cfg.reward) if cfg.reward else spec_from_dict(DEFAULT_REWARD)


def split(cfg: TeamConfig) -> tuple[list[str], list[str]]:
    """(training, held-out) question ids: one fixed shuffle (seed 0, not the run's seed), so every
    seed is evaluated on the same held-out questions."""
    ids = [q.id for q in family(cfg.family).questions]
    random.Random(0).shuffle(ids)
    return ids[: cfg.train_pool], ids[cfg.train_pool : cfg.train_pool + cfg.heldout]


# ------------------------------------------------------------------ rollouts


def fork_path(trace_path: str, agent: str) -> str:
    p = Path(trace_path)
    return str(p.parent.parent / FORK_DIR / p.name.replace(".events.jsonl", f".without-{agent}.events.jsonl"))


async def _fork_all(backend: Any, jobs: list[tuple[str, Trace, int, str]]) -> None:
    from ...runtime.cache import parse_intervention
    from ...runtime.runner import execute

    async def one(path: str, tr: Trace, index: int, out: str) -> None:
        rt = tr.metadata["runtime"]
        iv = parse_intervention("drop")
        iv.at, iv.event = index, tr.events[index].id
        md = {k: v for k, v in tr.metadata.items() if k not in ("outcome", "fork")}
        md["fork"] = {
            "parent": tr.trace_id,
            "at": iv.event,
            "index": index,
            "do": "drop",
            "group": f"{tr.trace_id}@{iv.event}",
        }
        await execute(
            rt["program"],
            out,
            config=rt["config"],
            seed=int(rt["seed"]),
            backend=backend,
            clock="logical",
            timeout=3600.0,
            retries=0,
            trace_id=f"{tr.trace_id}~without~{tr.events[index].agent}",
            mode="fork",
            reference=tr,
            source=CallCache(cache_path(path), write=False),
            intervention=iv,
            metadata=md,
        )

    await asyncio.gather(*(one(*j) for j in jobs))


def run_forks(backend: Any, paths: list[str]) -> list[str]:
    """For every run and every agent but the last to answer (the aggregator): the same run with
    that agent's answer dropped, the later calls made live (all forks concurrently, batched)."""
    jobs = []
    for p in paths:
        tr = load_one(p)
        returns = [i for i, e in enumerate(tr.events) if e.type == "return" and e.status != "error"]
        for i in returns[:-1]:
            out = fork_path(p, tr.events[i].agent)
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            jobs.append((p, tr, i, out))
    asyncio.run(_fork_all(backend, jobs))
    return [j[3] for j in jobs]


def fork_game(trace_path: str, spec: RewardSpec) -> Callable[[Trace, Any], Any]:
    """The coalition game of one run for leave-one-out credit at the agent level, from its forks:
    v(all) = R; v(all but an agent whose answer was dropped) = R of that fork; v(all but the last
    answering agent or the orchestrator) = 0 (the team gives no answer). Only leave-one-out
    coalitions are defined (Shapley would need every subset re-run)."""
    from ...credit import FnGame

    def make(trace: Trace, units: Any) -> Any:
        if units.level != "agent":
            raise BadInput("OT695", "loo-fork credit is defined at the agent unit only")
        r = float(trace.rewards[spec.total])
        without: dict[str, float] = {}
        for agent in units.ids:
            fp = fork_path(trace_path, agent)
            if os.path.exists(fp):
                ft = load_one(fp)
                without[agent] = float(compute_rewards(ft, spec).channels[spec.total])
        everyone = frozenset(units.ids)

        def v(coalition: frozenset[str]) -> float:
            if coalition == everyone:
                return r
            (gone,) = everyone - coalition  # leave_one_out asks only for these
            return without.get(gone, 0.0)

        return FnGame(list(units.ids), v)

    return make


# ------------------------------------------------------------------ traces -> batch


@dataclass
class CallRow:
    """One LLM call of a trace, with what the loss needs."""

    trace: int  # index in the batch's trace list
    event: str
    agent: str
    adapter: str
    advantage: float
    sample: TokenSample


@dataclass
class Batch:
    traces: list[Trace]  # with rewards and credit written on
    rewards: list[float]
    rows: list[CallRow]
    key: str  # "<method>/<unit>"


def _tokens(path: str, cache: CallCache, ref: str, event: str) -> TokenSample | None:
    key, _, n = ref.rpartition("#")
    hit = cache.get(key, int(n)) if n.isdigit() else None
    ok = (hit or {}).get("outcome", {}).get("ok")
    if not isinstance(ok, dict) or "tokens" not in ok:
        return None
    import msgspec

    try:
        return msgspec.convert(ok["tokens"], TokenSample)
    except msgspec.ValidationError as e:
        raise BadInput(
            "OT696", f"call {ref} of event {event}: bad token record: {e}", path=cache_path(path)
        ) from None


def credit_options(method: str) -> dict[str, str]:
    """Broadcast uses the shared per-question mean baseline (MAPoRL-style), so that it and the
    per-agent methods differ only in how the team's reward is split, not in having a baseline."""
    return {"baseline": "mean"} if method == "broadcast" else {}


def read_batch(paths: list[str], spec: RewardSpec, method: str, unit: str, **options: Any) -> Batch:
    """Rewards, credit and the LLM calls (tokens, behaviour log-probs, adapter) of recorded traces.

    ``options`` go to the credit method (default: :func:`credit_options`)."""
    options = options or credit_options(method)
    traces = []
    for p in paths:
        tr = load_one(p)
        traces.append(with_rewards(tr, compute_rewards(tr, spec), spec))
    channel = spec.total
    rewards = [float(t.rewards[channel]) for t in traces]
    if method == "loo-fork":
        credited = [
            assign_credit([t], "loo", unit, channel=channel, game=fork_game(p, spec))[0]
            for p, t in zip(paths, traces, strict=True)
        ]
        method = "loo"
    else:
        credited = assign_credit(traces, method, unit, channel=channel, **options)
    key = f"{method}/{unit}"
    rows: list[CallRow] = []
    for i, (p, tr) in enumerate(zip(paths, credited, strict=True)):
        cache = CallCache(cache_path(p), write=False)
        for e in tr.events:
            ref = (e.attrs or {}).get("call")
            if e.type != "return" or e.status == "error" or not isinstance(ref, str):
                continue
            sample = _tokens(p, cache, ref, e.id)
            if sample is None or not sample.completion_ids:
                continue
            rows.append(CallRow(i, e.id, e.agent, sample.adapter, float((e.credit or {})[key]), sample))
    if not rows:
        raise BadInput(
            "OT697",
            "the program made no LLM call of the trainable backend in these traces: nothing to train "
            "(is it a program whose agents call an LLM?)",
            path=paths[0] if paths else None,
        )
    return Batch(credited, rewards, rows, key)


UPDATE_ROWS = 8  # calls per forward/backward pass of the update: activations of 8 calls, not all


def release_freed_memory() -> None:
    """Give the heap pages the update freed back to the OS (glibc ``malloc_trim``): otherwise the
    held-out evaluation after an update allocates on top of them and set the run's peak RSS."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def policy_loss(
    model: TeamModel, rows: list[CallRow], clip: float, backward: bool = False
) -> tuple[Any, dict[str, float]]:
    """PPO-clip on the recorded log-probs: per adapter, the mean over its calls of the mean over
    tokens of -min(r A, clip(r) A); the total is the sum over adapters. Returns (loss, figures).
    Calls go through the model :data:`UPDATE_ROWS` at a time; with ``backward`` each pass's share
    of the loss is backpropagated at once (gradients accumulate), so the peak memory holds the
    activations of one pass (a whole batch at once took about 5 GB), and the returned loss is
    detached."""
    torch = model.torch
    by_adapter: dict[str, list[CallRow]] = defaultdict(list)
    for r in rows:
        by_adapter[r.adapter].append(r)
    total = torch.zeros(())
    figures: dict[str, float] = {}
    clipped = tokens = 0
    for name in sorted(by_adapter):
        rs = by_adapter[name]
        loss = torch.zeros(())
        for start in range(0, len(rs), UPDATE_ROWS):
            part = rs[start : start + UPDATE_ROWS]
            new = model.sequence_logprobs(
                name,
                [r.sample.prompt_ids for r in part],
                [r.sample.completion_ids for r in part],
                [r.sample.temperature for r in part],
            )
            losses = []
            for r, lp in zip(part, new, strict=True):
                old = torch.tensor(r.sample.logprobs, dtype=torch.float32)
                ratio = torch.exp(lp - old)
                a = r.advantage
                obj = torch.minimum(ratio * a, torch.clamp(ratio, 1 - clip, 1 + clip) * a)
                losses.append(-obj.mean())
                clipped += int(((ratio - 1).abs() > clip).sum())
                tokens += len(r.sample.completion_ids)
            share = torch.stack(losses).sum() / len(rs)
            if backward:
                share.backward()
                share = share.detach()
            loss = loss + share
        figures[f"loss_{name}"] = float(loss.detach())
        total = total + loss
    figures["clip_fraction"] = clipped / max(tokens, 1)
    return total, figures


# ------------------------------------------------------------------ checkpoints


def config_hash(cfg: TeamConfig) -> str:
    d = asdict(cfg)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def save_policy(model: TeamModel, optimizer: Any, folder: Path, cfg: TeamConfig, iteration: int) -> str:
    """Adapters as safetensors (one file each) + team.json + the optimizer state; written to a temp
    folder and renamed, so a killed save leaves no half policy."""
    from safetensors.torch import save_file

    tmp = folder.with_name(folder.name + ".tmp")
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    meta = {
        "base_model": model.base_id,
        "lora_rank": str(model.lora.rank),
        "lora_alpha": str(model.lora.alpha),
    }
    for name in model.adapters:
        save_file(
            model.adapter_state(name), str(tmp / f"{name}.safetensors"), metadata=meta | {"adapter": name}
        )
    model.torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    info = {
        "base_model": model.base_id,
        "lora": asdict(model.lora),
        "adapters": model.adapters,
        "iteration": iteration,
        "config_hash": config_hash(cfg),
        "program": PROGRAM,
    }
    (tmp / POLICY_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, folder)
    return str(folder)


def load_policy(model: TeamModel, folder: str, optimizer: Any | None = None) -> None:
    """Load adapters (and the optimizer state) written by :func:`save_policy`; refuses another base
    model, LoRA shape or adapter set."""
    from safetensors.torch import load_file

    p = Path(folder)
    info_path = p / POLICY_FILE
    if not info_path.is_file():
        raise BadInput("OT698", f"not a team policy folder (no {POLICY_FILE})", path=str(p))
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise BadInput("OT698", f"unreadable {POLICY_FILE}: {e}", path=str(info_path)) from None
    if info.get("base_model") != model.base_id:
        raise BadInput(
            "OT698",
            f"the adapters were trained on base model {info.get('base_model')!r}, this one is {model.base_id!r}",
            path=str(info_path),
            pointer="/base_model",
        )
    if sorted(info.get("adapters") or []) != sorted(model.adapters):
        raise BadInput(
            "OT698",
            f"the policy has adapters {info.get('adapters')}, this run needs {model.adapters}",
            path=str(info_path),
            pointer="/adapters",
        )
    for name in model.adapters:
        model.load_adapter_state(name, load_file(str(p / f"{name}.safetensors")))
    if optimizer is not None and (p / "optimizer.pt").is_file():
        optimizer.load_state_dict(model.torch.load(p / "optimizer.pt"))


# ------------------------------------------------------------------ the loop step


def _pick(cfg: TeamConfig, pool: list[str], iteration: int) -> list[str]:
    rng = random.Random(f"{cfg.seed}/{iteration}")
    return rng.sample(pool, min(cfg.questions, len(pool)))


def accuracy_figures(traces: list[Trace]) -> dict[str, float]:
    """Team accuracy (R1), solver accuracy (mean over solver answers) and aggregator accuracy."""
    team = solver = agg = 0.0
    n_solver = n_agg = 0
    for tr in traces:
        fam, q = trace_question(tr)
        team += answer_correct(fam, q, ((tr.metadata or {}).get("outcome") or {}).get("final"))
        for e in tr.events:
            if e.type != "return" or e.status == "error":
                continue
            ok = answer_correct(fam, q, e.content)
            if e.agent == AGGREGATOR:
                agg += ok
                n_agg += 1
            else:
                solver += ok
                n_solver += 1
    n = max(len(traces), 1)
    return {
        "team_accuracy": team / n,
        "solver_accuracy": solver / max(n_solver, 1),
        "aggregator_accuracy": agg / max(n_agg, 1),
    }


@dataclass
class TeamStep:
    """collect / update / evaluate of ``learn/loop.py`` for the team program."""

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
    remote: Any = None  # a :class:`remote.RayRollouts`: rollouts on Ray workers (forks stay here)

    def rollouts(self, rollouts: list[Rollout]) -> list[Trace]:
        if self.remote is not None:
            return self.remote.run(self.model, self.cfg, rollouts)
        return run_rollouts(self.backend, self.cfg, rollouts)

    def restart(self, cfg: TeamConfig) -> None:
        """Back to the starting adapters and a fresh optimizer, for another run of the same model."""
        if (
            adapters_for(cfg.adapters, cfg.solvers) != self.model.adapters
            or cfg.lora_rank != self.model.lora.rank
        ):
            raise BadInput("OT699", "a loaded team model can only be reused with the same adapters")
        for name, state in self.initial.items():
            self.model.load_adapter_state(name, state)
        self.cfg, self.spec, self.loaded = cfg, reward_spec(cfg), None
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
            Rollout(
                q,
                1_000_003 * self.cfg.seed + 1000 * iteration + 10 * j + g,
                str(out_dir / "traces" / f"{q}-g{g}.events.jsonl"),
            )
            for j, q in enumerate(_pick(self.cfg, self.train_ids, iteration))
            for g in range(self.cfg.group)
        ]
        self.rollouts(rollouts)
        paths = [r.path for r in rollouts]
        if self.cfg.credit == "loo-fork":
            run_forks(self.backend, paths)
        self.timings["rollout_s"] = time.perf_counter() - t0
        return paths

    def update(
        self, iteration: int, policy: str | None, traces: list[str], out_dir: Path
    ) -> tuple[str, dict[str, float]]:
        self._ensure(policy)
        t0 = time.perf_counter()
        batch = read_batch(traces, self.spec, self.cfg.credit, self.cfg.unit)
        figures: dict[str, float] = {}
        for epoch in range(self.cfg.epochs):
            self.optimizer.zero_grad()
            loss, fig = policy_loss(self.model, batch.rows, self.cfg.clip, backward=True)
            self.optimizer.step()
            if epoch == 0:
                figures |= {"loss": float(loss.detach()), **fig}
            else:
                figures[f"loss_epoch{epoch}"] = float(loss.detach())
                figures["clip_fraction"] = fig["clip_fraction"]
        release_freed_memory()
        path = save_policy(self.model, self.optimizer, out_dir / "policy", self.cfg, iteration)
        self.loaded = path
        n = len(batch.rewards)
        figures |= {
            "reward": sum(batch.rewards) / n,
            **{f"rollout_{k}": v for k, v in accuracy_figures(batch.traces).items()},
            "calls": float(len(batch.rows)),
            "rollout_s": self.timings.get("rollout_s", 0.0),
            "update_s": time.perf_counter() - t0,
        }
        return path, figures

    def evaluate(self, policy: str | None, out_dir: Path) -> dict[str, float]:
        i = int(out_dir.name.rpartition("-")[2])
        if i not in (0, self.last_iteration) and i % self.cfg.eval_every:
            return {}
        if policy is not None:
            self._ensure(policy)
        rollouts = [
            Rollout(q, 7_000_000 + 10 * i + g, str(out_dir / "eval" / f"{q}-g{g}.events.jsonl"))
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


def check_resume(out: Path, cfg: TeamConfig) -> None:
    """A loop folder belongs to one configuration; refuse to continue it with another."""
    p = out / CONFIG_FILE
    if not p.is_file():
        return
    try:
        old = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise BadInput("OT699", f"unreadable loop configuration: {e}", path=str(p)) from None
    new = asdict(cfg)
    diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if diff:
        shown = ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in diff)
        raise BadInput(
            "OT699",
            f"this folder holds a run of another configuration ({shown}); use a new --out",
            path=str(p),
        )


@dataclass(frozen=True)
class RolloutPlace:
    """Where rollouts run (not part of the configuration: the results do not depend on it).

    ``ray``: an address or ``local``, rollouts on ``ray_workers`` Ray actors; ``server``: the
    base URL of an OpenAI-compatible server with vLLM's LoRA endpoints, adapters pushed as peft
    folders under ``server_adapters`` (read by the server at ``server_dir``, default the same path)."""

    ray: str | None = None
    ray_workers: int = 2
    server: str | None = None
    server_adapters: str = "runs/served-adapters"
    server_dir: str | None = None


def make_step(cfg: TeamConfig, threads: int | None = None, place: RolloutPlace | None = None) -> TeamStep:
    """Load the model (and the rollout workers or server connection ``place`` asks for)."""
    from .backend import TrainableBackend

    cfg.check()
    spec = reward_spec(cfg)
    model = TeamModel(
        adapters_for(cfg.adapters, cfg.solvers), LoraSettings(rank=cfg.lora_rank), threads=threads
    )
    params = [p for name in model.adapters for p in model.trainable(name)]
    optimizer = model.torch.optim.Adam(params, lr=cfg.lr)
    train_ids, heldout_ids = split(cfg)
    initial = {name: model.adapter_state(name) for name in model.adapters}
    place = place or RolloutPlace()
    remote: Any = None
    if place.ray is not None and place.server is not None:
        raise BadInput("OT695", "rollouts run either on Ray workers or on a server, not both")
    if place.ray is not None:
        from .remote import RayRollouts

        remote = RayRollouts(model, address=place.ray, workers=place.ray_workers, threads=threads)
    elif place.server is not None:
        from .served import ServedRollouts

        remote = ServedRollouts(
            model, base_url=place.server, adapter_dir=place.server_adapters, server_dir=place.server_dir
        )
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
        remote=remote,
    )


def check_policy_file(folder: str, adapters: list[str]) -> None:
    """Refuse a start policy of another base model or adapter set before loading anything."""
    from .model import base_model_id

    p = Path(folder) / POLICY_FILE
    try:
        info = json.loads(p.read_text(encoding="utf-8"))
    except OSError:
        raise BadInput("OT698", f"not a team policy folder (no {POLICY_FILE})", path=folder) from None
    except json.JSONDecodeError as e:
        raise BadInput("OT698", f"unreadable {POLICY_FILE}: {e}", path=str(p)) from None
    if info.get("base_model") != base_model_id():
        raise BadInput(
            "OT698",
            f"the adapters were trained on base model {info.get('base_model')!r}, this one is {base_model_id()!r}",
            path=str(p),
            pointer="/base_model",
        )
    if sorted(info.get("adapters") or []) != sorted(adapters):
        raise BadInput(
            "OT698",
            f"the policy has adapters {info.get('adapters')}, this run needs {adapters}",
            path=str(p),
            pointer="/adapters",
        )


def train_team(
    cfg: TeamConfig,
    out: str | Path,
    iterations: int,
    *,
    start: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    threads: int | None = None,
    step: TeamStep | None = None,
    place: RolloutPlace | None = None,
) -> list[IterationRecord]:
    """Run (or resume) the loop; every check that can refuse runs before anything is written.
    ``step``: a loaded model to reuse (back to its starting adapters); ``place``: where rollouts run."""
    out = Path(out)
    cfg.check()
    check_resume(out, cfg)
    reward_spec(cfg)
    if start is not None:
        check_policy_file(start, adapters_for(cfg.adapters, cfg.solvers))
    if step is None:
        step = make_step(cfg, threads, place)
    else:
        step.restart(cfg)
    if start is not None:
        load_policy(step.model, start)
    step.last_iteration = iterations
    out.mkdir(parents=True, exist_ok=True)
    cfg_path = out / CONFIG_FILE
    if not cfg_path.is_file():
        cfg_path.write_text(json.dumps(asdict(cfg), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return run_loop(step, out, iterations, start_policy=start, progress=progress)


@dataclass(frozen=True)
class HeldOut:
    """Held-out team accuracy before (iteration 0) and after (the last evaluated iteration), paired
    per question (the same runs, seeds and questions); the CI is a bootstrap over questions."""

    before: float
    after: float
    difference: float
    ci95: tuple[float, float]
    questions: int
    iteration: int


def _per_question(folder: Path) -> dict[str, float]:
    rows: dict[str, list[float]] = defaultdict(list)
    for p in sorted((folder / "eval").glob("*.events.jsonl")):
        tr = load_one(p)
        fam, q = trace_question(tr)
        rows[q.id].append(
            float(answer_correct(fam, q, ((tr.metadata or {}).get("outcome") or {}).get("final")))
        )
    return {k: sum(v) / len(v) for k, v in rows.items()}


def summarise(out: str | Path, *, resamples: int = 2000, seed: int = 0) -> HeldOut:
    import numpy as np

    from ...core.stats import mean_ci
    from ..loop import completed, iteration_dir

    recs = [r for r in completed(out) if r.eval]
    if len(recs) < 1:
        raise BadInput("OT699", "no evaluated iteration in this loop folder", path=str(out))
    first, last = recs[0], recs[-1]
    a = _per_question(iteration_dir(out, first.iteration))
    b = _per_question(iteration_dir(out, last.iteration))
    qs = sorted(set(a) & set(b))
    d = np.array([b[q] - a[q] for q in qs])
    return HeldOut(
        before=float(np.mean([a[q] for q in qs])) if qs else 0.0,
        after=float(np.mean([b[q] for q in qs])) if qs else 0.0,
        difference=float(d.mean()) if len(d) else 0.0,
        ci95=mean_ci(d, resamples, seed)[1] if len(d) else (0.0, 0.0),
        questions=len(qs),
        iteration=last.iteration,
    )
