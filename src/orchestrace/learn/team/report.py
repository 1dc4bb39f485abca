"""Compare ``train team`` runs (credit methods x seeds) from their loop folders alone.

Held-out team accuracy before (iteration 0) and after (the last evaluated iteration) per run and,
per credit method, the seed mean with a paired bootstrap CI over held-out questions (every run of
the experiment is evaluated on the same questions with the same run seeds, so questions pair up
across runs too); each method against ``broadcast`` the same way. What changed, per agent: the
accuracy of its held-out answers, the share of answers that changed, and for the aggregator whom
it follows when the solvers disagree. ``team-report.json`` + ``team-report.png`` (held-out team
accuracy and training reward per iteration, one line per method, seeds averaged).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import msgspec
import numpy as np

from ...core.errors import LoadError
from ...core.io import load_one
from ...core.model import Trace
from ...core.paths import make_dirs
from ...core.stats import mean_ci
from ..loop import ITERATION_FILE, IterationRecord, completed, iteration_dir
from .config import CONFIG_FILE, read_config
from .program import AGGREGATOR, BadInput, answer_correct, canonical, run_question

REPORT_JSON = "team-report.json"
REPORT_PNG = "team-report.png"


@dataclass(frozen=True)
class Answers:
    """One held-out run: each agent's canonical answer and whether it is right."""

    question: str
    text: dict[str, str | None]  # agent -> raw answer
    canon: dict[str, str | None]  # agent -> canonical answer
    right: dict[str, bool]
    team_right: bool


@dataclass(frozen=True)
class AgentChange:
    """An agent's held-out answers before vs after training."""

    agent: str
    before: float  # accuracy of its answers
    after: float
    changed: float  # share of its answers that differ (canonically)
    #: aggregator only, over runs whose solvers disagree: share following the last solver, and
    #: share right when at least one solver was right
    follows_last_before: float | None = None
    follows_last_after: float | None = None
    picks_right_before: float | None = None
    picks_right_after: float | None = None


@dataclass(frozen=True)
class Example:
    question: str
    before: dict[str, str | None]
    after: dict[str, str | None]
    team_before: bool
    team_after: bool


@dataclass(frozen=True)
class RunSummary:
    folder: str
    credit: str
    seed: int
    iterations: int
    before: float
    after: float
    difference: float
    ci95: tuple[float, float]
    train_s_per_iteration: float  # mean rollout_s + update_s (held-out evaluation excluded)
    agents: list[AgentChange]
    examples: list[Example]


@dataclass(frozen=True)
class CreditSummary:
    """One credit method over its seeds: per-question accuracy averaged over seeds, then paired."""

    credit: str
    seeds: list[int]
    before: float
    after: float
    difference: float
    ci95: tuple[float, float]
    minus_broadcast: float | None = None  # after - broadcast's after, same questions
    minus_broadcast_ci95: tuple[float, float] | None = None


@dataclass
class TeamReport:
    runs: list[RunSummary]
    credits: list[CreditSummary]
    questions: int
    #: credit -> iteration -> seed-mean figure (held-out team accuracy, training reward)
    heldout_curve: dict[str, dict[int, float]] = field(default_factory=dict)
    reward_curve: dict[str, dict[int, float]] = field(default_factory=dict)


Runs = dict[str, list[Answers]]
"""question id -> its held-out runs (one, or ``--eval-runs`` of them)"""


def held_out_runs(folder: Path) -> Runs:
    """question id -> the answers of each of its held-out runs (g0, g1, ... in order) in an
    iteration folder: ``--eval-runs`` above 1 gives each question several runs to average."""
    runs: dict[str, list[tuple[int, Answers]]] = defaultdict(list)
    for p in (folder / "eval").glob("*-g*.events.jsonl"):
        g = p.name[: -len(".events.jsonl")].rpartition("-g")[2]
        if not (g.isascii() and g.isdigit()):
            continue
        q, a = _answers(load_one(p), str(p))
        runs[q].append((int(g), a))
    return {q: [a for _, a in sorted(rs, key=lambda x: x[0])] for q, rs in sorted(runs.items())}


def team_right(runs: list[Answers]) -> float:
    """A question's held-out team accuracy: the share of its runs the team got right."""
    return float(np.mean([a.team_right for a in runs]))


