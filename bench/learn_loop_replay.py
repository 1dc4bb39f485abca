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
    clipped_update,
    decision_batch,
    majority_right,
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", default="continents")
    ap.add_argument("--runs", type=int, default=12, help="replayed runs per update (loop stop --questions)")
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--cost", type=float, default=0.01)
    ap.add_argument("--seeds", default="1", help="replay seeds (the policy starts from seed 0, as the loop)")
    ap.add_argument("--update", choices=("clipped", "adam"), default="clipped")
    ap.add_argument("--start", choices=("random", "offline"), default="random",
                    help="random: the loop's seed-0 start; offline: exact PG on the DEFAULT_TRAIN banks")  # fmt: skip
    ap.add_argument("--lr", type=float, default=StopLoopConfig.lr, help="step size of the clipped update")
    args = ap.parse_args()
    cfg = StopLoopConfig(family=args.family, budget=args.budget, cost=args.cost)
    step = StopLoop(cfg)
    bank = default_bank(args.family)
    by_id = {q.id: q for q in bank.questions}
    train = [by_id[step.fam.questions[i].id] for i in step.train_idx if step.fam.questions[i].id in by_id]
    assert step.bank is not None
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
        return (f"held-out acc {e['accuracy']:.3f} samples {e['mean_samples']:.2f} reward {r:.3f} | "
                f"P(stop) x {px:.2f} xx {pxx:.2f} xy {pxy:.2f}")  # fmt: skip

    start = StopPolicy.init(
        PolicyConfig(features=feature_names(False), budget=args.budget, cost=args.cost), 0
    )
    if args.start == "offline":
        pool = merge([default_bank(n) for n in DEFAULT_TRAIN], "+".join(DEFAULT_TRAIN))
        start = train_policy(pool, args.cost, algo="exact", budget=args.budget, seed=0)[0]
        print(f"offline exact PG on {'+'.join(DEFAULT_TRAIN)}: {evaluate(start)}")
    label = "adam (before)" if args.update == "adam" else f"clipped lr {args.lr}"
    for seed in (int(s) for s in args.seeds.split(",")):
        rng = np.random.default_rng(seed)
        pol = start
        print(f"seed {seed} {label} iteration 0: {evaluate(pol)}")
        for it in range(1, args.iterations + 1):
            out = tempfile.mkdtemp()
            runs = [replay(pol, train[i], args.budget, rng, out, k)
                    for k, i in enumerate(rng.choice(len(train), args.runs))]  # fmt: skip
            if args.update == "adam":
                pol = adam_update(pol, runs, args.cost)
            else:
                pol = clipped_update(pol, runs, args.cost, args.lr, cfg.epochs, cfg.clip)[0]
            print(f"seed {seed} {label} iteration {it}: {evaluate(pol)}")


if __name__ == "__main__":
    main()
