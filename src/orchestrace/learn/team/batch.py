"""Recorded traces -> a training batch: rewards and credit computed from the traces, and every LLM
call of the trainable backend with its tokens, behaviour log-probs, adapter and advantage (read
back from the call caches), so a step can be recomputed after the fact."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.io import load_one
from ...core.model import Trace
from ...credit import assign_credit
from ...reward.spec import RewardSpec, compute_rewards, with_rewards
from ...runtime.backends.base import TokenSample
from ...runtime.cache import CallCache, cache_path
from .forks import FORK_METHODS, fork_game, last_samples
from .model import ended
from .program import BadInput, answering


@dataclass
class CallRow:
    """One LLM call of a trace, with what the loss needs."""

    trace: int  # index in the batch's trace list (a resampled call: of the run it forks)
    event: str
    agent: str
    adapter: str
    advantage: float
    sample: TokenSample


@dataclass
class Batch:
    traces: list[Trace]  # with rewards and credit written on
    rewards: list[float]
    rows: list[CallRow]
    key: str  # "<method>/<unit>"


def cut_off(row: CallRow, eos_ids: set[int]) -> bool:
    """The call ran to its token limit: its completion does not end with an end token."""
    return not ended(row.sample.completion_ids, eos_ids)


def charge_cut_off(rows: list[CallRow], eos_ids: set[int], penalty: float) -> None:
    """Every call the token limit cut off pays ``penalty`` off its advantage, whoever made it: the
    team's reward reads only the final answer, so without this a proposer's or solver's cut-off
    answer costs it nothing (DAPO's overlong punishment, per call)."""
    for r in rows:
        if cut_off(r, eos_ids):
            r.advantage -= penalty


def _tokens(path: str, cache: CallCache, ref: str, event: str) -> TokenSample | None:
    key, _, n = ref.rpartition("#")
    hit = cache.get(key, int(n)) if n.isdigit() else None
    ok = (hit or {}).get("outcome", {}).get("ok")
    if not isinstance(ok, dict) or "tokens" not in ok:
        return None
    import msgspec

    try:
        return msgspec.convert(ok["tokens"], TokenSample)
    except msgspec.ValidationError as e:
        raise BadInput(
            "OT696", f"call {ref} of event {event}: bad token record: {e}", path=cache_path(path)
        ) from None


def credit_options(method: str) -> dict[str, str]:
    """Broadcast uses the shared per-question mean baseline (MAPoRL-style), so that it and the
    per-agent methods differ only in how the team's reward is split, not in having a baseline."""
    return {"baseline": "mean"} if method == "broadcast" else {}


def _resampled_rows(i: int, r: float, samples: list[tuple[str, float]]) -> list[CallRow]:
    """The last agent's resampled calls of one run (``samples``: :func:`forks.last_samples`) as
    training rows: each of its samples on the same inputs (the recorded one's row comes from the
    run) is credited against the mean reward of the others, RLOO's baseline within the group."""
    group = [r] + [rk for _, rk in samples]
    rows = []
    for fork, rk in samples:
        tr = load_one(fork)
        e = tr.events[answering(tr)[-1][0]]
        ref = (e.attrs or {}).get("call")
        sample = (
            _tokens(fork, CallCache(cache_path(fork), write=False), ref, e.id)
            if isinstance(ref, str)
            else None
        )
        if sample is None or not sample.completion_ids:
            continue
        baseline = (sum(group) - rk) / (len(group) - 1)
        rows.append(CallRow(i, e.id, e.agent, sample.adapter, rk - baseline, sample))
    return rows


def read_batch(
    paths: list[str], spec: RewardSpec, method: str, unit: str, resamples: int = 1, **options: Any
) -> Batch:
    """Rewards, credit and the LLM calls (tokens, behaviour log-probs, adapter) of recorded traces;
    with ``resamples`` >= 2 (a fork method) also the last agent's resampled calls.

    ``options`` go to the credit method (default: :func:`credit_options`)."""
    options = options or credit_options(method)
    traces = []
    for p in paths:
        tr = load_one(p)
        traces.append(with_rewards(tr, compute_rewards(tr, spec), spec))
    channel = spec.total
    rewards = [float(t.rewards[channel]) for t in traces]
    forked = method in FORK_METHODS
    if resamples > 1 and not forked:
        raise BadInput("OT695", f"resamples is for the fork credit methods, not {method!r}")
    samples = [
        last_samples(p, t, spec, resamples) if resamples > 1 else []
        for p, t in zip(paths, traces, strict=True)
    ]
    if forked:
        method = FORK_METHODS[method]
        credited = [
            assign_credit([t], method, unit, channel=channel, game=fork_game(p, spec, [r for _, r in s]))[0]
            for p, t, s in zip(paths, traces, samples, strict=True)
        ]
    else:
        credited = assign_credit(traces, method, unit, channel=channel, **options)
    key = f"{method}/{unit}"
    rows: list[CallRow] = []
    for i, (p, tr) in enumerate(zip(paths, credited, strict=True)):
        cache = CallCache(cache_path(p), write=False)
        for e in tr.events:
            ref = (e.attrs or {}).get("call")
            if e.type != "return" or e.status == "error" or not isinstance(ref, str):
                continue
            sample = _tokens(p, cache, ref, e.id)
            if sample is None or not sample.completion_ids:
                continue
            rows.append(CallRow(i, e.id, e.agent, sample.adapter, float((e.credit or {})[key]), sample))
        rows += _resampled_rows(i, rewards[i], samples[i])
    if not rows:
        raise BadInput(
            "OT697",
            "the program made no LLM call of the trainable backend in these traces: nothing to train "
            "(is it a program whose agents call an LLM?)",
            path=paths[0] if paths else None,
        )
    return Batch(credited, rewards, rows, key)
