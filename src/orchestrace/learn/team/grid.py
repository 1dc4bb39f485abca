"""``orchestrace bench team``: families x topologies x credit methods x seeds of ``train team``, one
table and one figure (issue 32 items 1 and 2).

Every cell is a ``train team`` loop folder ``cells/<family>-<topology>-<credit>-s<seed>`` under the
output folder; a cell whose last iteration is written is kept, so the grid resumes (and can be
completed over several runs of the command, with other lists: the report reads every cell it finds).
The starting policy's held-out evaluation is the same for every credit method and seed of a
(family, topology) (fixed held-out questions and run seeds, the same starting adapters), so it runs
once, in ``start/<family>-<topology>``, and is copied into each cell as its iteration 0.

Topologies: ``agg2`` / ``agg3`` (2 or 3 solvers, then an aggregator) and ``revise`` (a proposer,
then a reviser who reads the proposal). Credit: ``broadcast``, ``grpo``, ``loo-fork``,
``shapley-fork`` (agent unit) and ``c3`` (turn unit; at the agent unit it is 0 for every call of
this program, see docs/train_team.md). ``shapley-fork`` on ``revise`` (one earlier agent) is
``loo-fork`` and is not run.

The report: per (family, topology, credit) the held-out team accuracy at the start and after
training (per question, averaged over the cell's seeds), the difference with a paired bootstrap 95%
CI over questions, and the difference against broadcast over the seeds both have; "pooled" rows
pool the families' questions. For the k = 3 aggregator, where its solvers disagree: the share of
right picks when one solver is right, of plurality picks, and of copies of each position, start vs
after, with a bootstrap CI of the change; for the ``revise`` reviser the same for its share of
changed proposals, of wrong proposals corrected and of right ones broken. Then every cell on its
own line (start, after, the paired CI, training seconds per iteration), losses included.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ...core.errors import LoadError
from ..loop import completed, iteration_dir
from .config import TeamConfig, check_resume
from .program import AGGREGATOR, PROPOSER, REVISER, BadInput
from .report import Answers, Runs, held_out_runs, team_right

TOPOLOGIES = {"agg2": ("aggregate", 2), "agg3": ("aggregate", 3), "revise": ("revise", 1)}
#: grid credit -> (credit method, unit, resamples of the last agent's call)
CREDITS = {
    "broadcast": ("broadcast", "agent", 1),
    "grpo": ("grpo", "agent", 1),
    "loo-fork": ("loo-fork", "agent", 1),
    "shapley-fork": ("shapley-fork", "agent", 1),
    "c3": ("c3", "turn", 1),
    # the last agent's calls as a group of 4 on the same inputs (RLOO), added after the grid
    "loo-fork-rloo": ("loo-fork", "agent", 3),
}
#: the per-agent method compared with broadcast, chosen before the grid ran (docs/train_team.md)
PER_AGENT = "loo-fork"
GRID_JSON, GRID_MD, GRID_PNG = "grid.json", "grid.md", "grid.png"


@dataclass(frozen=True)
class Cell:
    family: str
    topology: str
    credit: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.family}-{self.topology}-{self.credit}-s{self.seed}"


def cells(families: list[str], topologies: list[str], credits: list[str], seeds: list[int]) -> list[Cell]:
    """The grid in run order (family, topology, seed, credit), skipping what is not a cell."""
    for t in topologies:
        if t not in TOPOLOGIES:
            raise BadInput("OT695", f"unknown topology {t!r}; known: {', '.join(TOPOLOGIES)}")
    for c in credits:
        if c not in CREDITS:
            raise BadInput("OT695", f"unknown grid credit {c!r}; known: {', '.join(CREDITS)}")
    return [
        Cell(f, t, c, s)
        for f in families
        for t in topologies
        for s in seeds
        for c in credits
        if not (c == "shapley-fork" and t == "revise")
    ]


def cell_config(base: TeamConfig, cell: Cell) -> TeamConfig:
    topology, k = TOPOLOGIES[cell.topology]
    method, unit, resamples = CREDITS[cell.credit]
    return replace(
        base,
        family=cell.family,
        topology=topology,
        solvers=k,
        credit=method,
        unit=unit,
        resamples=resamples,
        seed=cell.seed,
    )


def start_config(cfg: TeamConfig) -> TeamConfig:
    """The starting policy's held-out evaluation, shared by every credit method and seed."""
    return replace(cfg, credit="grpo", unit="agent", resamples=1, seed=0)


