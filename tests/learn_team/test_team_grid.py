"""bench team's grid and its aggregator-choice figures, without a model."""

from __future__ import annotations

import json
import math
import re

import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.learn.team.grid import cells, choice_counts, markdown, report_of, write_report
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


def test_loo_fork_rloo_cells_resample_the_last_call_and_parse_back():
    from orchestrace.learn.team.config import TeamConfig
    from orchestrace.learn.team.grid import _parse, cell_config, start_config

    (cell,) = cells(["plurals"], ["revise"], ["loo-fork-rloo"], [2])
    cfg = cell_config(TeamConfig(), cell)
    assert (cfg.credit, cfg.unit, cfg.resamples, cfg.topology) == ("loo-fork", "agent", 3, "revise")
    assert start_config(cfg).resamples == 1  # the shared start evaluation is every credit's
    assert _parse(cell.name) == ("plurals", "revise", "loo-fork-rloo", 2)
    assert _parse("plurals-revise-loo-fork-s2") == ("plurals", "revise", "loo-fork", 2)
    with pytest.raises(OrchestraceError, match="resamples is for the fork credit methods"):
        TeamConfig(credit="grpo", resamples=3).check()


def test_report_only_on_a_folder_without_finished_cells_is_an_error(tmp_path):
    from orchestrace.learn.team.grid import grid_report

    # a missing folder: FileNotFoundError writing grid.json (exit 3); an empty one: an empty table, exit 0
    with pytest.raises(OrchestraceError, match="folder not found") as ei:
        grid_report(tmp_path / "nope")
    assert ei.value.code == "OT001" and ei.value.exit_code == 2
    with pytest.raises(OrchestraceError, match="no finished cell under cells/") as ei:
        grid_report(tmp_path)
    assert ei.value.code == "OT699" and ei.value.path == str(tmp_path)
    # a cell folder whose seed is no number: int("X"), exit 3
    cell = tmp_path / "cells" / "continents-agg2-grpo-sX"
    cell.mkdir(parents=True)
    (cell / "config.json").write_text("{}")
    for i in (0, 1):
        (cell / f"iter-{i:03d}").mkdir()
        rec = {"iteration": i, "policy": None, "eval": {"team_accuracy": 0.5}}
        (cell / f"iter-{i:03d}" / "iteration.json").write_text(json.dumps(rec))
    with pytest.raises(
        OrchestraceError, match="not a grid cell folder name: 'continents-agg2-grpo-sX'"
    ) as ei:
        grid_report(tmp_path)
    assert ei.value.path == str(cell)


def test_bench_team_seeds_that_are_no_integers_are_a_usage_error(tmp_path, capsys):
    from orchestrace.cli import main

    with pytest.raises(SystemExit) as e:  # int("x") in the command: exit 3
        main(["bench", "team", "--report-only", "--seeds", "0,x", "-o", str(tmp_path)])
    assert (
        e.value.code == 2 and "--seeds: comma-separated integers >= 0, got '0,x'" in capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        # torch's Adam refused these only after the model had loaded (ValueError, exit 3)
        ("lr", math.nan, "lr must be a finite number > 0, got nan"),
        ("lr", -0.001, "lr must be a finite number > 0, got -0.001"),
        # trained on without a word
        ("clip", -0.2, "clip must be a finite number > 0, got -0.2"),
        ("target_kl", math.inf, "target_kl must be a finite number > 0, got inf"),
        ("temperature", -1.0, "temperature must be a finite number >= 0, got -1.0"),
        ("kl_coef", -0.1, "kl_coef must be a finite number >= 0, got -0.1"),
        ("kl_coef", math.nan, "kl_coef must be a finite number >= 0, got nan"),
        ("overlong_penalty", -1.0, "overlong_penalty must be a finite number >= 0, got -1.0"),
        ("overlong_penalty", math.inf, "overlong_penalty must be a finite number >= 0, got inf"),
        # i % 0 at the first iteration between the first and the last, after its rollouts and update
        ("eval_every", 0, "eval_every must be >= 1, got 0"),
    ],
)
def test_train_team_refuses_bad_numbers_before_the_model_loads(field, value, said):
    """TeamConfig.check() runs before train team loads the model (trainer.train_team)."""
    from orchestrace.learn.team.config import TeamConfig

    with pytest.raises(OrchestraceError) as ei:
        TeamConfig(**{field: value}).check()
    assert ei.value.code == "OT695" and ei.value.exit_code == 1 and ei.value.message == said


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


def revise_run(q: str, proposed: str, revised: str, gold: str) -> Answers:
    canon = {"proposer": proposed, "reviser": revised}
    right = {a: c == gold for a, c in canon.items()}
    return Answers(q, dict(canon), dict(canon), right, right["reviser"])


