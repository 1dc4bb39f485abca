"""Published stopping rules for self-consistency voting, and the two limits (spec §6).

Every rule maps one question's ``PrefixTable`` (its samples in draw order) and a budget to the
number of samples it draws; the answer is then the majority of those samples (ties: the answer
seen first, as ``collections.Counter.most_common``). Null (unparsable) samples cost a draw but
never vote, in every rule.

- fixed-k majority vote;
- Adaptive-Consistency (Aggarwal et al. 2023, ``Pranjal2041/AdaptiveConsistency``): Beta and
  Dirichlet rules, plus its code's majority-share and entropy baselines;
- ESC (Li et al. 2024, ``Yiwei98/ESC``): windows of w samples, stop on a unanimous window;
- ConSol SPRT (arXiv 2503.17587; PyPI ``consol`` 0.3 ``SprtConfidenceModel`` and
  ``ConfidentSolver._determine_trials``), reimplemented on numpy;
- confidence-weighted voting in the style of DeepConf (Fu et al. 2025) for banks with token
  log-probabilities: stop on a weighted margin or a weighted leader share, answer the weighted leader;
- the hindsight oracle and, for synthetic banks, the Bayes-optimal rule (``bayes.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.special import entr, gammainc, gammaln

from .features import PrefixTable, beta_confidence, confidence_counts, confidence_leader, top_two

Rule = Callable[[PrefixTable, int], int]


def _first(mask: np.ndarray, budget: int) -> int:
    """1-based index of the first True in mask[:budget], else budget."""
    hit = np.flatnonzero(mask[:budget])
    return int(hit[0]) + 1 if len(hit) else budget


def fixed_k(k: int) -> Rule:
    return lambda pt, budget: min(k, budget, pt.length)


def ac_beta(threshold: float = 0.95) -> Rule:
    """Stop once P(p1 > 0.5 | v1, v2) >= threshold, p1 ~ Beta(v1 + 1, v2 + 1)."""
    return lambda pt, budget: _first(beta_confidence(pt.v1, pt.v2) >= threshold, budget)


@lru_cache(maxsize=100_000)
def dirichlet_leader_prob(counts: tuple[int, ...]) -> float:
    """P(the leader's share exceeds every other share) under Dirichlet(counts + 1).

    AC's code estimates this integral by Monte Carlo (50,000 x 2^((d-3)//2) points); we compute
    it exactly as a 1-D integral: with G_i ~ Gamma(c_i + 1) independent, the shares are
    G / sum(G), so P = int f_lead(x) prod_i F_i(x) dx. ``counts[0]`` is the leader.
    """
    lead, others = counts[0], counts[1:]
    k = lead + 1.0
    x = np.linspace(0.0, k + 12 * np.sqrt(k) + 20, 3001)[1:]  # Gamma(k) has no mass beyond
    dens = np.exp((k - 1) * np.log(x) - x - gammaln(k))
    for c in others:
        dens = dens * gammainc(c + 1.0, x)
    return float(np.trapezoid(np.concatenate([[0.0], dens]), np.concatenate([[0.0], x])))


def ac_dirichlet(threshold: float = 0.95, top_k: int = 5) -> Rule:
    """Beta rule while fewer than 3 distinct answers; else the Dirichlet rule on the top-k."""

    def rule(pt: PrefixTable, budget: int) -> int:
        beta_p = beta_confidence(pt.v1, pt.v2)
        for t in range(min(budget, pt.length)):
            if pt.distinct[t] < 3:
                p = beta_p[t]
            else:
                c = np.sort(pt.counts[t][pt.counts[t] > 0])[::-1][:top_k]
                p = dirichlet_leader_prob(tuple(int(v) for v in c))
            if p >= threshold:
                return t + 1
        return budget

    return rule


def esc(window: int = 5) -> Rule:
    """After each full window, stop if its w answers are identical (and parsed)."""

    def rule(pt: PrefixTable, budget: int) -> int:
        a = pt.answers
        for end in range(window, min(budget, pt.length) + 1, window):
            win = a[end - window : end]
            if win[0] >= 0 and np.all(win == win[0]):
                return end
        return budget

    return rule


def esc_expected_samples(probs: np.ndarray, window: int, budget: int) -> float:
    """ESC's expected sample count (Li et al. 2024):
    E[N] = w [sum_{i=0}^{L/w-2} q (1-q)^i (i+1) + (1-q)^{L/w-1} L/w],  q = sum_j p_j^w."""
    q = float(np.sum(np.asarray(probs, float) ** window))
    m = budget // window
    head = sum(q * (1 - q) ** i * (i + 1) for i in range(m - 1))
    return window * (head + (1 - q) ** (m - 1) * m)


@dataclass(frozen=True)
class Sprt:
    """ConSol's SPRT between H0: p = 0.5 and H1: p = p1 on the top-two counts (defaults of
    ``consol`` 0.3). Both boundaries stop sampling; with these defaults it stops once the
    leader is three votes ahead."""

    p1: float = 0.5001
    alpha: float = 0.05
    beta: float = 1 - 0.05 - 0.000024

    def test(self, first: int, second: int) -> bool:
        log_a = np.log((1 - self.beta) / self.alpha)
        log_b = np.log(self.beta / (1 - self.alpha))
        llr = first * np.log(self.p1 / 0.5) + second * np.log((1 - self.p1) / 0.5)
        return bool(llr >= log_a or llr <= log_b)

    def trials(self, first: int, second: int, budget: int) -> int:
        """``_determine_trials``: fewest extra samples that would pass if all went to the leader."""
        for k in range(budget + 1):
            if first + k == 0:
                continue
            if self.test(first + k, second):
                return k
        return budget


def consol_sprt(sprt: Sprt = Sprt()) -> Rule:
    """ConSol's loop: draw the fewest samples that could pass the test, repeat until it passes."""

    def rule(pt: PrefixTable, budget: int) -> int:
        budget = min(budget, pt.length)
        drawn = 0
        while True:
            first = int(pt.v1[drawn - 1]) if drawn else 0
            second = int(pt.v2[drawn - 1]) if drawn else 0
            k = min(sprt.trials(first, second, budget), budget - drawn)
            if k == 0:
                return max(drawn, 1)
            drawn += k

    return rule


