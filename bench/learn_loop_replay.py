"""The stop loop replayed on a family's embedded bank: why ``loop stop`` collapsed to one answer.

Prints, on the loop's own 70/30 split of the family (``stopping.loop_stop.split_questions``), the
reward (accuracy - cost x samples, majority with ties to the first answer) of every fixed number
of answers k = 1..budget: is stopping after one answer reward-optimal at that cost? Then runs the
loop's update on episodes replayed from the bank (the question's 40 recorded SmolLM2-135M
samples in a seeded random order stand in for the live model; actions sampled from the policy as
``LearnedStop(explore=True)`` does) and prints the loop's held-out evaluation after each update,
with P(stop) after one answer ``x``, two agreeing ``xx``, two differing ``xy``. ``--update adam``
is the update the loop had before (20 Adam epochs at lr 0.01, no clip), for comparison;
``--start offline`` starts from exact PG trained on the other families' banks (``DEFAULT_TRAIN``).

    python bench/learn_loop_replay.py --family continents --runs 12 --iterations 4 --seeds 1,2,3
    python bench/learn_loop_replay.py --family continents --runs 12 --iterations 4 --seeds 1,2,3 --update adam
    python bench/learn_loop_replay.py --family plurals --start offline --seeds 1,2,3

``--update model`` is ``loop stop``'s update since 28 Nov (stopping/answer_model.py; ``--evaluate-on
train`` reports on the training questions, how it was chosen), ``--update weighted`` the one
before it (every earlier run reused, importance-weighted; ``--update clipped``, the default, is the
same without reuse); ``--start per-seed`` starts
each seed from its own random policy, as ``loop stop --seed S``; ``--offline`` also trains the
start policy on the same number of runs without redeploying; every seed ends with the paired
95% CI (bootstrap over held-out questions, rewards averaged over ``--orders`` orders) of the
final minus the start policy. ``--live DIRS --seeds SEEDS`` prints the same for recorded
``loop stop`` folders (docs/learn_loop.md, "Reusing every recorded run"):

    python bench/learn_loop_replay.py --family continents --runs 12 --iterations 4 --seeds 1,2,3,4,5,6 --start per-seed --update weighted --offline
    python bench/learn_loop_replay.py --family continents --live runs/loop/s1,runs/loop/s2 --seeds 1,2 --update model
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np

from orchestrace.core.io import load_one
from orchestrace.core.model import Trace
from orchestrace.learn.stopping.banks import BankQuestion, default_bank
from orchestrace.learn.stopping.features import feature_names, prefix_features
from orchestrace.learn.stopping.loop_stop import (
    StopLoop,
    StopLoopConfig,
    decision_batch,
    importance_weighted_update,
    majority_right,
    train_on_runs,
    update_policy,
)
from orchestrace.learn.stopping.policy import PolicyConfig, StopPolicy
from orchestrace.learn.stopping.traces import VoteEpisode, episode_from_trace, record_question
from orchestrace.learn.stopping.training import DEFAULT_TRAIN, merge, train_policy


def adam_update(policy: StopPolicy, runs: list[tuple[Trace, VoteEpisode]], cost: float) -> StopPolicy:
    """The loop's update before 27 Nov: 20 Adam epochs at lr 0.01 on REINFORCE, no clip."""
    import torch

    x, a, credit, _ = decision_batch(runs, policy.config.budget, cost)
    actor = policy.torch_actor()
    opt = torch.optim.Adam(actor.parameters(), lr=0.01)
    xt, at, adv = torch.from_numpy(x), torch.from_numpy(a), torch.from_numpy(credit)
    for _ in range(20):
        logits = actor(xt).squeeze(-1)
        logp = at * torch.nn.functional.logsigmoid(logits) + (1 - at) * torch.nn.functional.logsigmoid(
            -logits
        )
        loss = -(adv * logp).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return StopPolicy.from_torch(policy.config, actor)