def is_done(folder: Path, iterations: int) -> bool:
    recs = completed(folder) if folder.is_dir() else []
    return len(recs) == iterations + 1 and bool(recs[-1].eval)


@dataclass
class GridRun:
    """What one invocation did: cells run now, cells found finished, seconds per cell run."""

    ran: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def run_grid(
    grid: list[Cell],
    base: TeamConfig,
    iterations: int,
    out: str | Path,
    *,
    threads: int | None = None,
    steps: dict[tuple[str, ...], Any] | None = None,
    progress: Callable[[Cell, str], None] | None = None,
) -> GridRun:
    """Run every unfinished cell (one loaded model per adapter set, reused across cells)."""
    from .program import adapters_for
    from .step import make_step
    from .trainer import train_team

    out = Path(out)
    base = replace(base, eval_every=max(iterations, 1))  # held-out evaluation at the start and the end
    for c in grid:
        cell_config(base, c).check()
    for c in grid:  # a kept cell of other settings would be reported beside these: refuse first
        check_resume(out / "cells" / c.name, cell_config(base, c))
        check_resume(out / "start" / f"{c.family}-{c.topology}", start_config(cell_config(base, c)))
    steps = steps if steps is not None else {}
    res = GridRun()
    for c in grid:
        folder = out / "cells" / c.name
        if is_done(folder, iterations):
            res.kept.append(c.name)
            continue
        cfg = cell_config(base, c)
        key = tuple(adapters_for(cfg.adapters, cfg.solvers, cfg.topology)) + (str(cfg.lora_rank),)
        if key not in steps:
            steps[key] = make_step(cfg, threads)
        if progress is not None:
            progress(c, "start")
        t0 = time.perf_counter()
        start = out / "start" / f"{c.family}-{c.topology}"
        if not is_done(start, 0):
            train_team(start_config(cfg), start, 0, step=steps[key])
        if not completed(folder):
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copytree(iteration_dir(start, 0), iteration_dir(folder, 0))
        train_team(cfg, folder, iterations, step=steps[key])
        res.ran.append(c.name)
        res.seconds[c.name] = time.perf_counter() - t0
        if progress is not None:
            progress(c, "done")
    return res


# ------------------------------------------------------------------ the report


@dataclass(frozen=True)
class Row:
    """One (family or "pooled", topology, credit) line of the table."""

    family: str
    topology: str
    credit: str
    seeds: list[int]
    questions: int
    start: float
    after: float
    gain: float
    gain_ci95: tuple[float, float]
    vs_broadcast: float | None = None  # after - broadcast's after, over the seeds both have
    vs_broadcast_ci95: tuple[float, float] | None = None
    vs_broadcast_seeds: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Choice:
    """The k = 3 aggregator where its solvers disagree (or where they all answer right; or the
    reviser, every run), start vs after (all seeds of a cell group); ``disagreements_*``: the runs
    counted."""

    family: str
    credit: str
    seeds: list[int]
    disagreements_start: int
    disagreements_after: int
    #: figure -> (start share, after share, change, change CI): right_when_one_has_it,
    #: plurality, position_0, position_1, position_2
    figures: dict[str, tuple[float, float, float, tuple[float, float]]]


@dataclass(frozen=True)
class CellResult:
    """One finished cell: its held-out team accuracy at the start and after, paired per question."""

    family: str
    topology: str
    credit: str
    seed: int
    start: float
    after: float
    gain: float
    gain_ci95: tuple[float, float]
    seconds_per_iteration: float  # rollouts + update, held-out evaluation excluded


@dataclass
class GridReport:
    rows: list[Row]
    choices: list[Choice]
    cells: list[str]
    iterations: dict[str, int]
    seconds_per_iteration: dict[str, float]
    per_cell: list[CellResult] = field(default_factory=list)
    #: the ``revise`` topology's reviser, start vs after (``Choice`` with REVISION_FIGURES)
    revisions: list[Choice] = field(default_factory=list)
    #: the k = 3 aggregator where all its solvers are right (``Choice`` with AGREEMENT_FIGURES)
    agreements: list[Choice] = field(default_factory=list)


