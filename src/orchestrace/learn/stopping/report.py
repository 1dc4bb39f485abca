"""The report of ``train stop`` (:class:`StopReport`, its ``report.json``) and its figures:
accuracy-vs-mean-samples Pareto curves and learning curves (PNG + JSON)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

import msgspec
import numpy as np
from msgspec import UNSET, UnsetType

from ...core.paths import make_dirs
from ...viewer.report import label_marks, plain_log_axis
from .evaluation import MethodCI, ResultRow
from .policy import PolicyConfig

STYLE = {
    "fixed-k": ("#888888", "o", "fixed-k majority"),
    "ac-beta": ("#1f77b4", "s", "Adaptive-Consistency (Beta)"),
    "ac-dirichlet": ("#17becf", "D", "Adaptive-Consistency (Dirichlet)"),
    "esc": ("#2ca02c", "^", "ESC"),
    "consol-sprt": ("#9467bd", "v", "ConSol SPRT"),
    "majority-share": ("#8c564b", "x", "confidence threshold"),
    "entropy": ("#e377c2", "+", "entropy (AC code)"),
    "oracle": ("#000000", "*", "hindsight oracle"),
    "learned": ("#d62728", "o", "learned stop, majority (ours)"),
    "learned+agg": ("#ff1493", "h", "learned stop + learned aggregator (ours)"),
    "bayes": ("#ff7f0e", "P", "Bayes-optimal"),
}


class GoalFigures(msgspec.Struct, kw_only=True):
    """A learned policy against fixed-k (the full budget) and the hindsight oracle on the same
    held-out questions. A policy calibrated to a sample budget (``train_stop``'s ``targets``) also
    says how: its cost, its calibration-half mean samples, whether it met the budget and its mix."""

    cost: float | UnsetType = UNSET
    calibration_mean_samples: float | UnsetType = UNSET
    met: bool | UnsetType = UNSET
    mixture_prob: float | UnsetType = UNSET
    mixture_cost: float | None | UnsetType = UNSET
    front_reduction_x: float
    front_accuracy_at_reduction: float | None
    front_gap_points_at_reduction: float | None
    fixed_full_accuracy: float
    learned_accuracy: float
    accuracy_gap_points: float
    #: paired bootstrap over the reported questions (seed 0, 1000 resamples), in points
    accuracy_gap_ci95_points: list[float]
    learned_mean_samples: float
    sample_reduction_x: float
    oracle_mean_samples: float
    oracle_reduction_x: float
    gap_to_oracle_samples: float


class BootstrapSettings(msgspec.Struct):
    resamples: int
    seed: int
    level: float


class StopReport(msgspec.Struct, kw_only=True):
    """What ``train_stop`` did and measured; its ``report.json`` (``files_written``'s last path)."""

    train_banks: list[str]
    train_questions: int
    eval_bank: str
    eval_questions: int
    calibration_questions: int
    protocol: str
    algorithm: str
    cost: float
    sweep_costs: list[float]
    budget: int
    seed: int
    bootstrap: BootstrapSettings
    policy: str
    policies_written: dict[str, str]  # method name -> policy file, marked on pareto.png
    policy_config: PolicyConfig
    eval_orders: int
    #: the aggregator's weights and feature names (``Aggregator.to_dict``)
    aggregator: dict[str, list[float] | list[str]] | None
    aggregator_file: str | None
    goal: GoalFigures
    goal_with_aggregator: GoalFigures | None
    target_samples: float | None
    targets: dict[str, GoalFigures]  # per policy family, its policy for the sample budget
    learned_ci95: MethodCI
    results: list[ResultRow]
    pareto: dict[str, list[list[float]]]
    learning_curves: dict[str, list[dict[str, float]]]  # per policy, training's per-iteration rows
    seconds: float
    report_dir: str
    files_written: list[str]


def write_report_json(report: StopReport, path: str) -> None:
    """``report`` as indented JSON (numpy scalars as plain numbers)."""
    with open(path, "w") as f:
        json.dump(msgspec.to_builtins(report, enc_hook=_plain_number), f, indent=1)


def _plain_number(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    raise NotImplementedError(f"cannot write {type(x).__name__} into a report")


@dataclass(frozen=True)
class PolicyMark:
    """A policy file the main job wrote, as marked (``mark``) on pareto.png."""

    mark: str
    method: str
    path: str
    accuracy: float
    mean_samples: float


def policy_marks(report: StopReport) -> list[PolicyMark]:
    """The written policies (``report.policies_written``) at their measured points, numbered."""
    by = {r.method: r for r in report.results}
    written = report.policies_written
    return [
        PolicyMark(str(i), m, path, by[m].accuracy, by[m].mean_samples)
        for i, (m, path) in enumerate(written.items(), 1)
        if m in by
    ]


MAX_CURVES = 4


def curve_series(curves: dict[str, list[dict[str, float]]]) -> list[str]:
    """At most ``MAX_CURVES`` learning curves worth reading: the main policies (default cost, with
    and without the aggregator), then the cheapest and the dearest cost of the sweep."""
    main = [n for n in ("learned", "learned+agg") if n in curves]
    swept = sorted((n for n in curves if n.startswith("learned(c=")), key=lambda n: float(n[10:-1]))
    extra = list(dict.fromkeys(swept[:1] + swept[-1:]))
    return (main + extra)[:MAX_CURVES] or list(curves)[:MAX_CURVES]


def curve_labels(curves: dict[str, list[dict[str, float]]], cost: float | None) -> dict[str, str]:
    """What a reader sees in the legend for each shown curve (the method keys are for code)."""
    shown = curve_series(curves)
    swept = [n for n in shown if n.startswith("learned(c=")]
    labels = {}
    for n in shown:
        at = f", c={cost:g}" if cost is not None else ""
        if n == "learned":
            labels[n] = f"majority vote{at} (main policy)"
        elif n == "learned+agg":
            labels[n] = f"learned aggregator{at} (main policy)"
        elif n in swept:
            end = "" if len(swept) == 1 else ": most samples" if n == swept[0] else ": fewest samples"
            labels[n] = f"majority vote, c={float(n[10:-1]):g} (sweep{end})"
        else:
            labels[n] = n
    return labels


#: legend names of the methods as ``orchestrace report`` groups them (its ``curve_name``)
PARETO_LABELS = {**{k: v[2] for k, v in STYLE.items()}, "hindsight-oracle": STYLE["oracle"][2]}


def pareto_title(report: StopReport) -> str:
    return f"held-out {report.eval_bank}: accuracy against mean samples per question"


def pareto_figure(report: StopReport) -> Any:
    """Accuracy against mean samples: every method's points and front, fixed-40 and the budget as
    lines, and a numbered star per policy file the job wrote; the legend sits right of the axes."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5))
    fam_of = {}
    for r in report.results:
        m = r.method
        fam = "fixed-k" if m.startswith("fixed-") else m.split("(")[0]
        fam = {"hindsight-oracle": "oracle", "bayes-optimal": "bayes"}.get(fam, fam)
        fam_of.setdefault(fam, []).append((r.mean_samples, r.accuracy))
    pale = False  # some method has settings off its own front
    fronts = report.pareto
    for fam, pts in fam_of.items():
        color, marker, label = STYLE.get(fam, ("#333333", ".", fam))
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], color=color, marker=marker, s=14, alpha=0.35)
        front = fronts.get(fam) or sorted(pts)
        pale = pale or bool({tuple(p) for p in pts} - {tuple(p) for p in front})
        ax.plot(
            [p[0] for p in front],
            [p[1] for p in front],
            "-",
            marker=marker,
            color=color,
            label=label,
            ms=9 if fam == "oracle" else 5,
            lw=1.2,
            zorder=4 if fam == "oracle" else 2,
        )
    fixed = fam_of.get("fixed-k")
    if fixed:  # the reference every goal is stated against
        full = max(fixed)
        ax.axhline(full[1], color="#888888", ls="--", lw=0.8, label=f"fixed-{full[0]:g} majority accuracy")
    budget = report.target_samples
    if budget:
        ax.axvline(budget, color="#555555", ls=":", lw=0.8, label=f"budget: {budget:g} samples")
    if pale:  # the pale dots: a method's settings off its own front, said in the legend
        ax.scatter([], [], color="#777777", marker="o", s=14, alpha=0.35,
                   label="pale: a method's other settings (off its own front)")  # fmt: skip
    marks = policy_marks(report)
    for m in marks:
        color = STYLE["learned+agg" if m.method.startswith("learned+agg") else "learned"][0]
        ax.scatter(m.mean_samples, m.accuracy, marker="*", s=220, color=color, edgecolors="black",
                   linewidths=0.6, zorder=5, label=f"{m.mark}: {os.path.basename(m.path)} ({m.method})")  # fmt: skip
    plain_log_axis(ax)
    ax.set_xlabel("mean samples per question (log scale)")
    ax.set_ylabel("accuracy")
    ax.set_title(pareto_title(report))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    label_marks(ax, [(m.mean_samples, m.accuracy, m.mark) for m in marks])
    return fig


def learning_curves_figure(curves: dict[str, list[dict[str, float]]], cost: float | None = None) -> Any:
    """Training objective and greedy mean samples per iteration for the ``curve_series`` only,
    with one legend below both panels."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    labels = curve_labels(curves, cost)
    for name, label in labels.items():
        hist = curves[name]
        (line,) = axes[0].plot([h["iteration"] for h in hist], [h["batch_reward"] for h in hist], lw=1.2,
                               label=label)  # fmt: skip
        ev = [h for h in hist if "eval_samples" in h]
        axes[1].plot([h["iteration"] for h in ev], [h["eval_samples"] for h in ev], marker=".", lw=1.2,
                     color=line.get_color())  # fmt: skip
    axes[0].set_xlabel("iteration")
    axes[0].set_ylabel("training objective (reward - c x samples)")
    axes[1].set_xlabel("iteration")
    axes[1].set_ylabel("greedy mean samples (train bank)")
    for a in axes:
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=8,
               title=f"{len(labels)} of {len(curves)} trained policies (all in learning_curves.json); "
               "c = price of one sample")  # fmt: skip
    return fig


#: the files ``write_report`` may write into a report folder (report.json is the caller's)
REPORT_FILES = ("pareto.png", "pareto.json", "learning_curves.png", "learning_curves.json")


def write_report(report: StopReport, out_dir: str) -> list[str]:
    """Write pareto.png, learning_curves.png and their JSON next to them; return every path written.

    The JSON is what ``orchestrace report`` redraws: pareto.json carries the numbered marks, and
    learning_curves.json every curve as records with the ones worth drawing under ``shown``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    make_dirs(out_dir)
    paths = []
    fig = pareto_figure(report)
    p = os.path.join(out_dir, "pareto.png")
    fig.savefig(p, dpi=120, bbox_inches="tight")
    plt.close(fig)
    paths.append(p)
    marks = [asdict(m) for m in policy_marks(report)]
    p = os.path.join(out_dir, "pareto.json")
    with open(p, "w") as f:
        points = msgspec.to_builtins(report.results)
        json.dump({"points": points, "fronts": report.pareto, "marks": marks, "title": pareto_title(report),
                   "labels": PARETO_LABELS}, f, indent=1)  # fmt: skip
    paths.append(p)

    curves = report.learning_curves
    if curves:
        fig = learning_curves_figure(curves, report.cost)
        p = os.path.join(out_dir, "learning_curves.png")
        fig.savefig(p, dpi=120, bbox_inches="tight")
        plt.close(fig)
        paths.append(p)
        labels = curve_labels(curves, report.cost)
        records = [{**h, "run": name} for name, hist in curves.items() for h in hist]
        p = os.path.join(out_dir, "learning_curves.json")
        with open(p, "w") as f:
            json.dump({"x": "iteration", "shown": list(labels), "labels": labels, "records": records}, f)
        paths.append(p)
    return paths