def replay(
    pol: StopPolicy, q: BankQuestion, budget: int, rng: np.random.Generator, out: str, k: int
) -> tuple[Trace, VoteEpisode]:
    """One vote run replayed from the bank and recorded as ``loop stop`` records its runs: a
    decision after every answer, the last a forced stop."""
    order = rng.permutation(len(q.samples))[:budget]
    samples = [q.samples[i] for i in order]
    decisions: list[tuple[bool, float]] = []
    for t in range(1, budget):
        p = float(pol.stop_prob(prefix_features(samples[:t], budget)[None])[0])
        act = bool(rng.random() < p)
        decisions.append((act, p if act else 1 - p))
        if act:
            break
    path = record_question(BankQuestion(q.id, q.question, q.gold, samples), out, "replay", k, None,
                           decisions=decisions)  # fmt: skip
    trace = load_one(path)
    return trace, episode_from_trace(trace, path)


def heldout_rewards(step: StopLoop, pol: StopPolicy, cost: float, orders: int) -> np.ndarray:
    """Per held-out question, the greedy policy's reward averaged over ``orders`` orders of its
    samples (order 0: the bank's, as the loop's own evaluation): the unit of the paired CIs."""
    from orchestrace.learn.stopping.evaluation import run_rule, tables
    from orchestrace.learn.stopping.training import policy_method

    assert step.bank is not None
    budget = pol.config.budget
    res = run_rule(step.bank, tables(step.bank, budget, orders), policy_method(pol), budget)
    n_q = len(step.bank.questions)
    correct = np.asarray(res.correct, float).reshape(n_q, -1)
    used = np.asarray(res.n_used, float).reshape(n_q, -1)
    return (correct - cost * used).mean(axis=1)