def _answers(tr: Trace, path: str) -> tuple[str, Answers]:
    fam, q = run_question(tr, path)
    text: dict[str, str | None] = {}
    for e in tr.events:
        if e.type == "return" and e.status != "error" and e.agent:
            text[e.agent] = e.content if isinstance(e.content, str) else None
    canon = {a: canonical(fam, q, t) for a, t in text.items()}
    right = {a: answer_correct(fam, q, t) for a, t in text.items()}
    final = ((tr.metadata or {}).get("outcome") or {}).get("final")
    return q.id, Answers(q.id, text, canon, right, answer_correct(fam, q, final))


def _mean(xs: list[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def _aggregator_habits(runs: list[Answers]) -> tuple[float | None, float | None]:
    follows, picks = [], []
    for a in runs:
        solvers = sorted(k for k in a.canon if k != AGGREGATOR)
        if AGGREGATOR not in a.canon or len({a.canon[s] for s in solvers}) < 2:
            continue
        follows.append(float(a.canon[AGGREGATOR] == a.canon[solvers[-1]]))
        if any(a.right[s] for s in solvers):
            picks.append(float(a.right[AGGREGATOR]))
    return _mean(follows), _mean(picks)


def agent_changes(before: dict[str, Answers], after: dict[str, Answers]) -> list[AgentChange]:
    qs = sorted(set(before) & set(after))
    agents = sorted({a for q in qs for a in before[q].canon}, key=lambda a: (a == AGGREGATOR, a))
    out = []
    for ag in agents:
        pairs = [(before[q], after[q]) for q in qs if ag in before[q].canon and ag in after[q].canon]
        acc_b = float(np.mean([b.right[ag] for b, _ in pairs])) if pairs else 0.0
        acc_a = float(np.mean([a.right[ag] for _, a in pairs])) if pairs else 0.0
        changed = float(np.mean([b.canon[ag] != a.canon[ag] for b, a in pairs])) if pairs else 0.0
        if ag == AGGREGATOR:
            fb, pb = _aggregator_habits([b for b, _ in pairs])
            fa, pa = _aggregator_habits([a for _, a in pairs])
            out.append(AgentChange(ag, acc_b, acc_a, changed, fb, fa, pb, pa))
        else:
            out.append(AgentChange(ag, acc_b, acc_a, changed))
    return out


class RunIdentity(msgspec.Struct):
    """What the report reads of a run's ``config.json``: a missing key or a seed that is no
    integer (``"x"``, ``null``, ``1.7`` read as 1) was an internal error or a wrong seed."""

    family: str
    credit: str
    seed: int


def _config(folder: Path) -> RunIdentity:
    if not folder.exists():  # a typo: not found, exit 2 as every other missing path
        raise LoadError("OT001", "folder not found", path=str(folder))
    p = folder / CONFIG_FILE
    if not p.is_file():
        raise BadInput("OT699", f"not a train team folder (no {CONFIG_FILE})", path=str(folder))
    try:
        return msgspec.convert(read_config(p), RunIdentity)
    except (msgspec.ValidationError, UnicodeEncodeError) as e:  # json keeps a lone "\ud800" escape
        raise BadInput("OT699", f"bad {CONFIG_FILE}: {e}", path=str(p)) from None


def _figure(folder: Path, rec: IterationRecord, part: str, key: str) -> float:
    """``rec.<part>[key]`` as a finite number; a record without it (a KeyError) or with NaN there
    is OT699 naming its iteration.json."""
    value = getattr(rec, part).get(key)
    if value is None or not math.isfinite(value):
        raise BadInput(
            "OT699",
            f"{part}.{key} is {'missing' if value is None else value}: expected a finite number",
            path=str(iteration_dir(folder, rec.iteration) / ITERATION_FILE),
        )
    return value


def team_report(
    folders: list[str | Path],
    out: str | Path | None = None,
    *,
    examples: int = 3,
    resamples: int = 2000,
    seed: int = 0,
) -> TeamReport:
    """Summarise ``train team`` loop folders; with ``out``, write the JSON and the PNG there."""
    if not folders:
        raise BadInput("OT699", "no train team folders given")
    runs: list[RunSummary] = []
    acc: dict[str, dict[int, tuple[Runs, Runs]]] = defaultdict(dict)
    heldout_pts: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    reward_pts: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    families = set()
    for f in map(Path, folders):
        cfg = _config(f)
        families.add(cfg.family)
        recs = [r for r in completed(f) if r.eval]
        if len(recs) < 2:
            raise BadInput("OT699", "fewer than two evaluated iterations (nothing to compare)", path=str(f))
        credit, run_seed = cfg.credit, cfg.seed
        before_runs = held_out_runs(iteration_dir(f, recs[0].iteration))
        after_runs = held_out_runs(iteration_dir(f, recs[-1].iteration))
        # accuracy over every run of a question (--eval-runs); the agents' changes on the first
        before = {q: r[0] for q, r in before_runs.items()}
        after = {q: r[0] for q, r in after_runs.items()}
        qs = sorted(set(before) & set(after))
        if not qs:  # the means below were of nothing: numpy's warning, then "share no question"
            raise BadInput(
                "OT699",
                f"no held-out question has a run (eval/*-g*.events.jsonl) in both iteration "
                f"{recs[0].iteration} and {recs[-1].iteration}",
                path=str(f),
            )
        b = np.array([team_right(before_runs[q]) for q in qs])
        a = np.array([team_right(after_runs[q]) for q in qs])
        diff, ci = mean_ci(a - b, resamples, seed)
        trained = [r for r in completed(f) if r.train]
        s_it = (
            float(
                np.mean(
                    [
                        _figure(f, r, "train", "rollout_s") + _figure(f, r, "train", "update_s")
                        for r in trained
                    ]
                )
            )
            if trained
            else 0.0
        )
        flips = [q for q in qs if before[q].team_right != after[q].team_right]
        runs.append(
            RunSummary(
                str(f),
                credit,
                run_seed,
                recs[-1].iteration,
                float(b.mean()),
                float(a.mean()),
                diff,
                ci,
                s_it,
                agent_changes(before, after),
                [
                    Example(q, before[q].text, after[q].text, before[q].team_right, after[q].team_right)
                    for q in flips[:examples]
                ],
            )
        )
        if run_seed in acc[credit]:
            raise BadInput("OT699", f"two runs of credit {credit!r} with seed {run_seed}", path=str(f))
        acc[credit][run_seed] = (before_runs, after_runs)
        for r in completed(f):
            if r.eval:
                heldout_pts[credit][r.iteration].append(_figure(f, r, "eval", "team_accuracy"))
            if r.train:
                reward_pts[credit][r.iteration].append(_figure(f, r, "train", "reward"))
    if len(families) > 1:
        raise BadInput("OT699", f"the folders train different question families: {sorted(families)}")
    common = sorted(set.intersection(*(set(ba[0]) & set(ba[1]) for c in acc.values() for ba in c.values())))
    if not common:
        raise BadInput("OT699", "the runs share no held-out question")

    def per_question(credit: str, which: int) -> np.ndarray:
        return np.mean([[team_right(s[which][q]) for q in common] for s in acc[credit].values()], axis=0)

    order = sorted(acc, key=lambda c: (c != "broadcast", c))
    credits = []
    for c in order:
        b, a = per_question(c, 0), per_question(c, 1)
        diff, ci = mean_ci(a - b, resamples, seed)
        vs, vs_ci = None, None
        if c != "broadcast" and "broadcast" in acc:
            vs, vs_ci = mean_ci(a - per_question("broadcast", 1), resamples, seed)
        credits.append(
            CreditSummary(c, sorted(acc[c]), float(b.mean()), float(a.mean()), diff, ci, vs, vs_ci)
        )
    report = TeamReport(
        runs,
        credits,
        len(common),
        {c: {i: float(np.mean(v)) for i, v in sorted(heldout_pts[c].items())} for c in order},
        {c: {i: float(np.mean(v)) for i, v in sorted(reward_pts[c].items())} for c in order},
    )
    if out is not None:
        write_report(report, Path(out))
    return report


def write_report(report: TeamReport, out: Path) -> tuple[Path, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    make_dirs(out)
    js = out / REPORT_JSON
    tmp = js.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(asdict(report), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(js)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    panels = (
        (report.heldout_curve, "held-out team accuracy"),
        (report.reward_curve, "training reward (team success)"),
    )
    # distinct markers and dashes: methods that train alike (broadcast, grpo) overlap exactly
    styles = [("o", "-"), ("s", "--"), ("^", ":"), ("D", "-."), ("v", "-"), ("P", "--")]
    for ax, (curves, title) in zip(axes, panels, strict=True):
        for k, (credit, pts) in enumerate(curves.items()):
            n = len(next(c for c in report.credits if c.credit == credit).seeds)
            marker, dash = styles[k % len(styles)]
            ax.plot(
                list(pts),
                list(pts.values()),
                marker=marker,
                linestyle=dash,
                ms=7 - k,
                label=f"{credit} ({n} seed{'s' if n > 1 else ''})",
            )
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean over seeds")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(0.80, 0.5), fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0, 0.79, 1))
    png = out / REPORT_PNG
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return js, png