def majority_share(threshold: float = 0.8) -> Rule:
    """AC code's majority baseline: stop once the top answer holds >= threshold (from t = 2)."""

    def rule(pt: PrefixTable, budget: int) -> int:
        share = pt.v1 / np.maximum(pt.valid, 1)
        t = np.arange(1, pt.length + 1)
        return _first((share >= threshold) & (t >= 2) & (pt.valid > 0), budget)

    return rule


def entropy_rule(threshold: float = 0.75) -> Rule:
    """AC code's entropy baseline: normalised entropy (base 2, a lone answer padded with a 1)
    <= threshold, from t = 2."""

    def rule(pt: PrefixTable, budget: int) -> int:
        b = min(budget, pt.length)
        c = pt.counts[:b].astype(float)
        nz = (c > 0).sum(axis=1)
        lone = nz == 1
        total = c.sum(axis=1) + lone
        with np.errstate(divide="ignore", invalid="ignore"):  # as scipy.stats.entropy(c, base=2)
            h = entr(c / total[:, None]).sum(axis=1) + np.where(lone, entr(1 / total), 0.0)  # padded 1
            h = h / np.log(2) / np.log2(np.where(lone, 2, np.maximum(nz, 2)))
        ok = (nz > 0) & (np.arange(b) >= 1) & (h <= threshold)
        return _first(ok, b) if ok.any() else budget

    return rule


def confidence_answer(which: str = "mean") -> Callable[[PrefixTable, int], int]:
    """The confidence-weighted leader after k samples (ties: the answer seen first)."""

    def answer(pt: PrefixTable, k: int) -> int:
        return int(confidence_leader(pt, which)[k - 1])

    return answer


def confidence_margin(margin: float, which: str = "mean") -> Rule:
    """Stop once the confidence-weighted leader is ``margin`` weighted votes ahead of the runner-up
    (with every weight 1 this is ConSol's default SPRT at margin 3)."""

    def rule(pt: PrefixTable, budget: int) -> int:
        w1, w2 = top_two(confidence_counts(pt, which))
        return _first(w1 - w2 >= margin, min(budget, pt.length))

    return rule


