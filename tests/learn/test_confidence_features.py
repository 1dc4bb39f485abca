"""Token-confidence features of the learned stop policy (feature set ``counts+confidence``): their
values on hand-made samples, one feature function live and offline (no train/serve skew), refusal
of samples without log-probabilities, and old (``counts``) policy files unchanged."""

from __future__ import annotations

import json
import math
from pathlib import Path

import msgspec
import numpy as np
import pytest
from stopkit import vote_config

from orchestrace.cli import main
from orchestrace.core.errors import OrchestraceError
from orchestrace.core.io import load_one
from orchestrace.learn import load_policy
from orchestrace.learn.stopping.banks import Bank, BankQuestion, save_bank
from orchestrace.learn.stopping.features import (
    CONF_FEATURE_NAMES,
    features,
    features_hash,
    prefix_features,
    replay_table,
)
from orchestrace.learn.stopping.policy import PolicyConfig, StopPolicy
from orchestrace.learn.stopping.traces import episode_from_trace
from orchestrace.learn.stopping.training import eval_stop, train_policy
from orchestrace.runtime.backends.base import ChatRequest, ChatResponse, LogprobSummary
from orchestrace.runtime.backends.scripted import ScriptedBackend
from orchestrace.runtime.runner import run

BUDGET = 6
E = math.exp(-1.0)


def _lp(p: float) -> LogprobSummary:
    """A sample whose mean token probability is p and whose least sure token has p / e."""
    return LogprobSummary(math.log(p), math.log(p) - 1.0, 2)


def test_features_on_four_hand_made_samples() -> None:
    # answers a b a b, mean token probabilities 0.5 0.8 0.4 0.2; the majority (ties: first seen) is a
    q = BankQuestion("q", "q", "a", ["a", "b", "a", "b"], logprob=[_lp(p) for p in (0.5, 0.8, 0.4, 0.2)])
    f = features(replay_table(q, np.arange(4)), 4, confidence=True)[:, -len(CONF_FEATURE_NAMES) :]
    # share, margin / sqrt(valid), weighted leader is a, gap of mean p, gap of min p, rank of a's,
    # the weighted leader's lead (log1p, over log1p(budget 4) = log 5)
    want = [
        [1.0, 0.5, 1, 0.0, 0.0, 0.5, math.log(1.5) / math.log(5)],  # a alone
        [0.5 / 1.3, (0.5 - 0.8) / math.sqrt(2), 0, 0.5 - 0.8, (0.5 - 0.8) * E, 0.0, math.log(1.3) / math.log(5)],
        [0.9 / 1.7, (0.9 - 0.8) / math.sqrt(3), 1, 0.45 - 0.8, (0.45 - 0.8) * E, (1 / 2 + 0 / 2) / 2,
         math.log(1.1) / math.log(5)],
        [0.9 / 1.9, (0.9 - 1.0) / 2, 0, 0.45 - 0.5, (0.45 - 0.5) * E, (2 / 3 + 1 / 3) / 2,
         math.log(1.1) / math.log(5)],
    ]  # fmt: skip
    assert np.allclose(f, want, atol=1e-6)


def test_null_answers_and_samples_without_logprobs_do_not_count() -> None:
    # a, an unparsable sample (its log-prob ignored), b without log-probabilities, a
    q = BankQuestion("q", "q", "a", ["a", None, "b", "a"], logprob=[_lp(0.6), _lp(0.99), None, _lp(0.3)])
    f = features(replay_table(q, np.arange(4)), 4, confidence=True)[-1, -len(CONF_FEATURE_NAMES) :]
    # only a's two samples carry weight: share 1, margin 0.9 / sqrt(3 valid), no other sample to
    # compare with (gaps 0), a's percentiles among {0.6, 0.3}: 1 and 0; a leads b (no weight) by 0.9
    assert np.allclose(f, [1.0, 0.9 / math.sqrt(3), 1, 0.0, 0.0, 0.5, math.log(1.9) / math.log(5)], atol=1e-6)


def test_only_null_answers_so_far_need_no_logprobs() -> None:
    """A run whose first worker failed: nothing votes yet (no weight, no gap, the neutral rank)."""
    x = prefix_features([None], 4, logprob=[None], confidence=True)[-len(CONF_FEATURE_NAMES) :]
    assert np.allclose(x, [0.0, 0.0, 0, 0.0, 0.0, 0.5, 0.0])