def _cell_answers(folder: Path) -> tuple[Runs, Runs, int, float]:
    """(start runs, after runs, iterations, mean training seconds per iteration) of a cell."""
    recs = completed(folder)
    last = recs[-1]
    s = [r.train.get("rollout_s", 0.0) + r.train.get("update_s", 0.0) for r in recs[1:]]
    return (
        held_out_runs(iteration_dir(folder, 0)),
        held_out_runs(iteration_dir(folder, last.iteration)),
        last.iteration,
        float(np.mean(s)) if s else 0.0,
    )


def _boot(diff_parts: list[np.ndarray], resamples: int, seed: int) -> tuple[float, float]:
    """A paired percentile bootstrap CI of a mean over questions (rows of ``diff_parts`` stacked)."""
    from ...core.stats import mean_ci

    d = np.concatenate(diff_parts) if diff_parts else np.array([])
    return mean_ci(d, resamples, seed)[1] if len(d) else (float("nan"), float("nan"))


def _solvers(a: Answers) -> list[str]:
    return sorted(k for k in a.canon if k != AGGREGATOR)


def choice_counts(a: Answers) -> dict[str, tuple[float, float]] | None:
    """(hit, counted) per figure for one run of a k = 3 team whose solvers disagree; None otherwise."""
    solvers = _solvers(a)
    if AGGREGATOR not in a.canon or len(solvers) != 3 or len({a.canon[s] for s in solvers}) < 2:
        return None
    pick = a.canon[AGGREGATOR]
    out: dict[str, tuple[float, float]] = {}
    if any(a.right[s] for s in solvers):
        out["right_when_one_has_it"] = (float(a.right[AGGREGATOR]), 1.0)
    votes: dict[Any, int] = defaultdict(int)
    for s in solvers:
        votes[a.canon[s]] += 1
    top = max(votes.values())
    if top >= 2:
        (plural,) = [v for v, n in votes.items() if n == top]
        out["plurality"] = (float(pick == plural), 1.0)
    for i, s in enumerate(solvers):
        out[f"position_{i}"] = (float(pick == a.canon[s]), 1.0)
    return out


CHOICE_FIGURES = ("right_when_one_has_it", "plurality", "position_0", "position_1", "position_2")
AGREEMENT_FIGURES = ("breaks_agreed_right",)


def agreement_counts(a: Answers) -> dict[str, tuple[float, float]] | None:
    """(hit, counted) for one run of a k = 3 team whose three solvers all answer right: whether the
    aggregator's answer is wrong anyway (it broke an answer it had only to repeat); None otherwise."""
    solvers = _solvers(a)
    if AGGREGATOR not in a.canon or len(solvers) != 3 or not all(a.right[s] for s in solvers):
        return None
    return {"breaks_agreed_right": (float(not a.right[AGGREGATOR]), 1.0)}


REVISION_FIGURES = ("changes", "corrects_wrong", "breaks_right")


def revision_counts(a: Answers) -> dict[str, tuple[float, float]] | None:
    """(hit, counted) per figure for one run of a ``revise`` team: whether the reviser changed the
    proposal, corrected a wrong one (right after a wrong proposal), broke a right one (wrong after a
    right proposal); None for a run of another topology."""
    if PROPOSER not in a.canon or REVISER not in a.canon:
        return None
    out = {"changes": (float(a.canon[REVISER] != a.canon[PROPOSER]), 1.0)}
    if a.right[PROPOSER]:
        out["breaks_right"] = (float(not a.right[REVISER]), 1.0)
    else:
        out["corrects_wrong"] = (float(a.right[REVISER]), 1.0)
    return out


