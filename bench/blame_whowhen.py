"""Blame benchmark on real failed multi-agent runs (Who&When, ICML 2025).

For every run (all failed; gold = the agent and the step that caused the failure) each LLM-free
credit method assigns credit at the agent level and at the event level (the ``token`` unit: each
step with content is one unit), and we read its blame as the lowest credit:

* agent accuracy = P(gold agent is ranked first), ties broken uniformly at random (computed
  exactly: 1/|tied| when the gold agent is among the tied lowest);
* step accuracy and mean |predicted step - gold step| (expected value over ties);

against a random baseline (uniform agent, uniform step) and the most-active-agent baseline (the
agent with most steps; its first step). Counterfactual methods need per-step signals: the runs
hold none (no status, no scores), so we use an LLM-free heuristic step scorer (-1 when a step's
text matches error patterns) or, with ``--judge module:function`` (``(trace, event) -> score``),
an LLM judge of your own.

    python bench/blame_whowhen.py [--subset Hand-Crafted|Algorithm-Generated|all] [--judge mod:fn]
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
import time
from collections.abc import Callable
from statistics import mean

from orchestrace.core.model import Event, Trace
from orchestrace.core.paths import data_dir
from orchestrace.core.plugins import resolve
from orchestrace.credit import RemovalGame, compute_credit

ERROR_RE = re.compile(
    r"\b(error|exception|traceback|failed|failure|unable|cannot|can't|could not|couldn't|not found|"
    r"no results?|invalid|incorrect|timed? ?out|sorry|unfortunately)\b",
    re.IGNORECASE,
)


def heuristic_score(trace: Trace, e: Event) -> float:
    """LLM-free step scorer: -1 when the step's text reads like an error or a dead end, else 0."""
    return -1.0 if e.content and ERROR_RE.search(e.content) else 0.0


def load_runs(subset: str) -> list[Trace]:
    from orchestrace.importers import whowhen

    root = os.path.join(data_dir(), "who-and-when", "Who&When")
    subsets = ["Hand-Crafted", "Algorithm-Generated"] if subset == "all" else [subset]
    files = [f for s in subsets for f in sorted(glob.glob(os.path.join(root, s, "*.json")), key=_num)]
    return [t for f in files for t in whowhen.load(f, keep_content=True)]


def _num(path: str) -> int:
    return int(re.sub(r"\D", "", os.path.basename(path)) or 0)


def gold(trace: Trace) -> tuple[str, int]:
    lab = trace.metadata["labels"]
    return str(lab["mistake_agent"]).lower(), int(lab["mistake_step"])


def steps_of(trace: Trace) -> list[int]:
    return [int((e.attrs or {}).get("step", i)) for i, e in enumerate(trace.events)]


def blame_scores(pairs: dict[str, float], gold_key) -> float:  # type: ignore[no-untyped-def]
    """Expected hit rate of 'lowest credit first' with uniform tie-breaking."""
    low = min(pairs.values())
    tied = [k for k, v in pairs.items() if abs(v - low) <= 1e-12]
    return (1.0 / len(tied)) if gold_key in tied else 0.0


def step_blame(trace: Trace, credit: dict[str, float], gold_step: int) -> tuple[float, float]:
    """(hit rate, expected |distance|) of the lowest-credit event among events with content."""
    st = steps_of(trace)
    cands = {e.id: st[i] for i, e in enumerate(trace.events) if e.id in credit}
    low = min(credit[k] for k in cands)
    tied = [cands[k] for k in cands if abs(credit[k] - low) <= 1e-12]
    return sum(s == gold_step for s in tied) / len(tied), mean(abs(s - gold_step) for s in tied)


def agent_credit(
    trace: Trace, method: str, scorer, propagate: bool, samples: int, seed: int
) -> dict[str, float]:  # type: ignore[no-untyped-def]
    scores = {e.id: scorer(trace, e) for e in trace.events}

    def game(tr, u):  # type: ignore[no-untyped-def]
        return RemovalGame(tr, u, event_scores=scores, propagate=propagate)

    opts = {"game": game} if method in ("loo", "shapley") else {}
    if method == "shapley":
        opts.update(samples=samples, seed=seed)
    out: dict[str, dict[str, float]] = {}
    for unit in ("agent", "token"):
        ((u, uc),) = compute_credit([trace], method, unit, **opts)
        out[unit] = {k: v for k, v in uc.values.items() if k in u.ids}
    return out


