"""Leave-one-family-out on the small log-probability bank (``bench/logprob_bank.py``): fixed-k
majority, the published rules at their defaults, the learned policies (answer counts only; with
token-confidence features, ``learned+conf``; and those answering the confidence-weighted leader,
``learned+conf+w``), and every tuned rule (the
rules and the confidence-weighted ones, each setting picked on the six training families only),
each against fixed-budget voting with a paired 95% bootstrap CI over questions.

    OMP_NUM_THREADS=1 nice python bench/stop_confidence.py [--orders 8] [--seed 0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from orchestrace.learn.stopping.banks import Bank, default_bank_names, load_bank
from orchestrace.learn.stopping.confidence import ConfidenceRow, lofo_confidence
from orchestrace.learn.stopping.evaluation import paired_diff_ci
from orchestrace.learn.stopping.rules import Method
from orchestrace.learn.stopping.training import DEFAULT_COST, policy_method, train_policy

DATA = Path(__file__).parent / "data" / "logprob_smollm2"


#: learned variants: name -> (token-confidence features, answer the confidence-weighted leader)
VARIANTS = {
    "learned": (False, False),
    "learned+conf": (True, False),
    "learned+conf+w": (True, True),
    "learned+w": (False, True),  # ablation: the weighted answer without the confidence features
}
DEFAULT_VARIANTS = ["learned", "learned+conf", "learned+conf+w"]


def learned_methods(costs: tuple[float, ...], budget: int, seed: int, variants: tuple[str, ...]):
    """Per variant and cost, the policy trained on the training families."""

    def train(bank: Bank) -> list[Method]:
        out = []
        for v in variants:
            conf, weighted = VARIANTS[v]
            for c in costs:
                pol = train_policy(bank, c, budget=budget, seed=seed, confidence=conf, weighted=weighted)[0]
                out.append(policy_method(pol, f"{v}(c={c:g})"))
        return out

    return train


def show(rows: list[ConfidenceRow]) -> None:
    print(
        "| family | method | setting | accuracy | mean samples | vs fixed-max, points [95% CI] | dominated by |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        dom = (
            ", ".join(r.dominated_by[:2]) + (" ..." if len(r.dominated_by) > 2 else "")
            if r.dominated_by
            else "-"
        )
        ci = f"{r.diff_points:+.1f} [{r.diff_ci95[0]:+.1f}, {r.diff_ci95[1]:+.1f}]"
        print(
            f"| {r.family} | {r.method} | {r.setting} | {r.accuracy:.3f} | {r.mean_samples:.2f} | {ci} | {dom} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--orders", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=str(DATA), help="folder of the seven FAMILY.jsonl.gz banks")
    ap.add_argument("--costs", type=float, nargs="*", default=[DEFAULT_COST])
    ap.add_argument("--learned", nargs="*", default=DEFAULT_VARIANTS, choices=list(VARIANTS),
                    help="learned variants: +conf sees token-confidence features, +w answers the "
                         "confidence-weighted leader (and is trained for it)")  # fmt: skip
    args = ap.parse_args()
    banks = [load_bank(str(Path(args.data) / f"{n}.jsonl.gz")) for n in default_bank_names()]
    budget = min(b.min_samples for b in banks)
    print(f"{len(banks)} families, {sum(len(b) for b in banks)} questions, budget {budget}, "
          f"{args.orders} orders, seed {args.seed}")  # fmt: skip
    res = lofo_confidence(
        banks, budget=budget, orders=args.orders, seed=args.seed,
        learned=learned_methods(tuple(args.costs), budget, args.seed, tuple(args.learned)),
    )  # fmt: skip
    show(res.rows)
    print("\npooled, paired 95% CI of the difference (accuracy in points; mean samples):")
    ref = [m for m in ("consol-sprt", "tuned:consol-sprt", "tuned:conf-margin-mean") if m in res.pooled]
    for name in (m for m in res.pooled if m.startswith(("tuned:conf", "learned"))):
        for other in (o for o in ref if o != name):
            ci = paired_diff_ci(res.pooled[name], res.pooled[other], seed=args.seed)
            a, b = res.pooled[name], res.pooled[other]
            print(
                f"  {name} - {other}: accuracy {100 * (a.accuracy - b.accuracy):+.1f} "
                f"[{100 * ci.accuracy[0]:+.1f}, {100 * ci.accuracy[1]:+.1f}], samples "
                f"{a.mean_samples - b.mean_samples:+.2f} [{ci.mean_samples[0]:+.2f}, {ci.mean_samples[1]:+.2f}]"
            )
    print("\nsettings picked on the training families:")
    for fam, chosen in res.settings.items():
        print(f"  {fam}: " + ", ".join(chosen.values()))


if __name__ == "__main__":
    main()
