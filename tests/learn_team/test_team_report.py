"""eval team: the comparison of train team runs, on loop folders whose held-out runs a scripted
backend answered (no model): every figure below is counted by hand from the answers given."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from orchestrace.cli import main
from orchestrace.core.errors import OrchestraceError
from orchestrace.runtime.backends.scripted import ScriptedBackend
from orchestrace.runtime.runner import execute

FAMILY = "continents"
# question -> gold: cont-albania europe, cont-angola africa, cont-argentina south america
QUESTIONS = ("cont-albania", "cont-angola", "cont-argentina")


def record(path: Path, qid: str, answers: dict[str, str]) -> None:
    """One held-out team run; ``answers``: agent -> its reply (adapters=agent routes on the name)."""
    backend = ScriptedBackend(fn=lambda req: answers[req.model])
    path.parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(
        execute(
            "team",
            str(path),
            config={"family": FAMILY, "question": qid, "solvers": 2, "adapters": "agent"},
            seed=7,
            backend=backend,
            clock="logical",
        )
    )


def loop_folder(root: Path, credit: str, seed: int, before: dict, after: dict) -> Path:
    """A two-iteration train team folder: iteration 0 answers ``before``, iteration 1 ``after``
    (question -> (solver_0, solver_1, aggregator))."""
    out = root / f"{credit}-s{seed}"
    (out).mkdir(parents=True)
    (out / "config.json").write_text(json.dumps({"family": FAMILY, "credit": credit, "seed": seed}))
    for i, table in enumerate((before, after)):
        d = out / f"iter-{i:03d}"
        for qid, (s0, s1, agg) in table.items():
            record(
                d / "eval" / f"{qid}-g0.events.jsonl",
                qid,
                {"solver_0": s0, "solver_1": s1, "aggregator": agg},
            )
        train = {} if i == 0 else {"reward": 0.5, "rollout_s": 3.0, "update_s": 5.0}
        rec = {"iteration": i, "policy": None if i == 0 else str(d / "policy"), "traces": [], "train": train}
        rec["eval"] = {
            "team_accuracy": sum(a == g for a, g in zip((t[2] for t in table.values()), GOLD, strict=True))
            / 3
        }
        (d / "iteration.json").write_text(json.dumps(rec))
    return out


GOLD = ("Europe", "Africa", "South America")
# before: the aggregator follows the last solver when they disagree (wrong twice)
BEFORE = {
    "cont-albania": ("Europe", "Europe", "Europe"),
    "cont-angola": ("Africa", "Asia", "Asia"),
    "cont-argentina": ("South America", "Europe", "Europe"),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("team")
    # broadcast: one more question right, by the solvers agreeing
    b = loop_folder(
        root,
        "broadcast",
        0,
        BEFORE,
        {
            "cont-albania": ("Europe", "Europe", "Europe"),
            "cont-angola": ("Africa", "Africa", "Africa"),
            "cont-argentina": ("South America", "Europe", "Europe"),
        },
    )
    # grpo: the aggregator now picks the right solver when they disagree
    g = loop_folder(
        root,
        "grpo",
        0,
        BEFORE,
        {
            "cont-albania": ("Europe", "Europe", "Europe"),
            "cont-angola": ("Africa", "Asia", "Africa"),
            "cont-argentina": ("South America", "Europe", "South America"),
        },
    )
    return root, b, g


def test_before_after_per_run_and_credit_and_against_broadcast(folders):
    from orchestrace.learn.team.report import REPORT_JSON, REPORT_PNG, team_report

    root, b, g = folders
    rep = team_report([g, b], root / "report", examples=5)
    runs = {r.credit: r for r in rep.runs}
    assert (runs["broadcast"].before, runs["broadcast"].after) == pytest.approx((1 / 3, 2 / 3))
    assert (runs["grpo"].before, runs["grpo"].after) == pytest.approx((1 / 3, 1.0))
    assert runs["grpo"].train_s_per_iteration == pytest.approx(8.0)
    assert [c.credit for c in rep.credits] == ["broadcast", "grpo"]  # broadcast first
    grpo = rep.credits[1]
    assert grpo.difference == pytest.approx(2 / 3)
    assert grpo.minus_broadcast == pytest.approx(1 / 3)
    assert rep.credits[0].minus_broadcast is None
    assert rep.questions == 3
    # the examples are the questions whose team answer flipped, with every agent's answers
    assert [e.question for e in runs["grpo"].examples] == ["cont-angola", "cont-argentina"]
    assert runs["grpo"].examples[0].before == {"solver_0": "Africa", "solver_1": "Asia", "aggregator": "Asia"}
    agents = {a.agent: a for a in runs["grpo"].agents}
    assert list(agents) == ["solver_0", "solver_1", "aggregator"]
    agg = agents["aggregator"]
    # before: solvers disagree on angola and argentina, the aggregator follows solver_1 both times
    assert (agg.follows_last_before, agg.follows_last_after) == (1.0, 0.0)
    assert (agg.picks_right_before, agg.picks_right_after) == (0.0, 1.0)
    assert agg.changed == pytest.approx(2 / 3)
    assert agents["solver_1"].changed == 0.0 and agents["solver_1"].before == pytest.approx(1 / 3)
    assert agents["solver_0"].follows_last_before is None
    data = json.loads((root / "report" / REPORT_JSON).read_text())
    assert data["heldout_curve"]["grpo"] == {"0": pytest.approx(1 / 3), "1": 1.0}
    assert (root / "report" / REPORT_PNG).stat().st_size > 0


def test_cli_prints_the_comparison_and_refuses_bad_folders(folders, tmp_path, capsys):
    root, b, g = folders
    with pytest.raises(SystemExit) as e:
        main(["eval", "team", str(b), str(g)])
    out = capsys.readouterr().out
    assert e.value.code in (0, None)
    assert "grpo (seeds 0): 0.333 -> 1.000 (+0.667" in out
    assert "after - broadcast's after +0.333" in out
    with pytest.raises(SystemExit) as e:
        main(["eval", "team", str(tmp_path)])
    assert e.value.code == 1
    assert "OT699" in capsys.readouterr().err
    # a mistyped folder is not found (exit 2, as every other missing path), not a bad folder (1)
    with pytest.raises(SystemExit) as e:
        main(["eval", "team", str(b), str(tmp_path / "tem")])
    assert e.value.code == 2
    assert "OT001" in (err := capsys.readouterr().err) and "folder not found" in err and "tem" in err


def test_two_runs_of_one_credit_and_seed_are_refused(folders):
    from orchestrace.learn.team.report import team_report

    _, b, _ = folders
    with pytest.raises(OrchestraceError, match="two runs of credit 'broadcast' with seed 0"):
        team_report([b, b])


@pytest.mark.parametrize(
    ("config", "said"),
    [
        # each was an internal error (exit 3): list.get, KeyError, int(None), UnicodeDecodeError
        (b"[1, 2]", "the loop configuration is a JSON list, not an object"),
        (b'{"family": "continents", "seed": 0}', "missing required field `credit`"),
        (b'{"family": "continents", "credit": "grpo", "seed": null}', "Expected `int`, got `null` - at `$.seed`"),
        (b'{"family": "continents", "credit": "gr\xffpo", "seed": 0}', "can't decode byte 0xff"),
        # read as seed 1 without a word
        (b'{"family": "continents", "credit": "grpo", "seed": 1.7}', "Expected `int`, got `float` - at `$.seed`"),
        (b'{"family": ' + b"[" * 5000 + b"]" * 5000 + b"}", "maximum recursion depth"),  # RecursionError
        # a lone surrogate escape: msgspec's UnicodeEncodeError (bench/fuzz_hostile.py loop-records 61185)
        (b'{"family": "continents", "credit": "grpo", "seed": "\\udfff\\ud800"}', "surrogates not allowed"),
    ],
)  # fmt: skip
def test_a_damaged_config_is_bad_input_naming_it(folders, tmp_path, config, said):
    from orchestrace.learn.team.report import team_report

    _, b, g = folders
    bad = tmp_path / "grpo-s0"
    shutil.copytree(g, bad)
    (bad / "config.json").write_bytes(config)
    with pytest.raises(OrchestraceError) as ei:
        team_report([b, bad])
    assert ei.value.code == "OT699" and ei.value.exit_code == 1
    assert ei.value.path == str(bad / "config.json") and said in ei.value.message


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        # KeyError: 'team_accuracy' / 'rollout_s', internal errors (exit 3)
        (lambda rec: rec["eval"].clear() or rec["eval"].update(x=1.0), "eval.team_accuracy is missing"),
        (lambda rec: rec["train"].pop("rollout_s"), "train.rollout_s is missing"),
        # written into team-report.json's curve as NaN (not JSON)
        (lambda rec: rec["eval"].update(team_accuracy=float("nan")), "eval.team_accuracy is nan"),
    ],
)
def test_a_record_without_the_figures_the_report_reads_names_it(folders, tmp_path, damage, said):
    from orchestrace.learn.team.report import team_report

    _, b, g = folders
    bad = tmp_path / "grpo-s0"
    shutil.copytree(g, bad)
    p = bad / "iter-001" / "iteration.json"
    rec = json.loads(p.read_text())
    damage(rec)
    p.write_text(json.dumps(rec))
    with pytest.raises(OrchestraceError, match=said) as ei:
        team_report([b, bad])
    assert ei.value.code == "OT699" and ei.value.path == str(p)


def test_a_run_without_held_out_traces_is_named(folders, tmp_path, recwarn):
    from orchestrace.learn.team.report import team_report

    _, b, g = folders
    bad = tmp_path / "grpo-s0"
    shutil.copytree(g, bad)
    shutil.rmtree(bad / "iter-001" / "eval")
    # numpy's "Mean of empty slice" warning, then "the runs share no held-out question"
    with pytest.raises(
        OrchestraceError, match="no held-out question has a run .* in both iteration 0 and 1"
    ) as ei:
        team_report([b, bad])
    assert ei.value.path == str(bad) and not [w for w in recwarn if w.category is RuntimeWarning]


def test_a_resume_of_a_folder_whose_config_is_no_object_is_refused(tmp_path):
    from orchestrace.learn.team.config import TeamConfig, check_resume

    (tmp_path / "config.json").write_text('"grpo"')  # old.get(...): an internal error
    with pytest.raises(OrchestraceError, match="a JSON str, not an object") as ei:
        check_resume(tmp_path, TeamConfig())
    assert ei.value.code == "OT699"


def test_mean_advantage_of_a_centred_batch_is_zero_not_float_noise() -> None:
    """Group-centred advantages of two agents that act in every run average to 0 for each; summed
    naively they came out as float noise, and curves.png drew it on a 1e-17 scale."""
    from orchestrace.learn.team.batch import CallRow
    from orchestrace.learn.team.step import mean_advantages

    rewards = [0.1, 0.7, 0.2, 0.9, 0.3, 0.6, 0.8]
    mean = sum(rewards) / len(rewards)
    rows = [
        CallRow(trace=i, event=f"e{i}", agent=agent, adapter=agent, advantage=r - mean, sample=None)
        for i, r in enumerate(rewards)
        for agent in ("checker", "solver")
    ]
    assert sum(r - mean for r in rewards) / len(rewards) != 0.0  # the noise the plot showed
    assert mean_advantages(rows) == {"checker": 0.0, "solver": 0.0}


def test_a_held_out_run_naming_an_unknown_question_is_the_file_named(folders, tmp_path):
    """The error named the shipped task file ("no question 'nope' in task set 'continents'"),
    which holds no mistake; the run's file holds it."""
    from orchestrace.learn.team.report import team_report

    _, b, g = folders
    bad = tmp_path / "grpo-s0"
    shutil.copytree(g, bad)
    run = bad / "iter-001" / "eval" / "cont-angola-g0.events.jsonl"
    recs = [json.loads(line) for line in run.read_text().splitlines()]
    for r in recs:
        if isinstance(r.get("metadata"), dict) and "runtime" in r["metadata"]:
            r["metadata"]["runtime"]["config"]["question"] = "nope"
    run.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(OrchestraceError, match="no question 'nope'") as ei:
        team_report([b, bad])
    assert (ei.value.path, ei.value.pointer) == (str(run), "/metadata/runtime/config")


def test_every_held_out_run_of_a_question_counts(folders, tmp_path):
    """--eval-runs: a question's accuracy is the share of its runs right (only g0 was read)."""
    from orchestrace.learn.team.report import team_report

    run = shutil.copytree(folders[1], tmp_path / "broadcast-s0")
    # a second run of each question after training: the aggregator wrong every time
    for qid in QUESTIONS:
        record(
            run / "iter-001" / "eval" / f"{qid}-g1.events.jsonl",
            qid,
            {"solver_0": "Asia", "solver_1": "Asia", "aggregator": "Asia"},
        )
    one = team_report([folders[1]]).runs[0]
    two = team_report([run]).runs[0]
    assert two.before == one.before and two.after == pytest.approx(one.after / 2)
