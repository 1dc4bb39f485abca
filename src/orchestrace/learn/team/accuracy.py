"""How right a team is: team, solver and aggregator accuracy of a set of traces, and the held-out
team accuracy before and after a run, paired per question."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ...core.io import load_one
from ...core.model import Trace
from .program import BadInput, answer_correct, answering, run_question, trace_question


def accuracy_figures(traces: list[Trace]) -> dict[str, float]:
    """Team accuracy (R1), solver accuracy (mean over the first answers: solvers, proposer),
    aggregator accuracy (the last answer's: aggregator, reviser), and each answerer's own under its
    name (``solver_0_accuracy``, ..., ``proposer_accuracy``, ``reviser_accuracy``)."""
    team = solver = agg = 0.0
    n_solver = n_agg = 0
    by_agent: dict[str, list[bool]] = defaultdict(list)
    for tr in traces:
        fam, q = trace_question(tr)
        team += answer_correct(fam, q, ((tr.metadata or {}).get("outcome") or {}).get("final"))
        ans = answering(tr)
        last = ans[-1][1] if ans else None
        for i, _ in ans:
            e = tr.events[i]
            ok = answer_correct(fam, q, e.content if isinstance(e.content, str) else None)
            by_agent[e.agent].append(ok)
            if e.agent == last:
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
        **{f"{a}_accuracy": sum(v) / len(v) for a, v in sorted(by_agent.items())},
    }


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
        fam, q = run_question(tr, str(p))
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
