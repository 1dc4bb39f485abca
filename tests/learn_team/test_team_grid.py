"""bench team's grid and its aggregator-choice figures, without a model."""

from __future__ import annotations

import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.learn.team.grid import cells, choice_counts
from orchestrace.learn.team.report import Answers


def answers(canon: dict[str, str], gold: str) -> Answers:
    right = {a: c == gold for a, c in canon.items()}
    return Answers("q", dict(canon), dict(canon), right, right["aggregator"])


def test_cells_skip_shapley_on_revise_and_refuse_unknown_names():
    grid = cells(["continents"], ["agg3", "revise"], ["loo-fork", "shapley-fork"], [0, 1])
    assert [c.name for c in grid] == [
        "continents-agg3-loo-fork-s0",
        "continents-agg3-shapley-fork-s0",
        "continents-agg3-loo-fork-s1",
        "continents-agg3-shapley-fork-s1",
        "continents-revise-loo-fork-s0",
        "continents-revise-loo-fork-s1",
    ]
    with pytest.raises(OrchestraceError, match="unknown topology 'agg4'"):
        cells(["continents"], ["agg4"], ["grpo"], [0])
    with pytest.raises(OrchestraceError, match="unknown grid credit 'coma'"):
        cells(["continents"], ["agg2"], ["coma"], [0])


def test_choice_counts_where_solvers_disagree():
    # one solver right, the other two agree on a wrong answer: the aggregator copies solver_2
    a = answers(
        {"solver_0": "asia", "solver_1": "asia", "solver_2": "europe", "aggregator": "europe"}, "europe"
    )
    c = choice_counts(a)
    assert c == {
        "right_when_one_has_it": (1.0, 1.0),
        "plurality": (0.0, 1.0),
        "position_0": (0.0, 1.0),
        "position_1": (0.0, 1.0),
        "position_2": (1.0, 1.0),
    }
    # all different, none right: no plurality, no "one has it"
    b = answers({"solver_0": "a", "solver_1": "b", "solver_2": "c", "aggregator": "a"}, "z")
    assert choice_counts(b) == {"position_0": (1.0, 1.0), "position_1": (0.0, 1.0), "position_2": (0.0, 1.0)}
    # agreement is not a disagreement
    same = answers({"solver_0": "x", "solver_1": "x", "solver_2": "x", "aggregator": "x"}, "x")
    assert choice_counts(same) is None
