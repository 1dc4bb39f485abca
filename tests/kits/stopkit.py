"""Stop-decision test kit: a typed ``train stop`` report for tests of what reads it (figures,
``orchestrace report``) and the ``vote`` program's config for one question of a family."""

from __future__ import annotations

from typing import Any

from orchestrace.learn.stopping.evaluation import MethodCI
from orchestrace.learn.stopping.families import family
from orchestrace.learn.stopping.policy import PolicyConfig
from orchestrace.learn.stopping.report import BootstrapSettings, GoalFigures, StopReport


def stop_report(**fields: Any) -> StopReport:
    """A report with the given fields; the others (which the figures do not read) placeholders."""
    goal = GoalFigures(
        front_reduction_x=8.0, front_accuracy_at_reduction=None, front_gap_points_at_reduction=None,
        fixed_full_accuracy=0.0, learned_accuracy=0.0, accuracy_gap_points=0.0, accuracy_gap_ci95_points=[0.0, 0.0],
        learned_mean_samples=1.0, sample_reduction_x=1.0, oracle_mean_samples=1.0, oracle_reduction_x=1.0,
        gap_to_oracle_samples=0.0,
    )  # fmt: skip
    placeholders: dict[str, Any] = dict(
        train_banks=[], train_questions=0, eval_bank="", eval_questions=0, calibration_questions=0, protocol="",
        algorithm="exact", cost=0.003, sweep_costs=[], budget=40, seed=0, bootstrap=BootstrapSettings(1000, 0, 0.95),
        policy="", policies_written={}, policy_config=PolicyConfig(), eval_orders=1, aggregator=None,
        aggregator_file=None, goal=goal, goal_with_aggregator=None, target_samples=None, targets={},
        learned_ci95=MethodCI((0.0, 0.0), (0.0, 0.0)), results=[], pareto={}, learning_curves={}, seconds=0.0,
        report_dir="", files_written=[],
    )  # fmt: skip
    return StopReport(**(placeholders | fields))


def vote_config(family_name: str, qi: int, budget: int, width: int) -> dict[str, Any]:
    """The ``vote`` program's config for question ``qi`` of a family (few-shot turns, gold, budget)."""
    fam = family(family_name)
    q = fam.questions[qi]
    return {"question": q.question, "fewshot": [list(s) for s in fam.shots], "family": fam.name,
            "question_id": q.id, "gold": q.gold, "budget": budget, "width": width}  # fmt: skip