def confidence_share(threshold: float, which: str = "mean") -> Rule:
    """DeepConf's online consensus stop: the leader's share of the confidence-weighted votes
    reaches ``threshold``, from the second sample on."""

    def rule(pt: PrefixTable, budget: int) -> int:
        c = confidence_counts(pt, which)
        total = c.sum(axis=1)
        share = c.max(axis=1) / np.maximum(total, 1e-12)
        t = np.arange(1, pt.length + 1)
        return _first((share >= threshold) & (t >= 2) & (total > 0), min(budget, pt.length))

    return rule


def hindsight_oracle() -> Rule:
    """Fewest samples whose majority equals the full-budget majority (needs the future)."""

    def rule(pt: PrefixTable, budget: int) -> int:
        b = min(budget, pt.length)
        return _first(pt.majority[:b] == pt.majority[b - 1], b)

    return rule


@dataclass(frozen=True)
class Method:
    """A named stopping rule with its parameter (for Pareto sweeps)."""

    name: str
    family: str
    param: float
    rule: Rule = field(compare=False)
    answer: Callable[[PrefixTable, int], int] | None = field(default=None, compare=False)  # None: majority


def default_methods(budget: int = 40) -> list[Method]:
    """Every baseline at its published setting (fixed-k for all k in 1..budget)."""
    out = [Method(f"fixed-{k}", "fixed-k", k, fixed_k(k)) for k in range(1, budget + 1)]
    out += [
        Method("ac-beta(0.95)", "ac-beta", 0.95, ac_beta(0.95)),
        Method("ac-dirichlet(0.95)", "ac-dirichlet", 0.95, ac_dirichlet(0.95)),
        Method("esc(w=5)", "esc", 5, esc(5)),
        Method("consol-sprt", "consol-sprt", 3, consol_sprt()),
        Method("majority-share(0.8)", "majority-share", 0.8, majority_share(0.8)),
        Method("entropy(0.75)", "entropy", 0.75, entropy_rule(0.75)),
        Method("hindsight-oracle", "oracle", 0, hindsight_oracle()),
    ]
    return out


AC_THRESHOLDS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999)
ESC_WINDOWS = (1, 2, 3, 4, 5, 6, 8, 10)
# beta = 1 - alpha - eps; with p1 = 0.5001 the leader must be ~eps * 1e5 votes ahead
SPRT_EPS = (0.000004, 0.000012, 0.000018, 0.000024, 0.00003, 0.00004, 0.00005, 0.00007, 0.0001, 0.00015)
SHARE_THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def sweep_methods() -> list[Method]:
    """The threshold / window ranges over which Pareto curves are drawn."""
    out = [Method(f"ac-beta({t})", "ac-beta", t, ac_beta(t)) for t in AC_THRESHOLDS]
    out += [Method(f"ac-dirichlet({t})", "ac-dirichlet", t, ac_dirichlet(t)) for t in AC_THRESHOLDS]
    out += [Method(f"esc(w={w})", "esc", w, esc(w)) for w in ESC_WINDOWS]
    out += [
        Method(f"consol-sprt(eps={e:g})", "consol-sprt", e, consol_sprt(Sprt(beta=1 - 0.05 - e)))
        for e in SPRT_EPS
    ]
    out += [Method(f"majority-share({t})", "majority-share", t, majority_share(t)) for t in SHARE_THRESHOLDS]
    return out


CONF_MARGINS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0)
CONF_SHARES = (0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.995, 0.999)


def confidence_methods(which: str = "mean") -> list[Method]:
    """The confidence rules over their sweeps; each answers with the weighted leader."""
    ans = confidence_answer(which)
    out = [Method(f"conf-margin-{which}({m:g})", f"conf-margin-{which}", m, confidence_margin(m, which), ans)
           for m in CONF_MARGINS]  # fmt: skip
    out += [Method(f"conf-share-{which}({t:g})", f"conf-share-{which}", t, confidence_share(t, which), ans)
            for t in CONF_SHARES]  # fmt: skip
    return out