def _choice(
    family: str, credit: str, seeds: list[int], start: Runs, afters: list[Runs],
    resamples: int, seed: int,
    counts: Callable[[Answers], dict[str, tuple[float, float]] | None] = choice_counts,
    names: tuple[str, ...] = CHOICE_FIGURES,
) -> Choice:  # fmt: skip
    qs = sorted(start)
    figures = {}
    rng = np.random.default_rng(seed)
    n_start = sum(counts(a) is not None for q in qs for a in start[q])
    n_after = sum(counts(a) is not None for af in afters for q in qs if q in af for a in af[q])
    for f in names:
        # per question: hits and counts summed over its runs at the start, and over the seeds' runs after
        sb = np.zeros((len(qs), 2))
        sa = np.zeros((len(qs), 2))
        for i, q in enumerate(qs):
            for a in start[q]:
                c = counts(a)
                if c and f in c:
                    sb[i] += c[f]
            for af in afters:
                for a in af.get(q, []):
                    c = counts(a)
                    if c and f in c:
                        sa[i] += c[f]

        def share(m: np.ndarray) -> float:
            return float(m[:, 0].sum() / m[:, 1].sum()) if m[:, 1].sum() else float("nan")

        b, a = share(sb), share(sa)
        boots = []
        for _ in range(resamples):
            idx = rng.integers(0, len(qs), len(qs))
            boots.append(share(sa[idx]) - share(sb[idx]))
        boots_arr = np.array([x for x in boots if np.isfinite(x)])
        ci = (
            (float(np.percentile(boots_arr, 2.5)), float(np.percentile(boots_arr, 97.5)))
            if len(boots_arr)
            else (float("nan"), float("nan"))
        )
        figures[f] = (b, a, a - b, ci)
    return Choice(family, credit, seeds, n_start, n_after, figures)


Found = dict[tuple[str, str, str], dict[int, tuple[Runs, Runs]]]
"""(family, topology, credit) -> seed -> (held-out answers at the start, after the last iteration)"""


def grid_report(out: str | Path, *, resamples: int = 2000, seed: int = 0) -> GridReport:
    """Every finished cell under ``out`` -> rows per family and pooled, and the k = 3 choices."""
    out = Path(out)
    if not out.is_dir():  # writing the report into it was an internal error (FileNotFoundError)
        raise LoadError("OT001", "folder not found", path=str(out))
    found: Found = defaultdict(dict)
    iterations: dict[str, int] = {}
    speed: dict[str, float] = {}
    for folder in sorted((out / "cells").glob("*-s*")):
        cfg_path = folder / "config.json"
        if not cfg_path.is_file():
            continue
        recs = completed(folder)
        if len(recs) < 2 or not recs[-1].eval:
            continue  # not finished: a killed or running cell
        try:
            family, topology, credit, s = _parse(folder.name)
        except BadInput as e:
            e.path = str(folder)
            raise
        start, after, its, sec = _cell_answers(folder)
        found[(family, topology, credit)][s] = (start, after)
        iterations[folder.name], speed[folder.name] = its, sec
    if not found:  # an empty table and exit 0 said nothing of why
        raise BadInput(
            "OT699",
            "no finished cell under cells/ (a cell is finished once its last iteration is evaluated)",
            path=str(out),
        )
    return report_of(found, iterations, speed, resamples=resamples, seed=seed)


def report_of(
    found: Found, iterations: dict[str, int], speed: dict[str, float], *, resamples: int = 2000, seed: int = 0
) -> GridReport:
    """The report of the finished cells' held-out answers (``speed``: cell name -> training seconds
    per iteration)."""
    rows: list[Row] = []
    families = sorted({k[0] for k in found})
    topologies = [t for t in TOPOLOGIES if any(k[1] == t for k in found)]
    credits = [c for c in CREDITS if any(k[2] == c for k in found)]
    for t in topologies:
        for c in credits:
            parts = [f for f in families if (f, t, c) in found]
            for f in parts:
                rows.append(_row(f, t, c, {f: found[(f, t, c)]}, found, resamples, seed))
            if len(parts) > 1:
                rows.append(
                    _row("pooled", t, c, {f: found[(f, t, c)] for f in parts}, found, resamples, seed)
                )

    def shares(topology: str, counts: Any, names: tuple[str, ...]) -> list[Choice]:
        """One group per family and credit, then "pooled" over the families (their questions
        together, the seeds every family has) where a credit has more than one."""
        out: list[Choice] = []
        for c in credits:
            parts = [f for f in families if (f, topology, c) in found]
            groups = {f: found[(f, topology, c)] for f in parts}
            if len(parts) > 1:
                common = sorted(set.intersection(*(set(by_seed) for by_seed in groups.values())))
                groups["pooled"] = {
                    s: (
                        {
                            q: r
                            for by_seed in groups.values()
                            for q, r in next(iter(by_seed.values()))[0].items()
                        },
                        {q: r for by_seed in groups.values() for q, r in by_seed[s][1].items()},
                    )
                    for s in common
                }
            for f, by_seed in groups.items():
                if by_seed:
                    start = next(iter(by_seed.values()))[0]
                    afters = [a for _, a in by_seed.values()]
                    out.append(_choice(f, c, sorted(by_seed), start, afters, resamples, seed, counts, names))
        order = {f: i for i, f in enumerate([*families, "pooled"])}
        return sorted(out, key=lambda ch: (order[ch.family], list(credits).index(ch.credit)))

    per_cell = []
    for (f, t, c), by_seed in sorted(found.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2])):
        for s, (start, after) in sorted(by_seed.items()):
            qs = sorted(start)
            d = np.array([team_right(after[q]) - team_right(start[q]) for q in qs])
            per_cell.append(
                CellResult(
                    f,
                    t,
                    c,
                    s,
                    float(np.mean([team_right(start[q]) for q in qs])),
                    float(np.mean([team_right(after[q]) for q in qs])),
                    float(d.mean()),
                    _boot([d], resamples, seed),
                    speed.get(Cell(f, t, c, s).name, 0.0),
                )  # fmt: skip
            )
    return GridReport(
        rows,
        shares("agg3", choice_counts, CHOICE_FIGURES),
        [Cell(r.family, r.topology, r.credit, r.seed).name for r in per_cell],
        iterations,
        speed,
        per_cell,
        shares("revise", revision_counts, REVISION_FIGURES),
        shares("agg3", agreement_counts, AGREEMENT_FIGURES),
    )