def paired(diff: np.ndarray, seed: int = 0) -> str:
    """Mean of per-question differences with a 95% bootstrap CI over questions."""
    rng = np.random.default_rng(seed)
    boots = [diff[rng.integers(0, len(diff), len(diff))].mean() for _ in range(4000)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return f"{diff.mean():+.4f} [{lo:+.4f}, {hi:+.4f}]"


def loop_config(args: argparse.Namespace, seed: int) -> StopLoopConfig:
    """The loop's settings for ``--update model`` or ``weighted`` (and offline training on runs)."""
    update = args.update if args.update in ("model", "weighted") else "weighted"
    return StopLoopConfig(family=args.family, budget=args.budget, cost=args.cost, seed=seed, update=update,
                          lr=args.lr, epochs=args.epochs, max_weight=args.max_weight, kl=args.kl,
                          known=args.known)  # fmt: skip


def whole_bank_policy(step: StopLoop, args: argparse.Namespace) -> StopPolicy:
    """Exact PG on the loop's training questions with all their recorded samples (40 each): the
    best the start could reach, for how much room it had."""
    bank = default_bank(args.family)
    ids = {step.fam.questions[i].id for i in step.train_idx}
    train = bank.subset([k for k, q in enumerate(bank.questions) if q.id in ids], f"{args.family}-train")
    return train_policy(train, args.cost, algo="exact", budget=args.budget, seed=0)[0]


def held_out_curves(curves: dict[int, list[float]], path: str) -> None:
    """One line per live seed: the greedy policy's held-out reward after each update (0: start)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.set_prop_cycle(color=plt.get_cmap("tab20").colors)  # 20 distinct colours: one per seed
    for seed, ys in curves.items():
        ax.plot(range(len(ys)), ys, marker="o", label=f"seed {seed}")
    ax.set_xlabel("update (0: start policy)")
    ax.set_ylabel("held-out reward (acc - 0.01 x answers)")
    ax.set_xticks(range(max(len(ys) for ys in curves.values())))
    ax.set_title("loop stop, live SmolLM2-135M, continents, 12 runs per update")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def live(args: argparse.Namespace) -> None:
    """Paired held-out figures of recorded ``loop stop`` folders (``--live``)."""
    from orchestrace.learn.loop import completed

    gains, offline_gains, versus = [], [], []
    curves: dict[int, list[float]] = {}
    for folder, seed in zip(args.live.split(","), (int(s) for s in args.seeds.split(",")), strict=True):
        step = StopLoop(loop_config(args, seed))
        recs = completed(folder)
        start = StopPolicy.load(f"{folder}/start-policy.safetensors")
        last = StopPolicy.load(recs[-1].policy)
        paths = [p for r in recs for p in r.traces]
        runs = [(tr, episode_from_trace(tr, p)) for p, tr in ((p, load_one(p)) for p in paths)]
        off = train_on_runs(start, runs, loop_config(args, seed), len(recs) - 1)
        r0, r1, r2 = (heldout_rewards(step, p, args.cost, args.orders) for p in (start, last, off))
        gains.append(r1 - r0)
        offline_gains.append(r2 - r0)
        versus.append(r1 - r2)
        print(f"{folder} (seed {seed}, {len(runs)} live runs, {len(recs) - 1} updates, {len(r0)} held-out "
              f"questions x {args.orders} orders): start {r0.mean():.4f}, loop {r1.mean():.4f}, "
              f"offline on the same runs {r2.mean():.4f}")  # fmt: skip
        print(
            f"  loop - start {paired(r1 - r0)}; offline - start {paired(r2 - r0)}; loop - offline {paired(r1 - r2)}"
        )
        best = heldout_rewards(step, whole_bank_policy(step, args), args.cost, args.orders).mean()
        print(f"  room: exact PG on the seed's whole training bank reaches {best:.4f} on these questions")
        curve = [
            heldout_rewards(step, StopPolicy.load(r.policy), args.cost, args.orders).mean() for r in recs[1:]
        ]
        curves[seed] = [float(r0.mean()), *map(float, curve)]
        print(f"  held-out reward per iteration: {' '.join(f'{v:.4f}' for v in curves[seed])}")
    if args.figure:
        held_out_curves(curves, args.figure)
    if len(gains) > 1:  # each seed has its own split: pool the questions
        print(f"pooled ({sum(len(g) for g in gains)} seed x question pairs): loop - start "
              f"{paired(np.concatenate(gains))}; offline - start {paired(np.concatenate(offline_gains))}; "
              f"loop - offline {paired(np.concatenate(versus))}")  # fmt: skip
        print(f"over seeds (t, {len(gains)} seeds): loop - start {over_seeds(gains)}; offline - start "
              f"{over_seeds(offline_gains)}; loop - offline {over_seeds(versus)}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", default="continents")
    ap.add_argument("--runs", type=int, default=12, help="replayed runs per update (loop stop --questions)")
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--cost", type=float, default=0.01)
    ap.add_argument("--seeds", default="1", help="replay seeds (the policy starts from seed 0, as the loop)")
    ap.add_argument("--update", choices=("clipped", "adam", "weighted", "model"), default="clipped",
                    help="model: loop stop's update since 28 Nov (stopping/answer_model.py); weighted: "
                         "every run in the --window reused with importance weights (stopping/offpolicy.py)")  # fmt: skip
    ap.add_argument("--kl", type=float, default=StopLoopConfig.kl, help="model: KL penalty")
    ap.add_argument("--known", type=int, default=StopLoopConfig.known,
                    help="model: runs that went on from a state before it is trusted")  # fmt: skip
    ap.add_argument("--window", type=int, default=StopLoopConfig.window,
                    help="weighted: iterations whose runs an update reuses (0: all so far)")  # fmt: skip
    ap.add_argument("--max-weight", type=float, default=StopLoopConfig.max_weight)
    ap.add_argument("--epochs", type=int, default=StopLoopConfig.epochs)
    ap.add_argument("--start", choices=("random", "offline", "per-seed"), default="random",
                    help="random: the loop's seed-0 start; per-seed: a random start of each replay "
                         "seed (as loop stop --seed S starts); offline: exact PG on the DEFAULT_TRAIN banks")  # fmt: skip
    ap.add_argument("--lr", type=float, default=StopLoopConfig.lr, help="step size of the clipped update")
    ap.add_argument("--offline", action="store_true",
                    help="also train offline on the same number of runs, all drawn from the start "
                         "policy, with the same number of weighted updates over all of them")  # fmt: skip
    ap.add_argument("--live", default=None,
                    help="comma-separated loop stop folders (their --seed given by --seeds, in order): "
                         "held-out reward of the start, the last policy, and offline training from the "
                         "start on the same N recorded runs (as many weighted updates, no redeployment)")  # fmt: skip
    ap.add_argument(
        "--figure", default=None, help="--live: draw the held-out curves of the folders here (PNG)"
    )
    ap.add_argument("--orders", type=int, default=16, help="orders per held-out question for the paired CIs")
    ap.add_argument("--evaluate-on", choices=("heldout", "train"), default="heldout",
                    help="train: every figure on the loop's training questions instead (choosing an "
                         "update without reading the held-out questions)")  # fmt: skip
    args = ap.parse_args()
    if args.live:
        return live(args)
    cfg = StopLoopConfig(family=args.family, budget=args.budget, cost=args.cost)
    step = StopLoop(cfg)
    bank = default_bank(args.family)
    by_id = {q.id: q for q in bank.questions}
    train = [by_id[step.fam.questions[i].id] for i in step.train_idx if step.fam.questions[i].id in by_id]
    assert step.bank is not None
    if args.evaluate_on == "train":
        ids = {q.id for q in train}
        step.bank = bank.subset(
            [k for k, q in enumerate(bank.questions) if q.id in ids], f"{args.family}-train"
        )
    where = "held-out" if args.evaluate_on == "heldout" else "train"
    for name, qs in (("train", train), ("held-out", step.bank.questions)):
        row = []
        for k in range(1, args.budget + 1):
            rs = [float(majority_right(q.samples[:k], q.gold)) - args.cost * k for q in qs]
            row.append(f"k={k} {np.mean(rs):.3f}")
        print(f"{args.family} {name} ({len(qs)} questions), reward of k answers: {', '.join(row)}")
    probes = [prefix_features(a, args.budget) for a in (["x"], ["x", "x"], ["x", "y"])]
    tmp = tempfile.mkdtemp()

    def evaluate(pol: StopPolicy) -> str:
        pol.save(f"{tmp}/p")
        e = step.evaluate(f"{tmp}/p.safetensors", None)  # type: ignore[arg-type]
        px, pxx, pxy = pol.stop_prob(np.stack(probes))
        r = e["accuracy"] - args.cost * e["mean_samples"]
        many = heldout_rewards(step, pol, args.cost, args.orders).mean()
        return (f"{where} acc {e['accuracy']:.3f} samples {e['mean_samples']:.2f} reward {r:.3f} "
                f"({args.orders} orders {many:.4f}) | P(stop) x {px:.2f} xx {pxx:.2f} xy {pxy:.2f}")  # fmt: skip

    def update(pol: StopPolicy, runs: list, earlier: list) -> StopPolicy:
        if args.update == "adam":
            return adam_update(pol, runs, args.cost)
        if args.update == "clipped":
            return importance_weighted_update(
                pol, runs, [], args.cost, args.lr, args.epochs, cfg.clip, args.max_weight
            )[0]
        return update_policy(pol, runs, earlier, loop_config(args, 0))[0]

    def start_policy(seed: int) -> StopPolicy:
        config = PolicyConfig(features=feature_names(False), budget=args.budget, cost=args.cost)
        return StopPolicy.init(config, seed if args.start == "per-seed" else 0)

    offline_start = None
    if args.start == "offline":
        pool = merge([default_bank(n) for n in DEFAULT_TRAIN], "+".join(DEFAULT_TRAIN))
        offline_start = train_policy(pool, args.cost, algo="exact", budget=args.budget, seed=0)[0]
        print(f"offline exact PG on {'+'.join(DEFAULT_TRAIN)}: {evaluate(offline_start)}")
    label = {"adam": "adam (before)", "clipped": f"clipped lr {args.lr}", "model": f"model kl {args.kl}"}.get(
        args.update, f"weighted window {args.window or 'all'} max-weight {args.max_weight} lr {args.lr}"
    )
    gains, offline_gains, versus, own_gains, versus_own = [], [], [], [], []
    for seed in (int(s) for s in args.seeds.split(",")):
        rng = np.random.default_rng(seed)
        pol = start = offline_start or start_policy(seed)
        print(f"seed {seed} {label} iteration 0: {evaluate(pol)}")
        history: list[list] = []
        for it in range(1, args.iterations + 1):
            out = tempfile.mkdtemp()
            runs = [replay(pol, train[i], args.budget, rng, out, k)
                    for k, i in enumerate(rng.choice(len(train), args.runs))]  # fmt: skip
            window = history if args.window <= 0 else history[len(history) - args.window + 1 :]
            pol = update(pol, runs, [r for batch in window for r in batch])
            history.append(runs)
            print(f"seed {seed} {label} iteration {it}: {evaluate(pol)}")
        r0 = heldout_rewards(step, start, args.cost, args.orders)
        r1 = heldout_rewards(step, pol, args.cost, args.orders)
        gains.append(r1 - r0)
        print(
            f"seed {seed} loop ({args.runs * args.iterations} runs) - start, {where} reward: {paired(r1 - r0)}"
        )
        if args.offline:  # the same number of runs, all from the start policy, no redeployment
            rng = np.random.default_rng([seed, 1])
            out = tempfile.mkdtemp()
            runs = [replay(start, train[i], args.budget, rng, out, k)
                    for k, i in enumerate(rng.choice(len(train), args.runs * args.iterations))]  # fmt: skip
            off = train_on_runs(start, runs, loop_config(args, 0), args.iterations)
            r2 = heldout_rewards(step, off, args.cost, args.orders)
            offline_gains.append(r2 - r0)
            versus.append(r1 - r2)
            print(f"seed {seed} offline on {len(runs)} start-policy runs: {evaluate(off)}")
            print(f"seed {seed} offline - start: {paired(r2 - r0)}; loop - offline: {paired(r1 - r2)}")
            # and on the loop's own runs (what train stop --traces --logged does with a loop folder)
            own = train_on_runs(
                start, [r for batch in history for r in batch], loop_config(args, 0), args.iterations
            )
            r3 = heldout_rewards(step, own, args.cost, args.orders)
            own_gains.append(r3 - r0)
            versus_own.append(r1 - r3)
            print(f"seed {seed} offline on the loop's own runs: {evaluate(own)}")
            print(
                f"seed {seed} offline (own runs) - start: {paired(r3 - r0)}; loop - offline (own runs): {paired(r1 - r3)}"
            )
    if len(gains) > 1:
        print(f"pooled over seeds (per question, mean over seeds): loop - start {paired(np.mean(gains, 0))}")
        if args.offline:
            print(f"pooled: offline - start {paired(np.mean(offline_gains, 0))}; "
                  f"loop - offline {paired(np.mean(versus, 0))}")  # fmt: skip
        print(f"over seeds (t, {len(gains)} seeds): loop - start {over_seeds(gains)}"
              + (f"; offline - start {over_seeds(offline_gains)}; loop - offline {over_seeds(versus)}"
                 if args.offline else ""))  # fmt: skip
        if args.offline:
            print(f"the loop's own runs: offline - start {paired(np.mean(own_gains, 0))}, over seeds "
                  f"{over_seeds(own_gains)}; loop - offline {paired(np.mean(versus_own, 0))}, over seeds "
                  f"{over_seeds(versus_own)}")  # fmt: skip


def over_seeds(diffs: list[np.ndarray]) -> str:
    """Mean of the per-seed mean differences with a 95% t interval over seeds (the seed the unit)."""
    from scipy.stats import t

    m = np.array([d.mean() for d in diffs])
    half = t.ppf(0.975, len(m) - 1) * m.std(ddof=1) / np.sqrt(len(m))
    return f"{m.mean():+.4f} [{m.mean() - half:+.4f}, {m.mean() + half:+.4f}]"


if __name__ == "__main__":
    main()
