"""StopVote emits valid traces whose reward is the trace reward; policies round-trip."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.core.validate import validate_trace
from orchestrace.learn.envs.stopvote import StopVoteEnv
from orchestrace.learn.stopping.banks import Bank, BankQuestion, SynthParams, synthetic_bank
from orchestrace.learn.stopping.features import N_FEATURES
from orchestrace.learn.stopping.policy import PolicyConfig, StopPolicy
from orchestrace.learn.stopping.pool import build_pool, rollout
from orchestrace.reward.stop import stop_reward


def small_bank() -> Bank:
    return synthetic_bank(12, SynthParams(samples=10, null_rate=0.1), seed=1)


def play(env: StopVoteEnv, seed: int, stop_at: int) -> tuple[list[np.ndarray], float, dict]:
    obs, info = env.reset(seed=seed)
    seen = [obs]
    while True:
        obs, r, done, trunc, info = env.step(1 if info["samples"] >= stop_at else 0)
        seen.append(obs)
        if done:
            return seen, r, info


def test_episode_trace_is_valid_and_carries_the_reward() -> None:
    env = StopVoteEnv(small_bank(), cost=0.05, budget=10, perms=2, seed=0)
    _, r, info = play(env, seed=5, stop_at=4)
    tr = info["trace"]
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []
    assert info["samples"] == 4
    returns = [e for e in tr.events if e.type == "return"]
    assert len(returns) == 4 and all(e.to == "orchestrator" for e in returns)
    assert [e.attrs["decision"] for e in tr.events if e.type == "orchestrator_decision"][-1] == "stop"
    assert tr.rewards["team"] == (1.0 if info["correct"] else 0.0)
    assert r == pytest.approx(tr.rewards["team"] - 0.05 * 4)
    assert r == pytest.approx(stop_reward(tr, 0.05))
    assert env.observation_space.shape == (N_FEATURES,)


def test_budget_forces_the_stop() -> None:
    env = StopVoteEnv(small_bank(), cost=0.0, budget=10, perms=1, seed=0)
    _, _, info = play(env, seed=1, stop_at=99)
    assert info["samples"] == 10
    assert [f for f in validate_trace(info["trace"]) if f.severity == "error"] == []


def test_same_seed_same_episode() -> None:
    a = play(StopVoteEnv(small_bank(), cost=0.01, budget=10, perms=3, seed=7), seed=11, stop_at=6)
    b = play(StopVoteEnv(small_bank(), cost=0.01, budget=10, perms=3, seed=7), seed=11, stop_at=6)
    assert all(np.array_equal(x, y) for x, y in zip(a[0], b[0], strict=True))
    assert a[1] == b[1]


def test_rollout_rewards_come_from_valid_traces() -> None:
    pool = build_pool(small_bank(), budget=10, perms=2, seed=0)
    rng = np.random.default_rng(0)
    ro = rollout(pool, lambda x: np.full(len(x), 0.3), np.arange(pool.episodes), rng, 0.02, keep_traces=True)
    assert ro.traces is not None and len(ro.traces) == pool.episodes
    for tr, r in zip(ro.traces, ro.reward, strict=True):
        assert [f for f in validate_trace(tr) if f.severity == "error"] == []
        assert stop_reward(tr, 0.02) == pytest.approx(r)


def test_pool_majority_and_ties_follow_first_appearance() -> None:
    bank = Bank("t", [BankQuestion("q", "?", "b", ["a", "b", "b", "a", None, "a"])])
    pool = build_pool(bank, budget=6, perms=1, seed=0)
    # a,b tie: a (seen first) wins; a,b,b: b leads; a,b,b,a (+null) tie again: a; then a leads
    assert pool.correct[0].tolist() == [False, False, True, False, False, False]


def test_unlabelled_questions_score_agreement_with_the_full_budget_majority() -> None:
    # no gold, no per-sample labels: "right" means the majority of all 6 samples (a: 3 votes to 2)
    bank = Bank("t", [BankQuestion("q", "?", None, ["b", "a", "a", "b", None, "a"])])
    assert bank.questions[0].labels == ["b", "a"]
    pool = build_pool(bank, budget=6, perms=1, seed=0)
    # b; b,a tie -> b (seen first); a leads; 2-2 -> b; null; a leads 3-2
    assert pool.answer[0].tolist() == [0, 0, 1, 0, 0, 1]
    assert pool.correct[0].tolist() == [False, False, True, False, False, True]


def test_policy_trained_on_an_unlabelled_bank_does_not_collapse() -> None:
    from orchestrace.learn.stopping.training import train_policy

    labelled = synthetic_bank(200, SynthParams(samples=16), seed=3)
    blind = Bank("blind", [BankQuestion(q.id, q.question, None, q.samples) for q in labelled.questions])
    pool = build_pool(blind, budget=16, perms=4, seed=0)
    assert pool.correct[:, -1].all()  # at the budget the answer is the full-budget majority
    policy, _ = train_policy(blind, 0.01, pool=pool, iterations=40, budget=16)
    stops = policy.stops(pool.feats.reshape(-1, pool.feats.shape[-1])).reshape(pool.feats.shape[:2])
    first = np.where(stops.any(axis=1), stops.argmax(axis=1), pool.feats.shape[1] - 1) + 1
    assert first.mean() > 1.5  # before the fix every sample looked wrong and the policy stopped at once


def test_policy_save_load_round_trip(tmp_path) -> None:
    pol = StopPolicy.init(PolicyConfig(cost=0.02, hidden=[8, 8]), seed=3)
    x = np.random.default_rng(0).normal(size=(20, N_FEATURES)).astype(np.float32)
    st, js = pol.save(str(tmp_path / "p"))
    back = StopPolicy.load(st)
    assert back.config == pol.config
    np.testing.assert_array_equal(back.stop_prob(x), pol.stop_prob(x))
    import torch

    with torch.no_grad():
        tp = torch.sigmoid(pol.torch_actor()(torch.from_numpy(x)).squeeze(-1)).numpy()
    np.testing.assert_allclose(tp, pol.stop_prob(x), rtol=1e-5, atol=1e-6)
    (tmp_path / "bad.safetensors").write_bytes(b"not a tensor file")
    with pytest.raises(OrchestraceError):
        StopPolicy.load(str(tmp_path / "bad.safetensors"))
    with pytest.raises(OrchestraceError):
        StopPolicy.load(str(tmp_path / "missing"))


def test_saved_tensors_have_the_mode_of_their_json_twin(tmp_path) -> None:
    """safetensors' save_file made 0600 files beside 0644 .json twins; both follow the umask now."""
    import os
    import stat

    from orchestrace.learn.rl.rollouts import NumpyPolicy, PolicyMeta

    old = os.umask(0o022)
    try:
        st, js = StopPolicy.init(PolicyConfig(cost=0.02, hidden=[4]), seed=0).save(str(tmp_path / "stop"))
        meta = PolicyMeta("RetryStop", 3, 2, [4])
        nst = NumpyPolicy(meta, [(np.zeros((4, 3)), np.zeros(4)), (np.zeros((2, 4)), np.zeros(2))]).save(
            tmp_path / "retry"
        )
    finally:
        os.umask(old)
    for tensors, twin in [(st, js), (str(nst), str(tmp_path / "retry.json"))]:
        assert stat.S_IMODE(os.stat(tensors).st_mode) == stat.S_IMODE(os.stat(twin).st_mode) == 0o644
    assert NumpyPolicy.load(nst).meta == meta