def _parse(name: str) -> tuple[str, str, str, int]:
    head, _, s = name.rpartition("-s")
    if s.isascii() and s.isdigit():  # "-sX" was an internal error (int("X"))
        for t in TOPOLOGIES:
            for c in CREDITS:
                suffix = f"-{t}-{c}"
                if head.endswith(suffix):
                    return head[: -len(suffix)], t, c, int(s)
    raise BadInput("OT699", f"not a grid cell folder name: {name!r}")


def _row(
    family: str, topology: str, credit: str,
    per_family: dict[str, dict[int, tuple[Runs, Runs]]],
    found: Found,
    resamples: int, seed: int,
) -> Row:  # fmt: skip
    starts, afters, gains, vs = [], [], [], []
    seeds = sorted(set.intersection(*(set(v) for v in per_family.values())))
    common: list[int] = []
    for f, by_seed in per_family.items():
        start = next(iter(by_seed.values()))[0]
        qs = sorted(start)
        s_arr = np.array([team_right(start[q]) for q in qs])
        a_arr = np.mean([[team_right(by_seed[s][1][q]) for q in qs] for s in seeds], axis=0)
        starts.append(s_arr)
        afters.append(a_arr)
        gains.append(a_arr - s_arr)
        bc = found.get((f, topology, "broadcast"), {})
        common = sorted(set(seeds) & set(bc)) if credit != "broadcast" else []
        if common:
            mine = np.mean([[team_right(by_seed[s][1][q]) for q in qs] for s in common], axis=0)
            theirs = np.mean([[team_right(bc[s][1][q]) for q in qs] for s in common], axis=0)
            vs.append(mine - theirs)
    start_all, after_all = np.concatenate(starts), np.concatenate(afters)
    vs_all = np.concatenate(vs) if len(vs) == len(per_family) and vs else None
    return Row(
        family, topology, credit, seeds, len(start_all), float(start_all.mean()), float(after_all.mean()),
        float((after_all - start_all).mean()), _boot(gains, resamples, seed),
        float(vs_all.mean()) if vs_all is not None else None,
        _boot(vs, resamples, seed) if vs_all is not None else None,
        common if vs_all is not None else [],
    )  # fmt: skip


def _ci(c: tuple[float, float] | None) -> str:
    return "" if c is None else f"[{c[0]:+.3f}, {c[1]:+.3f}]"


def _change_table(groups: list[Any], figures: tuple[str, ...], title: str, columns: str) -> list[str]:
    """One behaviour table (start -> after per figure, with the change's CI), or nothing."""
    if not groups:
        return []
    lines = [
        "",
        title,
        "",
        f"| family | credit | seeds | runs (start / after) | {columns} |",
        "|---|---|---|---|" + "---|" * len(figures),
    ]
    for c in groups:
        cols = [f"{b:.2f} -> {a:.2f} ({d:+.2f} {_ci(ci)})" for b, a, d, ci in (c.figures[f] for f in figures)]
        lines.append(
            f"| {c.family} | {c.credit} | {', '.join(map(str, c.seeds))} | "
            f"{c.disagreements_start} / {c.disagreements_after} | " + " | ".join(cols) + " |"
        )
    return lines


