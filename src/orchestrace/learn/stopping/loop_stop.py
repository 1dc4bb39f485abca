"""``orchestrace loop stop``: learn the stop decision from the vote runs it drives.

Each iteration (``learn.loop.run_loop``): run the ``vote`` program on training questions of a
family with the current stop policy, sampling its actions (recorded as ``should_stop`` events);
read every run back from its trace (the answers, the decisions, the gold in the config); reward
(``reward.stop.stop_reward``, as StopVote's) = 1 if the majority at the stop is the gold, minus
``cost`` per sample; update; save. The new policy is evaluated greedily on the family's held-out
questions from its embedded bank (real SmolLM2-135M samples), offline.

Two updates (``StopLoopConfig.update``). ``model`` (the default since 28 Nov, ``answer_model.py``):
every run so far is a sample of the answer process, which the stop decisions do not change; the
policy's exact value under that fitted process is maximised, near the current policy.
``weighted``: credit each decision leave-one-out (``credit.leave_one_out``): the run's reward minus
what stopping right there would have earned, read from the trace prefix (a state-only baseline: a
stop gets 0, a "continue" what the later answers bought); recompute each decision's features from
the trace prefix; plain gradient steps on PPO's clipped surrogate (``rl.surrogate``) over this
iteration's runs and, importance-weighted, every earlier one in the window (``offpolicy.py``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...core.errors import OrchestraceError
from ...core.model import Trace
from ...core.paths import make_dirs
from ...core.stats import majority
from ...credit import FnGame, leave_one_out
from ...reward.stop import stop_reward
from ..loop import IterationRecord, completed, run_loop
from ..scalar_log import check_log, open_log
from .adapters import LearnedStop
from .answer_model import fit_answer_model, model_update
from .families import family as get_family
from .features import feature_names, prefix_features
from .offpolicy import weighted_clipped_steps
from .policy import PolicyConfig, StopPolicy
from .traces import VoteEpisode, episode_from_trace
from .training import check_numbers


@dataclass(frozen=True)
class StopLoopConfig:
    family: str = "antonyms"
    iterations: int = 3
    questions: int = 8  # training runs per iteration
    budget: int = 8
    width: int = 1
    cost: float = 0.01
    # "model": the policy's value under the answer process every run so far shows (answer_model.py);
    # "weighted": importance-weighted clipped steps on each decision's credit (offpolicy.py)
    update: str = "model"
    kl: float = 0.1  # model: penalty on KL(current || new) per explored state
    known: int = 3  # model: runs that went on from a state before its transitions are trusted
    lr: float = 0.3  # weighted: plain gradient step (offpolicy.py): cost-only credits barely move it
    epochs: int = 20
    clip: float = 0.2  # trust region: P(recorded action) moves by at most this factor per update
    window: int = 0  # iterations whose runs each update reuses; 0: every one so far
    max_weight: float = 2.0  # weighted: truncation of the importance weights of reused runs
    target_kl: float | None = None  # weighted: no further step of an update once its approximate KL passed it
    seed: int = 0
    backend: dict[str, Any] | None = None  # None: the local SmolLM2 (see runtime.runner.backend_spec)
    eval_questions: int = 60  # held-out questions of the embedded bank evaluated each iteration
    start: str | None = None  # a saved stop policy to start from (e.g. trained offline); None: random


def split_questions(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded 70/30 split of a family's question indices into (train, held-out)."""
    idx = np.random.default_rng(seed).permutation(n)
    k = int(round(0.7 * n))
    return np.sort(idx[:k]), np.sort(idx[k:])


def majority_right(answers: list[str | None], gold: str | None) -> bool:
    """Whether the majority of ``answers`` (``core.stats.majority``: ties to the one seen first)
    is the gold."""
    best = majority(answers)
    return best is not None and best == gold


def run_reward(trace: Trace, ep: VoteEpisode, cost: float) -> tuple[float, bool]:
    """The run's reward (``reward.stop.stop_reward``: its majority against the gold, minus ``cost``
    per answer drawn) and whether its answer was right."""
    ok = majority_right(ep.answers, ep.gold)
    return stop_reward(trace, cost, lambda _trace: float(ok)), ok


def decision_credit(trace: Trace, ep: VoteEpisode, cost: float) -> dict[str, float]:
    """Each recorded decision's credit, leave-one-out (``credit.leave_one_out``) in the game whose
    value is the reward of stopping at the first decision left out (the whole run's reward when
    none is): the run's reward minus what stopping right there would have earned, read from the
    trace prefix before the decision."""
    at = {d.event: d.index for d in ep.decisions}

    def value(kept: frozenset[str]) -> float:
        stop = next((d for d in ep.decisions if d.event not in kept), None)
        if stop is None:
            return run_reward(trace, ep, cost)[0]
        seen = [a for a, i in zip(ep.answers, ep.answer_index, strict=True) if i < at[stop.event]]
        ok = majority_right(seen, ep.gold)
        return stop_reward(trace, cost, lambda _trace: float(ok), upto=at[stop.event])

    return leave_one_out(FnGame(list(at), value))


