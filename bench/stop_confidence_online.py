"""Leave-one-family-out on the small log-probability bank: does normalising the confidence margin
by the deployment's running mean token probability transfer better across families?

The ``learned+conf+w`` policy (``bench/stop_confidence.py``) plus one feature,
log1p(weighted lead / mu) / log1p(budget), where mu is the mean exp(mean token log-prob) of the
voting samples. At training mu is each training family's own mean over its samples; at test it is
the mean over the samples the policy drew on the held-out family's earlier questions (in bank
order, per replay order; the training families' mean until 20 samples are drawn): no sample the
reported budget does not count, no label. Offline only (the live runtime has no memory across
runs). Compared with the plain policy and the tuned confidence margin, as in
``bench/stop_confidence.py``.

    OMP_NUM_THREADS=1 nice python bench/stop_confidence_online.py [--seed 0] [--cost 0.003]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np

from orchestrace.learn.rl import exact
from orchestrace.learn.stopping.banks import NULL, Bank, default_bank_names, load_bank
from orchestrace.learn.stopping.confidence import pick_on_training
from orchestrace.learn.stopping.evaluation import Result, _correct, paired_diff_ci, run_rule, tables
from orchestrace.learn.stopping.features import PrefixTable, feature_names, replay_features, replay_table
from orchestrace.learn.stopping.policy import PolicyConfig, StopPolicy
from orchestrace.learn.stopping.pool import build_pool, decision_points
from orchestrace.learn.stopping.rules import Method, confidence_answer, confidence_counts, fixed_k
from orchestrace.learn.stopping.task import PoolTask
from orchestrace.learn.stopping.training import merge, policy_method, train_policy

DATA = Path(__file__).parent / "data" / "logprob_smollm2"
ORDERS = 8
WARMUP = 20  # drawn samples before the running mean replaces the training families' mean


def relative_lead(pt: PrefixTable, mu: float, budget: int) -> np.ndarray:
    """[T] log1p(the p-weighted leader's lead / mu) / log1p(budget)."""
    w = confidence_counts(pt, "mean")
    top = -np.partition(-w, 1, axis=1)[:, :2] if w.shape[1] > 1 else np.stack([w[:, 0], 0 * w[:, 0]], 1)
    return (np.log1p((top[:, 0] - top[:, 1]) / mu) / np.log1p(budget)).astype(np.float32)


def mean_p(bank: Bank, budget: int) -> float:
    return float(np.mean([np.exp(x.mean) for q in bank.questions
                          for x, a in zip(q.logprob[:budget], q.answers[:budget], strict=True)
                          if x is not None and a != NULL]))  # fmt: skip


def train_relative(families: list[Bank], budget: int, cost: float, seed: int) -> StopPolicy:
    train = merge(families, "train")
    mus = [mean_p(b, budget) for b in families]
    pool = build_pool(train, budget, 16, seed, confidence=True, weighted=True)
    extra = np.stack([
        relative_lead(replay_table(train.questions[int(qi)], pool.order[e]), mus[train.meta["part_of"][int(qi)]],
                      budget)[pool.points - 1]
        for e, qi in enumerate(pool.question)
    ])  # fmt: skip
    pool = replace(pool, feats=np.concatenate([pool.feats, extra[:, :, None]], axis=2))
    cfg = PolicyConfig(features=[*feature_names(False, True), "conf_lead_margin_rel"],
                       feature_set="counts+confidence", answer="confidence", budget=budget, cost=cost)  # fmt: skip
    return exact.train(PoolTask(pool, cost, cfg), exact.Args(seed=seed)).policy


def run_relative(pol: StopPolicy, held: Bank, reps: list, budget: int, mu0: float) -> Result:
    """The policy on the held-out family, questions in bank order, mu from the samples drawn."""
    answer, points = confidence_answer("mean"), decision_points(budget)
    n = np.zeros((len(reps), ORDERS))
    c = np.zeros_like(n)
    for r in range(ORDERS):
        drawn: list[float] = []
        for i, (q, row) in enumerate(zip(held.questions, reps, strict=True)):
            pt = row[r]
            mu = float(np.mean(drawn)) if len(drawn) >= WARMUP else mu0
            x = np.concatenate(
                [replay_features(pt, budget, None, True), relative_lead(pt, mu, budget)[:, None]], 1
            )
            stop = pol.stops(x[points - 1])
            stop[-1] = True
            k = int(points[int(np.argmax(stop))])
            n[i, r], c[i, r] = k, _correct(q, pt, answer(pt, k))
            ok = (pt.answers[:k] != NULL) & np.isfinite(pt.logprob[:k, 0])
            drawn += list(np.exp(pt.logprob[:k, 0][ok]))
    return Result("learned+conf+w+rel", "learned", 0, n.mean(axis=1), c.mean(axis=1))


def pooled(rs: list[Result]) -> Result:
    return Result(rs[0].method, "x", 0, np.concatenate([r.n_used for r in rs]),
                  np.concatenate([r.correct for r in rs]))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cost", type=float, default=0.003)
    args = ap.parse_args()
    banks = [load_bank(str(DATA / f"{n}.jsonl.gz")) for n in default_bank_names()]
    budget, seed = min(b.min_samples for b in banks), args.seed
    cols: dict[str, list[Result]] = {
        "fixed": [],
        "relative": [],
        "learned+conf+w": [],
        "tuned conf-margin": [],
    }
    for k, held in enumerate(banks):
        fams = [b for j, b in enumerate(banks) if j != k]
        rel = train_relative(fams, budget, args.cost, seed)
        plain = train_policy(merge(fams, "train"), args.cost, budget=budget, seed=seed, confidence=True,
                             weighted=True)[0]  # fmt: skip
        reps = tables(held, budget, ORDERS, seed)
        margin = pick_on_training(merge(fams, "train"), budget, ORDERS, seed)["conf-margin-mean"]
        got = [
            run_rule(held, reps, Method("fixed", "fixed-k", budget, fixed_k(budget)), budget),
            run_relative(rel, held, reps, budget, float(np.mean([mean_p(b, budget) for b in fams]))),
            run_rule(held, reps, policy_method(plain), budget),
            run_rule(held, reps, margin, budget),
        ]
        for col, r in zip(cols.values(), got, strict=True):
            col.append(r)
        print(f"{held.name:13s} " + " | ".join(f"{name} {r.accuracy:.3f} @ {r.mean_samples:.2f}"
                                              for name, r in zip(cols, got, strict=True)), flush=True)  # fmt: skip
    pool = {name: pooled(rs) for name, rs in cols.items()}
    for name, r in pool.items():
        ci = paired_diff_ci(r, pool["fixed"], seed=seed).accuracy
        print(f"pooled {name}: {r.accuracy:.3f} @ {r.mean_samples:.2f}, "
              f"{100 * (r.accuracy - pool['fixed'].accuracy):+.1f} [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]")  # fmt: skip
    a, b = pool["relative"], pool["tuned conf-margin"]
    ci = paired_diff_ci(a, b, seed=seed)
    print(f"relative - tuned conf-margin: {100 * (a.accuracy - b.accuracy):+.1f} "
          f"[{100 * ci.accuracy[0]:+.1f}, {100 * ci.accuracy[1]:+.1f}], samples {a.mean_samples - b.mean_samples:+.2f} "
          f"[{ci.mean_samples[0]:+.2f}, {ci.mean_samples[1]:+.2f}]")  # fmt: skip


if __name__ == "__main__":
    main()