def markdown(rep: GridReport) -> str:
    """The tables of the report (groups, the aggregator's choices, the reviser's, every cell), as
    docs/train_team.md shows them."""
    lines = [
        "| family | topology | credit | seeds | questions | start | after | after - start, 95% CI | after - broadcast, 95% CI |",
        "|---|---|---|---|---:|---:|---:|---|---|",
    ]
    for r in rep.rows:
        vs = "" if r.vs_broadcast is None else f"{r.vs_broadcast:+.3f} {_ci(r.vs_broadcast_ci95)}"
        lines.append(
            f"| {r.family} | {r.topology} | {r.credit} | {', '.join(map(str, r.seeds))} | {r.questions} | "
            f"{r.start:.3f} | {r.after:.3f} | {r.gain:+.3f} {_ci(r.gain_ci95)} | {vs} |"
        )
    lines += _change_table(
        rep.choices,
        CHOICE_FIGURES,
        "k = 3 aggregator where its solvers disagree (share at the start -> after, change and 95% CI):",
        "right when one solver is | plurality | copies solver_0 | solver_1 | solver_2",
    )
    lines += _change_table(
        rep.agreements,
        AGREEMENT_FIGURES,
        "k = 3 aggregator where all three solvers answer right (share at the start -> after, change and 95% CI):",
        "its answer wrong",
    )
    lines += _change_table(
        rep.revisions,
        REVISION_FIGURES,
        "revise: the reviser against the proposal it read (share at the start -> after, change and 95% CI):",
        "changes the proposal | corrects a wrong one | breaks a right one",
    )
    if rep.per_cell:
        lines += [
            "",
            "Every cell (held-out team accuracy, paired 95% CI over questions; training seconds per iteration):",
            "",
            "| family | topology | credit | seed | start | after | after - start, 95% CI | s/iteration |",
            "|---|---|---|---:|---:|---:|---|---:|",
        ]
        for r in rep.per_cell:
            lines.append(
                f"| {r.family} | {r.topology} | {r.credit} | {r.seed} | {r.start:.3f} | {r.after:.3f} | "
                f"{r.gain:+.3f} {_ci(r.gain_ci95)} | {r.seconds_per_iteration:.1f} |"
            )
    return "\n".join(lines) + "\n"


def write_report(rep: GridReport, out: str | Path) -> tuple[Path, Path, Path]:
    """grid.json, grid.md and grid.png (after - start per cell group with its CI, vs broadcast)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    js, md, png = out / GRID_JSON, out / GRID_MD, out / GRID_PNG
    js.write_text(json.dumps(asdict(rep), indent=2) + "\n", encoding="utf-8")
    md.write_text(markdown(rep), encoding="utf-8")
    topologies = [t for t in TOPOLOGIES if any(r.topology == t for r in rep.rows)] or [""]
    families = sorted({r.family for r in rep.rows}, key=lambda f: (f == "pooled", f))
    credits = [c for c in CREDITS if any(r.credit == c for r in rep.rows)]
    # one panel per topology (a shared y axis), families then "pooled" along x, a point per credit
    fig, axes = plt.subplots(
        1, len(topologies), figsize=(max(6, (1.3 * len(families) + 0.6) * len(topologies)), 3.6), sharey=True,
        squeeze=False,
    )  # fmt: skip
    width = 0.8 / max(len(credits), 1)
    for ax, t in zip(axes[0], topologies, strict=True):
        for j, c in enumerate(credits):
            xs, ys, lo, hi = [], [], [], []
            for i, f in enumerate(families):
                r = next((r for r in rep.rows if (r.family, r.topology, r.credit) == (f, t, c)), None)
                if r is None:
                    continue
                xs.append(i + (j - (len(credits) - 1) / 2) * width)
                ys.append(r.gain)
                lo.append(r.gain - r.gain_ci95[0])
                hi.append(r.gain_ci95[1] - r.gain)
            # a credit keeps its colour in every grid's figure, whichever credits it holds
            colour = f"C{list(CREDITS).index(c)}"
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", capsize=3, label=c, color=colour)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xlim(-0.5, len(families) - 0.5)
        ax.set_xticks(range(len(families)))
        ax.set_xticklabels(families, fontsize=8)
        ax.set_title(t, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("held-out team accuracy\nafter - start (95% CI)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return js, md, png
