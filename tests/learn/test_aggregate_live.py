"""The learned answer aggregator (O4) acts in live vote runs, alone or inside an -agg stop policy:
every decision is recorded and recomputes from the trace prefix through the offline path (no
train/serve skew); bad inputs fail with the file named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from stopkit import vote_config

from orchestrace.cli import main
from orchestrace.core.io import load_one
from orchestrace.learn import load_policy
from orchestrace.learn.stopping.aggregate import (
    MAJORITY,
    Aggregator,
    answer_prior,
    answer_statics,
    candidate_features,
    fit_aggregator,
    priors_to_json,
    save_aggregator,
)
from orchestrace.learn.stopping.banks import Bank, BankQuestion, default_bank
from orchestrace.learn.stopping.families import family
from orchestrace.learn.stopping.features import features, features_hash, replay_table
from orchestrace.learn.stopping.policy import StopPolicy
from orchestrace.learn.stopping.traces import episode_from_trace
from orchestrace.learn.stopping.training import aggregator_answer, train_policy
from orchestrace.runtime.backends.scripted import ScriptedBackend
from orchestrace.runtime.programs.vote import first_line
from orchestrace.runtime.runner import run

BUDGET = 6


@pytest.fixture(scope="module")
def reference() -> Bank:
    """Antonym questions the aggregator was not fitted on: its answer prior (the calibration role)."""
    return default_bank("antonyms").subset(range(40, 120), "antonyms-ref")


@pytest.fixture(scope="module")
def agg_path(tmp_path_factory: pytest.TempPathFactory, reference: Bank) -> str:
    bank = default_bank("antonyms").subset(range(40))
    agg = fit_aggregator([bank], BUDGET, seed=0)
    path = str(tmp_path_factory.mktemp("agg") / "stop-aggregator")
    save_aggregator(path, agg, {"antonyms": answer_prior(reference.questions)})
    return path


def _config(qi: int, width: int) -> dict:
    return vote_config("antonyms", qi, BUDGET, width)


@pytest.mark.parametrize("width", [1, 3])
def test_live_aggregate_decisions_recompute_from_the_trace(
    agg_path: str, reference: Bank, tmp_path: Path, width: int
) -> None:
    pol = load_policy(agg_path)
    fam = family("antonyms")
    decided = 0
    overruled = 0  # runs whose learned answer is not the vote program's own majority
    for qi in range(4):
        word = fam.questions[qi].question.split()[-1].strip("?\"'.").lower()
        answers = [word, word, fam.questions[qi].gold, "nice", ""]  # the echo twice, the gold once
        out = str(tmp_path / f"q{qi}-w{width}.events.jsonl")
        backend = ScriptedBackend(choices=answers, seed=qi, delay=lambda req: (req.seed % 97) / 97 * 0.02)
        run("vote", out, config=_config(qi, width), backend=backend, trace_policies={"aggregate": pol})
        tr = load_one(out)
        ep = episode_from_trace(tr, out)
        events = [(i, e.attrs or {}) for i, e in enumerate(tr.events)
                  if e.type == "orchestrator_decision" and (e.attrs or {}).get("decision") == "should_aggregate"]  # fmt: skip
        assert events, "the aggregator was asked"
        for idx, a in events:
            seen = [x for x, i in zip(ep.answers, ep.answer_index, strict=True) if i < idx]
            assert a["samples"] == len(seen) and a["policy"] == "stop-aggregator"
            # the offline path: a bank question in trace order, statics from the reference bank
            q = BankQuestion("q", ep.question, ep.gold, seen)
            static = answer_statics(Bank("live", [q], {}), reference)[0]
            pt = replay_table(q, np.arange(len(seen)), static)
            x = candidate_features(pt.counts[-1:], pt.valid[-1:], pt.static)[0]
            assert features_hash(x) == a["features_hash"]
            n = len(seen)
            best = aggregator_answer(pol.aggregator)(pt, n)  # what offline evaluation returns
            assert a["value"] == q.labels[int(pt.ids[best])]
            p = float(pol.aggregator.features(pt.counts[-1:], pt.valid[-1:], pt.static)[0, 0])
            assert a["prob"] == pytest.approx(p, abs=1e-6)
            decided += 1
        outcome = (tr.metadata or {})["outcome"]
        assert outcome["final"] == events[-1][1]["value"]
        votes = [first_line(v) for v in ep.answers if v]
        overruled += outcome["final"] != max(votes, key=votes.count)
    assert decided >= 4
    assert overruled >= 1, "the learned aggregator never differed from majority vote on these runs"


def test_bad_aggregate_inputs(agg_path: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "r.events.jsonl"

    def cli(*extra: str) -> tuple[int, str]:
        with pytest.raises(SystemExit) as e:  # the real entry point: one line on stderr, the exit code
            main(["run", "vote", "--backend", "scripted", "--set", 'question="q?"', "-o", str(out), *extra])
        cap = capsys.readouterr()
        return int(e.value.code or 0), " ".join((cap.out + cap.err).split())

    code, text = cli("--set", 'family="plurals"', "--policy", f"aggregate={agg_path}")
    assert code == 1 and "answer priors for the families ['antonyms']" in text
    assert "stop-aggregator.safetensors" in text
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a safetensors file")
    code, text = cli("--set", 'family="antonyms"', "--policy", f"aggregate={bad}")
    assert code == 1 and "bad.safetensors" in text
    code, text = cli("--set", 'family="antonyms"', "--policy", f"stop={agg_path}")
    assert code == 1 and "answers 'aggregate', not 'stop'" in text
    assert not out.exists()
    code, text = cli("--set", 'family="antonyms"', "--policy", f"aggregate={agg_path}")
    assert code == 0, text
    kinds = [
        (e.attrs or {}).get("decision")
        for e in load_one(str(out)).events
        if e.type == "orchestrator_decision"
    ]
    assert "should_aggregate" in kinds


@pytest.fixture(scope="module")
def agg_stop_path(tmp_path_factory: pytest.TempPathFactory, reference: Bank) -> str:
    """An -agg stop policy (exact PG, a few iterations) whose file carries the antonyms' answer
    prior from the reference questions, as ``train stop`` saves it from its calibration split."""
    bank = default_bank("antonyms").subset(range(40))
    agg = fit_aggregator([bank], BUDGET, seed=0)
    pol, _ = train_policy(bank, 0.02, algo="exact", budget=BUDGET, iterations=25, seed=0, aggregator=agg)
    pol.config.extra["answer_priors"] = priors_to_json({"antonyms": answer_prior(reference.questions)})
    path = str(tmp_path_factory.mktemp("aggstop") / "stop-agg")
    pol.save(path)
    return path


@pytest.mark.parametrize("width", [1, 3])
def test_live_agg_stop_decisions_recompute_from_the_trace(
    agg_stop_path: str, reference: Bank, tmp_path: Path, width: int
) -> None:
    """Every stop decision of an -agg policy in a live run: its features (the aggregator's three
    included), action and probability recomputed offline from the recorded trace, with the statics
    offline evaluation computes from the reference questions."""
    pol = load_policy(agg_stop_path)
    agg = pol.policy.aggregator
    assert agg is not None
    fam = family("antonyms")
    decided, agg_differs = 0, 0
    for qi in range(4):
        word = fam.questions[qi].question.split()[-1].strip("?\"'.").lower()
        answers = [word, fam.questions[qi].gold, "nice", "", fam.questions[qi].gold]
        out = str(tmp_path / f"q{qi}-w{width}.events.jsonl")
        backend = ScriptedBackend(choices=answers, seed=qi, delay=lambda req: (req.seed % 97) / 97 * 0.02)
        run("vote", out, config=_config(qi, width), backend=backend, trace_policies={"stop": pol})
        ep = episode_from_trace(load_one(out), out)
        assert ep.decisions, "the -agg stop policy was asked"
        for d in ep.decisions:
            seen = [x for x, i in zip(ep.answers, ep.answer_index, strict=True) if i < d.index]
            assert d.samples == len(seen) and d.policy == "stop-agg"
            q = BankQuestion("q", ep.question, ep.gold, seen)
            static = answer_statics(Bank("live", [q], {}), reference)[0]
            pt = replay_table(q, np.arange(len(seen)), static)
            x = features(pt, BUDGET, aggregator=agg)[-1]
            assert features_hash(x) == d.features_hash
            p = float(pol.policy.stop_prob(x[None])[0])
            assert d.act == (p >= 0.5) and d.prob == pytest.approx(p if d.act else 1 - p, abs=1e-6)
            agg_differs += not np.allclose(
                x[-3:], features(pt, BUDGET, aggregator=Aggregator(MAJORITY))[-1][-3:]
            )
            decided += 1
    assert decided >= 4
    assert agg_differs >= 1, "the learned aggregator's features never differed from majority vote's"


def test_agg_stop_policy_without_priors_or_for_another_family(
    agg_stop_path: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "r.events.jsonl"

    def cli(*extra: str) -> tuple[int, str]:
        with pytest.raises(SystemExit) as e:
            main(["run", "vote", "--backend", "scripted", "--set", 'question="q?"', "-o", str(out), *extra])
        cap = capsys.readouterr()
        return int(e.value.code or 0), " ".join((cap.out + cap.err).split())

    code, text = cli("--set", 'family="plurals"', "--policy", f"stop={agg_stop_path}")
    assert (
        code == 1 and "answer priors for the families ['antonyms']" in text and "stop-agg.safetensors" in text
    )
    old = StopPolicy.load(agg_stop_path)
    old.config.extra.pop("answer_priors")
    old.save(str(tmp_path / "old-agg"))
    code, text = cli("--set", 'family="antonyms"', "--policy", f"stop={tmp_path / 'old-agg'}")
    assert code == 1 and "saves no answer priors" in text and "old-agg.safetensors" in text
    assert not out.exists()
    code, text = cli("--set", 'family="antonyms"', "--policy", f"stop={agg_stop_path}")
    assert code == 0, text
    assert load_one(str(out)).events


def test_train_stop_saves_priors_of_training_and_calibration_questions_only(tmp_path: Path) -> None:
    """``train stop`` writes the -agg policy with the answer priors of its training bank and of the
    calibration half of the held-out bank, never of the reported half (no free samples), under the
    family name a run's config gives; the policy then acts in a run of that family."""
    from typer.testing import CliRunner

    from orchestrace.cli import app
    from orchestrace.learn.stopping.banks import save_bank
    from orchestrace.learn.stopping.training import split

    train, held = default_bank("antonyms").subset(range(30)), default_bank("plurals").subset(range(40))
    save_bank(train, str(tmp_path / "antonyms.jsonl"))
    save_bank(held, str(tmp_path / "plurals.jsonl"))
    out = str(tmp_path / "p" / "stop")
    r = CliRunner().invoke(app, ["train", "stop", "--bank", str(tmp_path / "antonyms.jsonl"), "--eval-bank",
                                 str(tmp_path / "plurals.jsonl"), "--budget", "6", "--iterations", "3", "--sweep", "",
                                 "--target-samples", "0", "--orders", "1", "-o", out])  # fmt: skip
    assert r.exit_code == 0, r.output
    pol = load_policy(out + "-agg.safetensors")
    calib, reported = split(held, 0.5, 1)  # the seed + 1 split train stop makes (default seed 0)
    assert pol.priors["plurals"] == answer_prior(calib.questions) != answer_prior(reported.questions)
    assert pol.priors["antonyms"] == answer_prior(train.questions)
    pol.check("vote", {"family": "plurals"})  # a held-out family's run is accepted