def test_counts_features_are_unchanged_by_the_confidence_set() -> None:
    q = BankQuestion("q", "q", "a", ["a", "a", "b"], logprob=[_lp(0.5)] * 3)
    pt = replay_table(q, np.arange(3))
    both = features(pt, 3, confidence=True)
    assert np.array_equal(both[:, : both.shape[1] - len(CONF_FEATURE_NAMES)], features(pt, 3))


def test_samples_without_logprobs_are_refused() -> None:
    pt = replay_table(BankQuestion("q", "q", "a", ["a", "b"]), np.arange(2))
    with pytest.raises(OrchestraceError, match="log-probabilities") as e:
        features(pt, 2, confidence=True)
    assert e.value.code == "OT624"
    with pytest.raises(OrchestraceError, match="log-probabilities"):
        prefix_features(["a", "b"], 2, confidence=True)


def _bank(n: int = 30, seed: int = 0) -> Bank:
    """Right answers are said with more confidence than wrong ones."""
    rng = np.random.default_rng(seed)
    qs = []
    for i in range(n):
        p = rng.uniform(0.3, 0.9)
        s = ["cold" if rng.random() < p else str(rng.choice(["hot", "warm"])) for _ in range(BUDGET)]
        lp = [_lp(rng.uniform(0.5, 1.0) if a == "cold" else rng.uniform(0.05, 0.6)) for a in s]
        qs.append(BankQuestion(f"q{i}", f"q{i}", "cold", s, logprob=lp))
    return Bank("synthetic", qs)


@pytest.fixture(scope="module")
def conf_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    pol, _ = train_policy(_bank(), 0.02, budget=BUDGET, iterations=25, seed=0, confidence=True)
    path = str(tmp_path_factory.mktemp("pol") / "stop-conf")
    pol.save(path)
    return path


def test_saved_policy_names_its_feature_set(conf_path: str) -> None:
    cfg = json.loads(Path(conf_path + ".json").read_text())
    assert cfg["feature_set"] == "counts+confidence" and cfg["features"][-1] == "conf_lead_margin"
    assert StopPolicy.load(conf_path).confidence


# mean token log-probabilities the scripted workers report with each answer
LOGPROBS = {"cold": [-0.1, -0.3], "hot": [-1.2], "warm": [-0.7, -2.5, -0.2]}
MEANS = {"cold": -0.2, "hot": -1.2, "warm": -1.133333}  # as the trace keeps them (6 decimals)


class _WithLogprobs(ScriptedBackend):
    async def chat(self, req: ChatRequest) -> ChatResponse:
        out = await super().chat(req)
        return msgspec.structs.replace(out, logprobs=LOGPROBS.get(out.text))


def _config(qi: int, width: int) -> dict:
    return vote_config("antonyms", qi, BUDGET, width)


@pytest.mark.parametrize("width", [1, 3])
def test_live_confidence_decisions_recompute_from_the_trace(
    conf_path: str, tmp_path: Path, width: int
) -> None:
    pol = load_policy(conf_path)
    decided = 0
    for qi, answers in enumerate((["cold", "hot"], ["cold", "hot", "warm"], ["warm", "hot", "hot"])):
        out = str(tmp_path / f"q{qi}-w{width}.events.jsonl")
        backend = _WithLogprobs(choices=answers, seed=qi, delay=lambda req: (req.seed % 97) / 97 * 0.02)
        run("vote", out, config=_config(qi, width), backend=backend, trace_policies={"stop": pol})
        ep = episode_from_trace(load_one(out), out)
        assert ep.decisions and ep.logprob is not None
        assert [x.mean for x in ep.logprob] == [MEANS[a] for a in ep.answers]
        # offline: the same answers and log-probabilities as a bank question, replayed in trace order
        q = BankQuestion("q", "q", ep.gold, ep.answers, logprob=ep.logprob)
        offline = features(replay_table(q, np.arange(len(ep.answers))), BUDGET, confidence=True)
        for d in ep.decisions:
            n = d.samples
            x = prefix_features(ep.answers[:n], BUDGET, logprob=ep.logprob[:n], confidence=True)
            assert features_hash(x) == d.features_hash == features_hash(offline[n - 1])
            p = float(pol.policy.stop_prob(x[None])[0])
            assert d.act == (p >= 0.5)
            decided += 1
    assert decided >= 3
    # a run whose only answer so far failed is asked too (nothing votes); a real answer without
    # log-probabilities is refused
    from dataclasses import replace

    # one draw of 6, nothing votes: samples and cost 1/6, null share 1, beta_conf P(Beta(1, 1) > 1/2)
    # = 1/2, every count and log feature 0; the confidence tail neutral (rank 1/2)
    x = pol.features(replace(ep, answers=[None], logprob=None, costs=None))
    counts = [1 / 6, 0, 0, 0, 0, 0, 1, 1 / 6, 0.5, 0, 0, 0]
    assert x is not None and np.allclose(x, counts + [0, 0, 0, 0, 0, 0.5, 0], atol=1e-6)
    with pytest.raises(OrchestraceError, match="carry none"):
        pol.features(replace(ep, answers=["cold"], logprob=None, costs=None))


