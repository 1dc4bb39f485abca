"""Leave-one-family-out and the label-free prior, on small synthetic families (seconds)."""

from __future__ import annotations

import numpy as np
from typer.testing import CliRunner

from orchestrace.cli import app
from orchestrace.core.errors import OrchestraceError
from orchestrace.learn.stopping.adapt import fit_label_free
from orchestrace.learn.stopping.banks import Bank, BankQuestion, SynthParams, synthetic_bank
from orchestrace.learn.stopping.evaluation import Result
from orchestrace.learn.stopping.transfer import dominating_rules, leave_one_family_out


def _unlabelled(bank: Bank) -> Bank:
    return Bank(bank.name, [BankQuestion(q.id, q.question, None, q.samples) for q in bank.questions], {})


def test_label_free_prior_reads_no_label_and_finds_the_correct_rate() -> None:
    truth = SynthParams(a=3.0, b=1.0, distractors=5, alpha=0.5, samples=20)
    bank = synthetic_bank(300, truth, seed=4)
    fitted = fit_label_free(bank, budget=20)
    assert fitted == fit_label_free(_unlabelled(bank), budget=20)
    # the mean correct rate a / (a + b) = 0.75; a fit that ignored the counts would sit at its start 0.5
    assert abs(fitted.a / (fitted.a + fitted.b) - 0.75) < 0.08
    low = fit_label_free(synthetic_bank(300, SynthParams(a=1.0, b=1.0, alpha=0.5, samples=20), seed=4), 20)
    assert low.a / (low.a + low.b) < fitted.a / (fitted.a + fitted.b) - 0.1


def _res(name: str, family: str, samples: float, acc: float) -> Result:
    return Result(name, family, 0, np.full(4, samples), np.full(4, acc))


def test_dominating_rules_needs_no_more_samples_and_no_lower_accuracy() -> None:
    ours = _res("learned", "learned", 3.0, 0.7)
    rules = [
        _res("fixed-3", "fixed-k", 3.0, 0.7),  # equal: not dominating
        _res("esc(w=2)", "esc", 2.5, 0.7),  # fewer samples, same accuracy
        _res("ac-beta(0.9)", "ac-beta", 3.0, 0.75),  # same samples, better
        _res("consol-sprt", "consol-sprt", 3.5, 0.9),  # better but dearer
        _res("ac-beta(0.5)", "ac-beta", 1.0, 0.6),
    ]
    assert dominating_rules(ours, rules) == ["ac-beta(0.9)", "esc(w=2)"]


def test_leave_one_family_out_on_three_small_families() -> None:
    fams = [
        synthetic_bank(30, SynthParams(a=a, b=b, alpha=al, samples=10), seed=s, name=n)
        for n, a, b, al, s in (("easy", 4, 1, 0.5, 1), ("hard", 1, 2, 0.3, 2), ("mid", 2, 2, 1.0, 3))
    ]
    rep, per = leave_one_family_out(
        fams, budget=10, orders=2, learned_costs=(0.003, 0.03), bayes_costs=(0.01,), iterations=3
    )
    assert [f.family for f in rep.families] == ["easy", "hard", "mid"]
    assert all(f.reported_questions == 15 and f.calibration_samples == 150 for f in rep.families)
    fams_rows = {(r.family, r.method) for r in rep.rows}
    for fam in ("easy", "hard", "mid", "all"):
        assert {
            (fam, "learned(c=0.003)"),
            (fam, "learned-online(c=0.003)"),
            (fam, "learned+sprt(c=0.003)"),
            (fam, "consol-sprt"),
        } <= fams_rows
        assert (fam, "bayes-adapted(c=0.01)") in fams_rows
    for r in rep.rows:
        assert r.gap_ci95_points[0] - 1e-9 <= r.gap_points <= r.gap_ci95_points[1] + 1e-9
        if r.family != "all":
            by = {x.method: x for x in per[r.family]}
            assert abs(r.fixed_accuracy - by["fixed-10"].accuracy) < 1e-12
            for name in r.dominated_by:  # every named rule really dominates, on the same replays
                assert (
                    by[name].mean_samples <= r.mean_samples + 1e-9 and by[name].accuracy >= r.accuracy - 1e-9
                )
    for fam in ("easy", "hard", "mid"):  # the first of the two stops, replay by replay
        by = {x.method: x for x in per[fam]}
        both = np.minimum(by["learned(c=0.003)"].n_used, by["consol-sprt"].n_used)
        assert np.all(by["learned+sprt(c=0.003)"].n_used <= both + 1e-9)
    pooled = next(r for r in rep.rows if r.family == "all" and r.method == "consol-sprt")
    sprt = [next(x for x in per[f] if x.method == "consol-sprt") for f in ("easy", "hard", "mid")]
    assert abs(pooled.accuracy - np.mean([s.accuracy for s in sprt])) < 1e-12  # 15 questions each


def test_leave_one_family_out_cli_rejects_a_bank() -> None:
    r = CliRunner().invoke(app, ["eval", "stop", "--leave-one-family-out", "--bank", "countries"])
    assert isinstance(r.exception, OrchestraceError) and "seven embedded families" in str(r.exception)
    r = CliRunner().invoke(app, ["eval", "stop"])
    assert isinstance(r.exception, OrchestraceError) and "--bank" in str(r.exception)