def test_report_lists_every_cell_and_what_the_reviser_did(tmp_path):
    # two questions, gold "a": at the start the reviser breaks q1's right proposal and keeps q2's
    # wrong one; after, it keeps q1's and corrects q2's
    start = {"q1": [revise_run("q1", "a", "b", "a")], "q2": [revise_run("q2", "b", "b", "a")]}
    after = {"q1": [revise_run("q1", "a", "a", "a")], "q2": [revise_run("q2", "b", "a", "a")]}
    found = {
        ("f", "revise", "loo-fork"): {0: (start, after)},
        ("f", "revise", "broadcast"): {0: (start, start)},
    }
    rep = report_of(found, {}, {"f-revise-loo-fork-s0": 12.5}, resamples=200)
    assert [(r.credit, r.seed, r.start, r.after, r.gain, r.seconds_per_iteration) for r in rep.per_cell] == [
        ("broadcast", 0, 0.0, 0.0, 0.0, 0.0),
        ("loo-fork", 0, 0.0, 1.0, 1.0, 12.5),
    ]
    assert rep.cells == ["f-revise-broadcast-s0", "f-revise-loo-fork-s0"]
    (loo,) = [c for c in rep.revisions if c.credit == "loo-fork"]
    assert (loo.disagreements_start, loo.disagreements_after) == (2, 2)
    assert {f: v[:3] for f, v in loo.figures.items()} == {
        "changes": (0.5, 0.5, 0.0),
        "corrects_wrong": (0.0, 1.0, 1.0),
        "breaks_right": (1.0, 0.0, -1.0),
    }
    md = markdown(rep)
    assert "| f | loo-fork | 0 | 2 / 2 | 0.50 -> 0.50" in md
    assert "| f | revise | loo-fork | 0 | 0.000 | 1.000 | +1.000" in md and "| 12.5 |" in md
    assert rep.choices == []  # no k = 3 cell
    js, written, png = write_report(rep, tmp_path)
    assert written.read_text() == md and png.stat().st_size > 0 and '"per_cell"' in js.read_text()


@pytest.mark.parametrize(
    ("team_json", "said"),
    [
        # each was an internal error (exit 3): list.get, UnicodeDecodeError, sorted([1, "a"])
        (b"[1]", "team.json is a JSON list, not an object"),
        (b'{"adapters": ["\xff"]}', "unreadable team.json"),
        (b'{"adapters": [1, "solver"]}', "adapters must be a list of names, got [1, 'solver']"),
    ],
)
def test_a_damaged_start_policy_is_refused_before_the_model_loads(tmp_path, team_json, said):
    from orchestrace.learn.team.checkpoints import check_policy_file

    (tmp_path / "team.json").write_bytes(team_json)
    with pytest.raises(OrchestraceError, match=re.escape(said)) as ei:
        check_policy_file(str(tmp_path), ["aggregator", "solver"])
    assert ei.value.code == "OT698" and ei.value.exit_code == 1


def test_zero_torch_threads_are_refused_before_torch_is_asked():
    from orchestrace.learn.team.model import TeamModel

    # torch.set_num_threads(0): RuntimeError, an internal error of train team / bench team / serve
    with pytest.raises(OrchestraceError, match="--threads must be >= 1, got 0") as ei:
        TeamModel(["solver"], threads=0)
    assert ei.value.code == "OT690"


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "swarm", "--seed", "-1"],  # numpy's "expected non-negative integer": exit 3
        ["eval", "team", "x", "--seed", "-1"],
        ["eval", "team", "x", "--examples", "-1"],  # flips[:-1]: every flip but the last, silently
        ["train", "stop", "--seed", "-1"],
        ["loop", "stop", "--seed", "-1"],
        ["bench", "team", "--report-only", "--seeds", "0,-1"],
    ],
)
def test_a_negative_seed_or_count_is_a_usage_error(argv, capsys):
    from orchestrace.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and ("x>=0" in err or ">= 0" in err) and "internal" not in err, err


def test_several_runs_per_question_are_averaged_and_each_counted():
    """--eval-runs: a question's accuracy is the share of its runs the team got right, and every
    run where the solvers disagree is one more choice counted (not only the first run)."""
    gold = "europe"
    right = {"solver_0": "asia", "solver_1": "asia", "solver_2": "europe", "aggregator": "europe"}
    wrong = {"solver_0": "asia", "solver_1": "asia", "solver_2": "europe", "aggregator": "asia"}
    agree = {"solver_0": "europe", "solver_1": "europe", "solver_2": "europe", "aggregator": "europe"}
    start = {"q1": [answers(wrong, gold), answers(wrong, gold), answers(agree, gold), answers(right, gold)]}
    after = {"q1": [answers(right, gold), answers(right, gold), answers(wrong, gold), answers(agree, gold)]}
    rep = report_of({("f", "agg3", "loo-fork"): {0: (start, after)}}, {}, {}, resamples=50)
    (cell,) = rep.per_cell
    assert (cell.start, cell.after, cell.gain) == (0.5, 0.75, 0.25)
    (choice,) = rep.choices
    assert (choice.disagreements_start, choice.disagreements_after) == (3, 3)
    assert choice.figures["right_when_one_has_it"][:2] == pytest.approx((1 / 3, 2 / 3))