def run(subset: str, judge: Callable | None, samples: int, seed: int = 0) -> list[dict]:  # type: ignore[type-arg]
    traces = load_runs(subset)
    scorer = judge or heuristic_score
    configs = [
        ("broadcast", "broadcast", True),
        ("grpo", "grpo", True),
        ("loo (downstream removal)", "loo", True),
        ("loo (own steps only)", "loo", False),
        ("shapley (downstream removal)", "shapley", True),
        ("shapley (own steps only)", "shapley", False),
    ]
    rows: dict[str, dict[str, list[float]]] = {}

    def add(name: str, a: float, s: float, d: float) -> None:
        r = rows.setdefault(name, {"agent": [], "step": [], "dist": []})
        r["agent"].append(a)
        r["step"].append(s)
        r["dist"].append(d)

    t0 = time.perf_counter()
    for tr in traces:
        g_agent, g_step = gold(tr)
        agents = [a for a in dict.fromkeys(e.agent for e in tr.events)]
        st = steps_of(tr)
        n_steps = len(st)
        # baselines
        add(
            "random",
            1 / len(agents) if g_agent in [a.lower() for a in agents] else 0.0,
            1 / n_steps,
            mean(abs(s - g_step) for s in st),
        )
        counts = {a: sum(e.agent == a for e in tr.events) for a in agents}
        top = max(counts.values())
        busiest = [a for a in agents if counts[a] == top]
        first = {a: next(s for s, e in zip(st, tr.events, strict=True) if e.agent == a) for a in busiest}
        add(
            "most-active agent",
            (1 / len(busiest)) if g_agent in [a.lower() for a in busiest] else 0.0,
            mean(float(first[a] == g_step) for a in busiest),
            mean(abs(first[a] - g_step) for a in busiest),
        )
        flagged = [s for s, e in zip(st, tr.events, strict=True) if scorer(tr, e) < 0]
        if flagged:
            f_agent = next(e.agent for s, e in zip(st, tr.events, strict=True) if s == flagged[0])
            add(
                "first flagged step (scorer alone)",
                float(f_agent.lower() == g_agent),
                float(flagged[0] == g_step),
                abs(flagged[0] - g_step),
            )
        else:
            add(
                "first flagged step (scorer alone)",
                1 / len(agents) if g_agent in [a.lower() for a in agents] else 0.0,
                1 / n_steps,
                mean(abs(s - g_step) for s in st),
            )
        for name, method, prop in configs:
            cred = agent_credit(tr, method, scorer, prop, samples, seed)
            by_agent = {k.lower(): v for k, v in cred["agent"].items()}
            a = blame_scores(by_agent, g_agent)
            s, d = step_blame(tr, cred["token"], g_step)
            add(name, a, s, d)
    dt = time.perf_counter() - t0
    out = []
    for name, r in rows.items():
        out.append(
            {
                "method": name,
                "n": len(r["agent"]),
                "agent_acc": mean(r["agent"]),
                "step_acc": mean(r["step"]),
                "mean_step_dist": mean(r["dist"]),
            }
        )
    print(
        f"# Who&When {subset}: {len(traces)} failed runs, scorer={'judge' if judge else 'heuristic'}, {dt:.1f} s"
    )
    print(f"{'method':38s} {'agent@1':>8s} {'step@1':>8s} {'|dstep|':>8s}")
    for o in out:
        print(f"{o['method']:38s} {o['agent_acc']:8.3f} {o['step_acc']:8.3f} {o['mean_step_dist']:8.2f}")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--subset", default="all", choices=["all", "Hand-Crafted", "Algorithm-Generated"])
    ap.add_argument("--judge", default=None, help="LLM judge hook 'module:function' (trace, event) -> score")
    ap.add_argument("--samples", type=int, default=64, help="Shapley permutations beyond 12 players")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    judge = resolve(a.judge) if a.judge else None
    for sub in ["Hand-Crafted", "Algorithm-Generated"] if a.subset == "all" else [a.subset]:
        run(sub, judge, a.samples, a.seed)
        print()


if __name__ == "__main__":
    sys.exit(main())