def _cli(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(args)
    cap = capsys.readouterr()
    return int(e.value.code or 0), " ".join((cap.out + cap.err).split())


def test_a_run_without_logprobs_is_refused(
    conf_path: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run.events.jsonl"
    args = [*"run vote --backend scripted --set".split(), 'question="q?"', "--policy", f"stop={conf_path}"]
    code, text = _cli(capsys, [*args, "-o", str(out)])
    assert code != 0 and "OT624" in text and "log-probabilities" in text and "stop-conf" in text
    assert "scripted backend records none" in text and not out.exists()  # refused before the run


def test_a_backend_object_without_logprobs_is_refused_at_the_first_decision(
    conf_path: str, tmp_path: Path
) -> None:
    out = str(tmp_path / "run.events.jsonl")
    with pytest.raises(OrchestraceError, match="carry none") as e:
        run("vote", out, config=_config(0, 1), backend=ScriptedBackend(choices=["cold"]),
            trace_policies={"stop": load_policy(conf_path)})  # fmt: skip
    assert e.value.code == "OT624" and e.value.path == conf_path + ".safetensors"


def test_a_bank_without_logprobs_is_refused(conf_path: str, tmp_path: Path) -> None:
    plain = Bank("plain", [BankQuestion(f"q{i}", "q", "cold", ["cold"] * BUDGET) for i in range(3)])
    path = str(tmp_path / "plain.jsonl")
    save_bank(plain, path)
    with pytest.raises(OrchestraceError, match="log-probabilities") as e:
        eval_stop(path, conf_path, budget=BUDGET)
    assert e.value.code == "OT624" and e.value.path == path


def test_a_policy_file_without_a_feature_set_is_a_counts_policy(tmp_path: Path) -> None:
    """A file written before feature sets had names: loads as ``counts`` and scores as before."""
    cfg = PolicyConfig(hidden=[], budget=4)
    w = np.zeros((1, 12), np.float32)
    w[0, 1] = 2.0  # 2 x top1_share - 1
    StopPolicy(cfg, [(w, np.array([-1.0], np.float32))]).save(str(tmp_path / "old"))
    raw = json.loads((tmp_path / "old.json").read_text())
    del raw["feature_set"]
    (tmp_path / "old.json").write_text(json.dumps(raw))
    pol = StopPolicy.load(str(tmp_path / "old"))
    assert pol.config.feature_set == "counts" and not pol.confidence
    x = prefix_features(["a", "a", "b"], 4)  # no log-probabilities needed
    assert pol.stop_prob(x[None])[0] == pytest.approx(1 / (1 + math.exp(-(2 * 2 / 3 - 1))), abs=1e-6)


def test_weighted_answer_training_rewards_the_weighted_leader() -> None:
    """The pool's reward follows the answer the policy gives: the majority, or the leader of the
    confidence-weighted votes."""
    from orchestrace.learn.stopping.pool import build_pool

    # a (p 0.9), b (p 0.2), b (p 0.2): majority after 3 is b, the weighted leader a (0.9 vs 0.4)
    q = BankQuestion("q", "q", "a", ["a", "b", "b"], logprob=[_lp(0.9), _lp(0.2), _lp(0.2)])
    bank = Bank("one", [q])
    plain = build_pool(bank, 3, perms=1, confidence=True)
    weighted = build_pool(bank, 3, perms=1, confidence=True, weighted=True)
    assert plain.correct[0].tolist() == [True, True, False]
    assert weighted.correct[0].tolist() == [True, True, True]


def test_a_weighted_answer_policy_runs_on_a_weighted_vote(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A policy trained to answer the weighted leader needs the run to answer it too (``--set
    answer=confidence``); such a run returns the weighted leader, not the majority."""
    pol, _ = train_policy(_bank(10), 0.02, budget=BUDGET, iterations=2, confidence=True, weighted=True)
    assert pol.config.answer == "confidence"
    pol.save(str(tmp_path / "w"))
    out = tmp_path / "run.events.jsonl"
    args = [
        *"run vote --backend scripted --set".split(),
        'question="q?"',
        "--policy",
        f"stop={tmp_path / 'w'}",
    ]
    code, text = _cli(capsys, [*args, "-o", str(out)])
    assert code != 0 and "OT623" in text and "--set answer=confidence" in text and not out.exists()
    # cold (mean log-prob -0.2: p 0.819), then hot twice (-1.2: p 0.301 each): weighted cold 0.819
    # against hot 0.602, while the majority is hot
    said = iter(["cold", "hot", "hot"])
    backend = _WithLogprobs(fn=lambda req: next(said))
    cfg = _config(0, 1) | {"budget": 3, "answer": "confidence"}
    res = run("vote", str(out), config=cfg, backend=backend)
    assert res.outcome["final"] == "cold"
    said = iter(["cold", "hot", "hot"])
    backend = _WithLogprobs(fn=lambda req: next(said))
    assert run("vote", str(tmp_path / "m.events.jsonl"), config=_config(0, 1) | {"budget": 3},
               backend=backend).outcome["final"] == "hot"  # fmt: skip
    # with the policy stopping it, the run's answer is the offline weighted answer of its prefix
    from orchestrace.learn.stopping.rules import confidence_answer

    for qi, answers in enumerate((["cold", "hot", "hot"], ["hot", "cold", "warm", "warm"])):
        p = str(tmp_path / f"p{qi}.events.jsonl")
        backend = _WithLogprobs(fn=lambda req, said=iter(answers): next(said))
        res = run("vote", p, config=cfg | {"budget": len(answers)}, backend=backend,
                  trace_policies={"stop": load_policy(str(tmp_path / "w"))})  # fmt: skip
        ep = episode_from_trace(load_one(p), p)
        pt = replay_table(
            BankQuestion("q", "q", ep.gold, ep.answers, logprob=ep.logprob), np.arange(len(ep.answers))
        )
        labels = list(dict.fromkeys(a for a in ep.answers if a is not None))
        assert res.outcome["final"] == labels[confidence_answer("mean")(pt, len(ep.answers))]


def test_train_stop_confidence_writes_a_confidence_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``train stop --confidence`` on a bank with log-probabilities writes a counts+confidence
    policy; on a bank without them it stops before writing anything."""
    with_lp, plain = str(tmp_path / "lp.jsonl"), str(tmp_path / "plain.jsonl")
    save_bank(_bank(20), with_lp)
    save_bank(
        Bank("plain", [BankQuestion(f"q{i}", "q", "cold", ["cold"] * BUDGET) for i in range(20)]), plain
    )
    common = ["--budget", str(BUDGET), "--iterations", "5", "--sweep", "", "--no-aggregate",
              "--target-samples", "0", "--orders", "1", "--confidence"]  # fmt: skip
    code, text = _cli(capsys, ["train", "stop", "--bank", with_lp, "-o", str(tmp_path / "a" / "p"), *common])
    assert code == 0, text
    cfg = json.loads((tmp_path / "a" / "p.json").read_text())
    assert cfg["feature_set"] == "counts+confidence" and len(cfg["features"]) == 12 + len(CONF_FEATURE_NAMES)
    code, text = _cli(capsys, ["train", "stop", "--bank", plain, "-o", str(tmp_path / "b" / "p"), *common])
    assert code != 0 and "OT624" in text and "'plain'" in text and not (tmp_path / "b").exists()