def test_choices_pool_the_families_questions():
    """The aggregator's choice figures also pooled over families: their questions together."""
    gold = "europe"
    right = {"solver_0": "asia", "solver_1": "asia", "solver_2": "europe", "aggregator": "europe"}
    wrong = {"solver_0": "asia", "solver_1": "asia", "solver_2": "europe", "aggregator": "asia"}
    found = {
        ("f", "agg3", "loo-fork"): {0: ({"a": [answers(wrong, gold)]}, {"a": [answers(right, gold)]})},
        ("g", "agg3", "loo-fork"): {0: ({"b": [answers(wrong, gold)]}, {"b": [answers(wrong, gold)]})},
    }
    rep = report_of(found, {}, {}, resamples=50)
    assert [c.family for c in rep.choices] == ["f", "g", "pooled"]
    pooled = rep.choices[-1]
    assert (pooled.disagreements_start, pooled.disagreements_after) == (2, 2)
    assert pooled.figures["right_when_one_has_it"][:3] == pytest.approx((0.0, 0.5, 0.5))


def test_bench_team_refuses_a_missing_reward_spec_before_the_model_loads(tmp_path, capsys):
    """``--reward`` goes to every cell; a file that is not there is refused by TeamConfig.check(),
    before any cell runs (it was found only once the model had loaded)."""
    from orchestrace.cli import main

    missing = tmp_path / "nope.toml"
    with pytest.raises(SystemExit) as e:
        main(["bench", "team", "--families", "continents", "--topologies", "agg3", "--credits", "broadcast",
              "--seeds", "0", "--reward", str(missing), "-o", str(tmp_path / "grid")])  # fmt: skip
    err = capsys.readouterr().err
    assert e.value.code == 2 and "OT001" in err and "nope.toml" in err
    assert not (tmp_path / "grid").exists()


def test_agreement_counts_where_all_solvers_are_right():
    from orchestrace.learn.team.grid import agreement_counts

    # all three right, the aggregator glued two words: it broke what it had only to repeat
    broke = answers(
        {"solver_0": "cats", "solver_1": "cats", "solver_2": "cats", "aggregator": "catscats"}, "cats"
    )
    assert agreement_counts(broke) == {"breaks_agreed_right": (1.0, 1.0)}
    kept = answers({"solver_0": "cats", "solver_1": "cats", "solver_2": "cats", "aggregator": "cats"}, "cats")
    assert agreement_counts(kept) == {"breaks_agreed_right": (0.0, 1.0)}
    # one solver wrong, or all agreeing on a wrong answer: not counted
    one_wrong = answers(
        {"solver_0": "cats", "solver_1": "cat", "solver_2": "cats", "aggregator": "cats"}, "cats"
    )
    assert agreement_counts(one_wrong) is None
    all_wrong = answers(
        {"solver_0": "cat", "solver_1": "cat", "solver_2": "cat", "aggregator": "cat"}, "cats"
    )
    assert agreement_counts(all_wrong) is None


def test_overlong_penalty_charges_every_cut_off_call_and_no_other():
    """A call whose completion does not end with an end token ran to its limit: it pays the
    penalty off its advantage, whichever agent made it; finished calls keep theirs."""
    from orchestrace.learn.team.batch import CallRow, charge_cut_off, cut_off
    from orchestrace.runtime.backends.base import TokenSample

    eos = {2}

    def row(agent: str, completion: list[int], adv: float) -> CallRow:
        sample = TokenSample(
            prompt_ids=[1],
            completion_ids=completion,
            logprobs=[-0.1] * len(completion),
            adapter=agent,
            temperature=0.7,
        )
        return CallRow(0, "e", agent, agent, adv, sample)

    rows = [row("proposer", [5, 6, 7], 0.5), row("proposer", [5, 2], 0.5), row("reviser", [9, 9], -0.25)]
    assert [cut_off(r, eos) for r in rows] == [True, False, True]
    charge_cut_off(rows, eos, 1.0)
    assert [r.advantage for r in rows] == [-0.5, 0.5, -1.25]
