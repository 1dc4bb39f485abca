"""The learned aggregator (O4): hand-computed statics, majority as a special case, real gains."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrace.core.validate import validate_trace
from orchestrace.learn.envs.stopvote import StopVoteEnv
from orchestrace.learn.stopping.aggregate import MAJORITY, Aggregator, answer_statics, echoes, fit_aggregator
from orchestrace.learn.stopping.banks import Bank, BankQuestion, default_bank
from orchestrace.learn.stopping.evaluation import run_rule, tables
from orchestrace.learn.stopping.features import feature_names, features
from orchestrace.learn.stopping.policy import StopPolicy
from orchestrace.learn.stopping.rules import Method, fixed_k
from orchestrace.learn.stopping.training import aggregator_answer, policy_method, train_policy
from orchestrace.reward.stop import stop_reward


def q(i: int, question: str, gold: str, samples: list[str | None]) -> BankQuestion:
    return BankQuestion(f"q{i}", question, gold, samples)


def test_echo_is_whole_words_case_insensitive() -> None:
    assert echoes("polite", 'What is the opposite of the word "Polite"?')
    assert not echoes("lit", 'What is the opposite of the word "polite"?')
    assert echoes("new york", "Where is New York?")
    assert not echoes("york", "Where is Yorkshire?")


def test_statics_by_hand() -> None:
    bank = Bank(
        "b",
        [
            q(0, "opposite of hot?", "cold", ["cold", "nice", "hot"]),
            q(1, "opposite of mean?", "kind", ["nice", "kind"]),
            q(2, "opposite of big?", "small", ["small", "nice", None]),
            q(3, "opposite of up?", "down", ["down"]),
        ],
    )
    st = answer_statics(bank)
    # "nice" appears in 3 of 4 questions: leave-one-out (3 - 1 + 1) / 4; a unique answer 1 / 4
    np.testing.assert_allclose(np.exp(st[0][:, 0]), [0.25, 0.75, 0.25])
    np.testing.assert_array_equal(st[0][:, 1], [0, 0, 1])  # "hot" echoes the question
    np.testing.assert_allclose(np.exp(st[2][:, 0]), [0.25, 0.75])


def test_majority_weights_reproduce_majority_vote_on_real_replays() -> None:
    bank = default_bank("countries")
    agg = Aggregator(MAJORITY)
    for row in tables(bank, 40, orders=3)[:60]:
        for pt in row:
            assert pt.static is not None
            np.testing.assert_array_equal(agg.answers(pt.counts, pt.valid, pt.static), pt.majority)


def test_hand_scores_and_features() -> None:
    agg = Aggregator((1.0, 0.0, -1.0, -2.0))
    counts = np.array([[1, 0], [1, 1], [1, 2]])
    valid = np.array([1, 2, 3])
    static = np.array([[np.log(0.5), 0.0], [np.log(0.05), 0.0]])  # answer 0 is an attractor
    s = agg.scores(counts, valid, static)
    # score = log1p(v) - log prior: answer 0: log 2 + log 2; answer 1 at t=2: log 2 + log 20
    assert s[0, 1] == -np.inf
    assert s[1, 0] == pytest.approx(2 * np.log(2))
    assert s[1, 1] == pytest.approx(np.log(2) + np.log(20))
    np.testing.assert_array_equal(agg.answers(counts, valid, static), [0, 1, 1])
    f = agg.features(counts, valid, static)
    assert f[0, 0] == pytest.approx(1.0)  # one candidate: probability 1, margin 0
    assert f[0, 1] == 0.0
    gap = np.log(20) - np.log(2)
    assert f[1, 0] == pytest.approx(1 / (1 + np.exp(-gap)), rel=1e-5)
    assert f[1, 2] == pytest.approx(0.05, rel=1e-5)  # prior share of the leader


def test_fitted_on_antonyms_beats_majority_on_countries() -> None:
    """Cross-family: weights fitted on one family raise fixed-40 accuracy on the other."""
    agg = fit_aggregator([default_bank("antonyms")], orders=2, seed=0)
    assert agg.weights[2] < 0 and agg.weights[3] < 0  # attractors and echoes are penalised
    assert agg == fit_aggregator([default_bank("antonyms")], orders=2, seed=0)  # deterministic
    test = default_bank("countries")
    reps = tables(test, 40, orders=4)
    plain = run_rule(test, reps, Method("fixed-40", "fixed-k", 40, fixed_k(40)), 40)
    weighted = run_rule(test, reps, Method("agg-40", "fixed-k", 40, fixed_k(40), aggregator_answer(agg)), 40)
    assert weighted.accuracy > plain.accuracy + 0.005


def test_policy_with_aggregator_trains_saves_and_emits_traces(tmp_path) -> None:
    bank = default_bank("countries").subset(range(60))
    agg = fit_aggregator([bank], orders=1)
    pol, _ = train_policy(bank, 0.01, iterations=10, perms=2, aggregator=agg)
    assert pol.config.features == feature_names(True) and pol.config.aggregator == list(agg.weights)
    pol.save(str(tmp_path / "p"))
    back = StopPolicy.load(str(tmp_path / "p"))
    assert back.aggregator == agg
    assert policy_method(back).family == "learned+agg"
    env = StopVoteEnv(bank, cost=0.01, perms=2, aggregator=agg)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (len(feature_names(True)),)
    _, reward, done, _, info = env.step(1)
    tr = info["trace"]
    assert done and not [f for f in validate_trace(tr) if f.severity == "error"]
    aggregate = next(e for e in tr.events if e.type == "aggregate")
    assert aggregate.attrs["method"] == "learned-weighted"
    assert reward == pytest.approx(stop_reward(tr, 0.01))


def test_features_need_statics_with_an_aggregator() -> None:
    from orchestrace.learn.stopping.features import prefix_table

    pt = prefix_table(np.array([0, 1, 0]))
    assert features(pt, 3).shape == (3, len(feature_names(False)))
    with pytest.raises(ValueError, match="statics"):
        features(pt, 3, aggregator=Aggregator())


def test_concentration_term_by_hand() -> None:
    # 11 questions, each: its own answer once and "x" once. Votes: x 11, a0..a10 1 each (22);
    # the 10 commonest answers hold 11 + 9 = 20 of them: concentration 20 / 22
    bank = Bank("c", [q(i, f"q{i}?", "x", [f"a{i}", "x"]) for i in range(11)])
    for st in answer_statics(bank):
        np.testing.assert_allclose(st[:, 2], st[:, 0] * 20 / 22)
        np.testing.assert_allclose(np.exp(st[:, 0]), [1 / 11, 1.0])  # a_i in 1 of 11; x in all


def test_statics_are_per_family_in_a_merged_bank() -> None:
    from orchestrace.learn.stopping.training import merge

    a = Bank("a", [q(i, f"a{i}?", "x", ["x", f"u{i}"]) for i in range(4)])
    b = Bank("b", [q(i, f"b{i}?", "x", ["x", "y"]) for i in range(3)])
    both = merge([a, b], "a+b")
    for got, want in zip(answer_statics(both), answer_statics(a) + answer_statics(b), strict=True):
        np.testing.assert_allclose(got, want)
    # "x" is in all 7 questions; pooled, its prior would still be 1, but "y" would drop to 3/7
    assert np.exp(answer_statics(both)[4][1, 0]) == pytest.approx(1.0)
    sub = both.subset([5, 0, 6])
    assert sub.meta["part_of"] == [1, 0, 1]
    np.testing.assert_allclose(answer_statics(sub)[0], answer_statics(b.subset([1, 2]))[0])


def test_few_shared_answers_are_not_penalised_as_attractors() -> None:
    """Continents (6 answers serve every question): weights fitted on the six other families used
    to flip early votes to rare wrong answers (fixed-5: 0.66 vs majority 0.78)."""
    from orchestrace.learn.stopping.banks import default_bank_names
    from orchestrace.learn.stopping.training import merge

    others = [default_bank(n) for n in default_bank_names() if n != "continents"]
    agg = fit_aggregator([merge(others, "six")], orders=2, seed=0)
    assert agg.weights[4] > 0  # concentrated families: a shared answer is evidence, not a lure
    test = default_bank("continents")
    reps = tables(test, 40, orders=2)
    plain = run_rule(test, reps, Method("fixed-5", "fixed-k", 5, fixed_k(5)), 40)
    weighted = run_rule(test, reps, Method("agg-5", "fixed-k", 5, fixed_k(5), aggregator_answer(agg)), 40)
    assert weighted.accuracy > plain.accuracy - 0.01


def test_reference_statics_ignore_the_evaluated_samples() -> None:
    """Extra samples on other evaluated questions move the in-bank prior (and so the answer of
    a prior-weighted aggregator); with a disjoint reference split they change nothing."""
    ref = Bank("r", [q(i, f"r{i}?", "x", ["x", "nice"] if i < 3 else ["x"]) for i in range(4)])
    hot = q(0, "opposite of hot?", "cold", ["nice", "cold"])
    few = Bank("e", [hot, q(1, "opposite of up?", "down", ["down", "down"])])
    # question 1 with 40 more samples nobody paid for under the reported budget
    many = Bank("e", [hot, q(1, "opposite of up?", "down", ["down", "down"] + ["nice"] * 40)])
    agg = Aggregator((1.0, 0.0, -3.0, 0.0, 0.0))  # penalises attractors

    def answer(bank: Bank, reference: Bank | None) -> int:
        pt = tables(bank, 2, reference=reference)[0][0]
        return int(agg.answers(pt.counts, pt.valid, pt.static)[-1])

    assert answer(few, None) != answer(many, None)  # in-bank: "nice" becomes an attractor
    assert answer(few, ref) == answer(many, ref)
    np.testing.assert_allclose(answer_statics(few, ref)[0], answer_statics(many, ref)[0])
    # "nice" in 3 of 4 reference questions: (3 + 1) / 5; "cold" in none: 1 / 5
    np.testing.assert_allclose(np.exp(answer_statics(few, ref)[0][:, 0]), [4 / 5, 1 / 5])


def test_reference_without_the_part_is_an_error() -> None:
    from orchestrace.learn.stopping.training import merge

    a = Bank("a", [q(i, f"a{i}?", "x", ["x"]) for i in range(2)])
    b = Bank("b", [q(i, f"b{i}?", "x", ["x"]) for i in range(2)])
    with pytest.raises(ValueError, match="part 1"):
        answer_statics(merge([a, b], "a+b"), a)


def test_echoes_is_a_whole_word_match_as_the_regex_says() -> None:
    """``echoes`` avoids regexes for speed; a regex with word boundaries is the definition."""
    import random
    import re

    from orchestrace.learn.stopping.aggregate import echoes

    def by_regex(label: str, question: str) -> bool:
        return re.search(rf"(?<!\w){re.escape(label.lower())}(?!\w)", question.lower()) is not None

    assert echoes("hot", "What is the opposite of Hot?") and not echoes("hot", "hotter")
    assert not echoes("x", "_x") and echoes("é", "café é")
    rng = random.Random(0)
    chars = "ab _-1é."
    for _ in range(20_000):
        q = "".join(rng.choice(chars) for _ in range(rng.randint(0, 8)))
        label = "".join(rng.choice(chars) for _ in range(rng.randint(0, 3)))
        assert echoes(label, q) == by_regex(label, q), (label, q)