def decision_batch(
    runs: list[tuple[Trace, VoteEpisode]], budget: int, cost: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Features, actions, credit (:func:`decision_credit`) and the recorded probability of the
    action taken, of every recorded stop decision, all read from the traces."""
    xs, acts, adv, probs = [], [], [], []
    for trace, ep in runs:
        if not ep.decisions:
            raise OrchestraceError(
                "OT614", "the run has no should_stop decision: was it run with a stop policy?", path=ep.path
            )
        credit = decision_credit(trace, ep, cost)
        for d in ep.decisions:
            seen = [a for a, i in zip(ep.answers, ep.answer_index, strict=True) if i < d.index]
            xs.append(prefix_features(seen, budget))
            acts.append(float(d.act))
            adv.append(credit[d.event])
            probs.append(d.prob)
    f32 = np.float32
    return np.array(xs, f32), np.array(acts, f32), np.array(adv, f32), np.array(probs, f32)


@dataclass(frozen=True)
class UpdateFigures:
    """What one update saw and did (``iteration.json``'s ``train`` figures)."""

    reward: float  # mean reward of the runs collected this iteration
    accuracy: float
    mean_samples: float
    decisions: float  # decisions of this iteration's runs
    replayed_runs: float  # runs in the update, this iteration's included
    replayed_decisions: float
    mean_weight: float  # mean importance weight over the update's decisions
    effective_fraction: float  # Kish effective sample size of the weights / decisions
    approx_kl: float  # KL(pi_k || new) at the last step, on the update's decisions
    clip_fraction: float
    entropy: float  # mean entropy of P(stop) over the update's decisions at its last step
    steps: float  # gradient steps taken (fewer than the epochs when the KL passed target_kl)


def importance_weighted_update(
    policy: StopPolicy,
    runs: list[tuple[Trace, VoteEpisode]],
    replayed: list[tuple[Trace, VoteEpisode]],
    cost: float,
    lr: float,
    epochs: int,
    clip: float,
    max_weight: float,
    target_kl: float | None = None,
) -> tuple[StopPolicy, UpdateFigures]:
    """One update on this iteration's ``runs`` and the earlier ones still in the window
    (``replayed``), every decision credited from its trace (:func:`decision_credit`) and weighted
    by its recorded probability (``offpolicy.weighted_clipped_steps``)."""
    outcomes = [run_reward(trace, ep, cost) for trace, ep in runs]
    x, a, credit, prob = decision_batch(runs + replayed, policy.config.budget, cost)
    new, steps = weighted_clipped_steps(policy, x, a, credit, prob, lr, epochs, clip, max_weight, target_kl)
    return new, UpdateFigures(
        reward=float(np.mean([r for r, _ in outcomes])),
        accuracy=float(np.mean([ok for _, ok in outcomes])),
        mean_samples=float(np.mean([len(ep.answers) for _, ep in runs])),
        decisions=float(sum(len(ep.decisions) for _, ep in runs)),
        replayed_runs=float(len(runs) + len(replayed)),
        replayed_decisions=float(len(a)),
        **asdict(steps),
    )


UPDATES = ("model", "weighted")


def check_update(name: str) -> None:
    if name not in UPDATES:
        raise OrchestraceError(
            "OT631", f"unknown stop loop update {name!r}; expected one of {', '.join(UPDATES)}"
        )


def update_policy(
    policy: StopPolicy,
    runs: list[tuple[Trace, VoteEpisode]],
    replayed: list[tuple[Trace, VoteEpisode]],
    cfg: StopLoopConfig,
) -> tuple[StopPolicy, dict[str, float]]:
    """One update of the loop (``cfg.update``) on this iteration's ``runs`` and the earlier ones
    still in the window (``replayed``); its figures for ``iteration.json``."""
    check_update(cfg.update)
    if cfg.update == "weighted":
        new, figures = importance_weighted_update(
            policy, runs, replayed, cfg.cost, cfg.lr, cfg.epochs, cfg.clip, cfg.max_weight, cfg.target_kl
        )
        return new, asdict(figures)
    outcomes = [run_reward(trace, ep, cfg.cost) for trace, ep in runs]
    model = fit_answer_model([ep for _, ep in runs + replayed], policy.config.budget, cfg.cost)
    new, steps = model_update(policy, model, kl_coef=cfg.kl, known=cfg.known)
    return new, {
        "reward": float(np.mean([r for r, _ in outcomes])),
        "accuracy": float(np.mean([ok for _, ok in outcomes])),
        "mean_samples": float(np.mean([len(ep.answers) for _, ep in runs])),
        "decisions": float(sum(len(ep.decisions) for _, ep in runs)),
        "replayed_runs": float(len(runs) + len(replayed)),
        **asdict(steps),
    }


def train_on_runs(
    policy: StopPolicy, runs: list[tuple[Trace, VoteEpisode]], cfg: StopLoopConfig, updates: int
) -> StopPolicy:
    """Offline on recorded runs: ``updates`` of the loop's updates, each on all of ``runs``, no new
    run in between (``train stop --traces --logged``: the loop against training on its own runs)."""
    for _ in range(updates):
        policy = update_policy(policy, runs, [], cfg)[0]
    return policy


def check_start(pol: StopPolicy, budget: int, path: str) -> None:
    """A loop (or its offline comparison) starts from a single majority-vote policy of its budget."""
    if pol.config.budget != budget or pol.aggregator is not None or pol.alt is not None:
        raise OrchestraceError(
            "OT617",
            f"the starting policy must be a single majority-vote stop policy with budget {budget} "
            f"(this one: budget {pol.config.budget}, aggregator {pol.aggregator is not None}, "
            f"mixture {pol.alt is not None})",
            path=path,
        )


@dataclass(frozen=True)
class LoggedTraining:
    """``train stop --traces --logged``: what it read and wrote."""

    runs: int
    decisions: int
    updates: int
    update: str
    budget: int
    cost: float
    files: list[str]


def train_stop_logged(
    traces: list[str],
    out: str,
    *,
    start: str | None = None,
    budget: int = 8,
    cost: float = 0.01,
    seed: int = 0,
    updates: int = 4,
    update: str = "model",
    kl: float = StopLoopConfig.kl,
) -> LoggedTraining:
    """Train a stop policy on recorded vote runs as they happened (``loop stop``'s runs, which stop
    early and draw a question more than once, so they are no bank): ``updates`` of the loop's
    updates on all of them, from ``start`` (its budget and cost) or a random policy of ``seed``."""
    from ...core.io import load_one
    from .traces import trace_paths

    check_update(update)
    check_numbers(cost=cost, budget=budget, iterations=updates)
    if start is not None:
        pol = StopPolicy.load(start)
        check_start(pol, pol.config.budget, start)
        budget, cost = pol.config.budget, pol.config.cost
    else:
        config = PolicyConfig(features=feature_names(False), budget=budget, cost=cost,
                              algorithm="logged-traces", seed=seed)  # fmt: skip
        pol = StopPolicy.init(config, seed)
    runs = []
    for p in trace_paths(traces):
        trace = load_one(p)
        ep = episode_from_trace(trace, p)
        if ep.budget is not None and ep.budget != budget:
            raise OrchestraceError(
                "OT617",
                f"the run was recorded with budget {ep.budget}, the policy trained has budget {budget}",
                path=p,
            )
        runs.append((trace, ep))
    cfg = StopLoopConfig(budget=budget, cost=cost, seed=seed, update=update, kl=kl)
    new = train_on_runs(pol, runs, cfg, updates)
    new.config.trained_on = sorted({ep.family or "traces" for _, ep in runs})
    files = list(new.save(out.removesuffix(".safetensors")))
    decisions = sum(len(ep.decisions) for _, ep in runs)
    return LoggedTraining(len(runs), decisions, updates, update, budget, cost, files)


class StopLoop:
    """The :class:`~orchestrace.learn.loop.LoopStep` of the stop decision on the vote program."""

    def __init__(self, cfg: StopLoopConfig) -> None:
        from .banks import default_bank, default_bank_names

        self.cfg = cfg
        self.fam = get_family(cfg.family)
        self.train_idx, self.test_idx = split_questions(len(self.fam.questions), cfg.seed)
        self.bank = None
        if cfg.family in default_bank_names():
            ids = {self.fam.questions[i].id for i in self.test_idx}
            full = default_bank(cfg.family)
            keep = [k for k, q in enumerate(full.questions) if q.id in ids][: cfg.eval_questions]
            self.bank = full.subset(keep, f"{cfg.family}-heldout")
        self._backend: Any = None
        self.collect_s: float | None = None  # seconds the last collect took (tokens per second)

    def start_policy(self, path: Path) -> str:
        if self.cfg.start is not None:
            pol = StopPolicy.load(self.cfg.start)
            check_start(pol, self.cfg.budget, self.cfg.start)
            pol.save(str(path))
            return str(path) + ".safetensors"
        config = PolicyConfig(features=feature_names(False), budget=self.cfg.budget, cost=self.cfg.cost,
                              algorithm="reinforce-traces", trained_on=[self.fam.name], seed=self.cfg.seed)  # fmt: skip
        pol = StopPolicy.init(config, self.cfg.seed)
        pol.save(str(path))
        return str(path) + ".safetensors"

    def _live_backend(self) -> Any:
        if self.cfg.backend is not None:
            return self.cfg.backend
        if self._backend is None:  # one model for every run of the loop
            from ...runtime.backends.smollm2 import SmolLM2Backend

            self._backend = SmolLM2Backend(threads=1)
        return self._backend

    def collect(self, iteration: int, policy: str | None, out_dir: Path) -> list[str]:
        from ...runtime.runner import execute

        assert policy is not None
        t0 = time.perf_counter()
        pol = StopPolicy.load(policy)
        rng = np.random.default_rng([self.cfg.seed, iteration])
        picks = rng.choice(self.train_idx, size=min(self.cfg.questions, len(self.train_idx)), replace=False)
        paths, outcomes = [], []
        for k, qi in enumerate(picks.tolist()):
            q = self.fam.questions[qi]
            config = {"question": q.question, "fewshot": [list(s) for s in self.fam.shots], "family": self.fam.name,
                      "question_id": q.id, "gold": q.gold, "budget": self.cfg.budget, "width": self.cfg.width,
                      "max_tokens": self.fam.max_new_tokens}  # fmt: skip
            out = str(out_dir / f"run-{k:03d}.events.jsonl")
            learned = LearnedStop(pol, Path(policy).stem, policy, explore=True)
            res = asyncio.run(
                execute("vote", out, config=config, seed=self.cfg.seed * 1000 + iteration * 100 + k,
                        backend=self._live_backend(), trace_id=f"loop-i{iteration}-{k}", trace_policies={"stop": learned})
            )  # fmt: skip
            paths.append(out)
            outcomes.append(res.outcome)
        if outcomes and all(o.get("status") == "error" for o in outcomes):
            # a --base-url nobody listens at: every answer null, and the loop trained on that, exit 0
            raise OrchestraceError(
                "OT619",
                f"every run of iteration {iteration} failed: {outcomes[0].get('cause', 'no cause recorded')}",
            )
        self.collect_s = time.perf_counter() - t0
        return paths

    def update(
        self, iteration: int, policy: str | None, traces: list[str], out_dir: Path
    ) -> tuple[str, dict[str, float]]:
        from ...core.io import load_one

        assert policy is not None

        def read(paths: list[str]) -> list[tuple[Trace, VoteEpisode]]:
            return [(tr, episode_from_trace(tr, p)) for p, tr in ((p, load_one(p)) for p in paths)]

        first = 1 if self.cfg.window <= 0 else iteration - self.cfg.window + 1
        earlier = [p for r in completed(out_dir.parent) if first <= r.iteration < iteration for p in r.traces]
        runs = read(traces)
        new, figures = update_policy(StopPolicy.load(policy), runs, read(earlier), self.cfg)
        new.save(str(out_dir / "policy"))
        if self.collect_s:  # this process collected the runs (always: a resumed iteration is redone)
            tokens = sum(e.tokens_out or 0 for trace, _ in runs for e in trace.events)
            figures |= {"rollout_s": self.collect_s, "rollout_tokens_per_s": tokens / self.collect_s}
        return str(out_dir / "policy.safetensors"), figures

    def evaluate(self, policy: str | None, out_dir: Path) -> dict[str, float]:
        """Greedy accuracy and mean samples on the held-out questions of the embedded bank."""
        from .evaluation import run_rule, tables
        from .training import policy_method

        if self.bank is None or policy is None:
            return {}
        pol = StopPolicy.load(policy)
        res = run_rule(self.bank, tables(self.bank, self.cfg.budget), policy_method(pol), self.cfg.budget)
        return {"accuracy": float(res.correct.mean()), "mean_samples": float(res.n_used.mean())}


def loop_stop(
    cfg: StopLoopConfig, out: str, progress: Any = None, log: str | None = None
) -> list[IterationRecord]:
    """Run or resume the stop loop under ``out`` (``iter-NNN/`` folders, curves.json/png); ``log``:
    ``tensorboard`` or ``mlflow`` logs every iteration's figures under ``out/<log>``."""
    check_log(log)
    check_numbers(cost=cfg.cost, budget=cfg.budget, lr=cfg.lr)
    if cfg.target_kl is not None and cfg.update != "weighted":
        raise OrchestraceError(
            "OT630",
            "--target-kl stops --update weighted's clipped steps; the model update bounds its move with --kl",
        )
    if cfg.target_kl is not None and not cfg.target_kl > 0:
        raise OrchestraceError("OT630", f"--target-kl must be > 0, got {cfg.target_kl}")
    step = StopLoop(cfg)
    make_dirs(out)
    start = Path(out) / "start-policy"
    start_path = str(start) + ".safetensors"
    if not Path(start_path).exists():
        step.start_policy(start)
    with open_log(log, out):
        return run_loop(step, out, cfg.iterations, start_policy=start_path, progress=progress)
