"""Determinism, replay and fork."""

from __future__ import annotations

import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.core.io import load_one
from orchestrace.core.validate import validate_trace
from orchestrace.runtime.cache import CallCache, cache_path
from orchestrace.runtime.runner import backend_spec, fork, fork_group, replay, run, same_trace


def _ok(tr):
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []


@pytest.mark.parametrize("program", ["centralized", "pec", "debate"])
def test_same_seed_gives_byte_identical_traces(tmp_path, program):
    paths = []
    for name in ("a", "b"):
        p = tmp_path / f"{name}.events.jsonl"
        run(program, str(p), backend={"kind": "scripted", "seed": 3}, seed=11, clock="logical")
        paths.append(p)
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert (tmp_path / "a.cache.jsonl").read_bytes() == (tmp_path / "b.cache.jsonl").read_bytes()
    _ok(load_one(paths[0]))


def test_another_seed_gives_another_debate(tmp_path):
    a = run(
        "debate",
        str(tmp_path / "a.events.jsonl"),
        backend={"kind": "scripted", "seed": 3},
        seed=1,
        clock="logical",
    )
    b = run(
        "debate",
        str(tmp_path / "b.events.jsonl"),
        backend={"kind": "scripted", "seed": 3},
        seed=2,
        clock="logical",
    )
    assert [e.content for e in a.trace.events] != [e.content for e in b.trace.events]


def test_replay_reproduces_http_run_byte_for_byte_with_zero_live_calls(tmp_path, server):
    server.plan = {'"hot"': ["429"], '"tall"': ["malformed"]}
    server.answers = {"opposite": "cold", "final answer": "cold"}
    path = tmp_path / "d.events.jsonl"
    rec = run("debate", str(path), backend=backend_spec(base_url=server.url), seed=4, config={"word": "hot"})
    n_live = len(server.requests)
    assert rec.live_calls == n_live > 0
    assert any(e.status == "error" for e in rec.trace.events)
    res, original = replay(str(path))
    assert len(server.requests) == n_live  # the server saw nothing new
    assert res.live_calls == 0 and res.cache_hits == n_live
    assert same_trace(res.trace, original) is None and res.diverged_at is None
    assert path.read_bytes() == open(res.path, "rb").read()  # wall-clock times included


def test_cache_is_content_addressed_and_beside_the_trace(tmp_path):
    path = tmp_path / "c.events.jsonl"
    run("centralized", str(path), backend={"kind": "scripted"}, seed=0)
    assert cache_path(str(path)) == str(tmp_path / "c.cache.jsonl")
    cache = CallCache(cache_path(str(path)), write=False)
    assert len(cache.entries) == 4 and {n for _, n in cache.entries} == {0}
    tr = load_one(path)
    refs = {e.attrs["call"] for e in tr.events if e.type == "return"}
    assert refs == {f"{k}#{n}" for k, n in cache.entries}


@pytest.fixture
def debate(tmp_path):
    path = tmp_path / "deb.events.jsonl"
    run("debate", str(path), backend={"kind": "scripted", "seed": 1}, seed=7)
    return str(path), load_one(path)


def test_fork_shares_prefix_exactly_and_differs_after(debate):
    path, original = debate
    first = next(e for e in original.events if e.type == "return")
    k = original.events.index(first)
    res = fork(path, first.id, "replace:boiling")
    _ok(res.trace)
    assert res.trace.events[:k] == original.events[:k]  # times included
    assert res.diverged_at == k
    assert res.trace.events[k].type == "human_intervention"
    changed = res.trace.events[k + 1]
    assert (changed.type, changed.agent, changed.content) == ("return", first.agent, "boiling")
    assert res.trace.metadata["fork"] == {
        "parent": original.trace_id,
        "at": first.id,
        "index": k,
        "do": "replace:boiling",
        "group": f"{original.trace_id}@{first.id}",
        "fresh_ids_from": len(original.events),
    }
    # the fork keeps the parent's ids before the fork point; after it, ids the parent never used
    assert [e.id for e in res.trace.events[k:]] == [
        f"e{len(original.events) + j}" for j in range(len(res.trace.events) - k)
    ]
    # the replaced answer reached the other debaters in round 2
    heard = [
        e
        for e in res.trace.events
        if e.type == "message" and e.from_ == first.agent and e.content == "boiling"
    ]
    assert len(heard) == 2


def test_sibling_forks_of_one_event_form_a_group_and_replay(debate):
    path, original = debate
    first = next(e for e in original.events if e.type == "return")
    k = original.events.index(first)
    sibs = fork_group(path, first.id, [f"resample:{s}" for s in (1, 2, 3)])
    assert len({r.trace.trace_id for r in sibs}) == 3
    assert len({r.trace.metadata["fork"]["group"] for r in sibs}) == 1
    for r in sibs:
        _ok(r.trace)
        assert r.trace.events[:k] == original.events[:k]
        assert r.trace.metadata["fork"]["parent"] == original.trace_id
        assert r.live_calls >= 1  # the resampled call went to the backend
        again, forked = replay(r.path)  # a fork is itself replayable, offline
        assert again.live_calls == 0 and same_trace(again.trace, forked) is None


def test_resample_forks_are_distinct_draws_and_keep_the_parents_ids(debate):
    """Two resamples of one debater's first answer: with a likely answer both redraws can equal
    the recording, so the rounds after the fork are redrawn with seeds mixed with SEED too."""
    path, original = debate
    first = next(e for e in original.events if e.type == "return")
    k = original.events.index(first)
    a, b = fork_group(path, first.id, ["resample:1", "resample:2"])
    n = len(original.events)
    for r in (a, b):
        assert [e.id for e in r.trace.events[:k]] == [f"e{i}" for i in range(k)]
        # parent e0..e{n-1}; the fork's own events are numbered from e{n}: no id names two events
        assert [e.id for e in r.trace.events[k:]] == [f"e{n + j}" for j in range(len(r.trace.events) - k)]
    caches = [CallCache(cache_path(p), write=False) for p in (path, a.path, b.path)]
    seeds = [{c["request"]["seed"] for c in cache.entries.values()} for cache in caches]
    # the other two round-0 debaters ran in the resampled call's batch: the parent's seeds
    assert len(seeds[1] & seeds[0]) == 2 and len(seeds[2] & seeds[0]) == 2

    # the resampled call is a round-0 call of the parent (the debaters' round-0 requests are the
    # same prompt) with only its seed replaced by the one its --do asked for (1 and 2)
    def unseeded(req: dict) -> dict:
        return {k: v for k, v in req.items() if k != "seed"}

    parent_reqs = [c["request"] for c in caches[0].entries.values()]
    round0 = [
        unseeded(r) for r in parent_reqs if len(r["messages"]) == min(len(q["messages"]) for q in parent_reqs)
    ]
    assert len(round0) == 3 and all(r == round0[0] for r in round0)
    for cache, asked in ((caches[1], 1), (caches[2], 2)):
        (resampled,) = [c["request"] for c in cache.entries.values() if c["request"]["seed"] == asked]
        assert unseeded(resampled) == round0[0]
    # every later call has a seed neither the parent nor the other fork used
    assert len(seeds[1] - seeds[0] - seeds[2]) == len(seeds[1]) - 2 >= 3
    words = [[e.content for e in r.trace.events if e.type == "return"] for r in (a, b)]
    assert words[0] != words[1]


def test_forced_stop_and_policy_swap(debate):
    path, original = debate
    dec = next(
        e for e in original.events if e.type == "orchestrator_decision" and e.attrs["decision"] == "delegate"
    )
    k = original.events.index(dec)
    res = fork(path, dec.id, "stop")
    _ok(res.trace)
    assert res.trace.events[:k] == original.events[:k]
    assert res.outcome["stop_reason"] == "intervention"
    assert [e.type for e in res.trace.events[k:]] == ["human_intervention", "orchestrator_decision"] + [
        "despawn"
    ] * 3
    res = fork(path, dec.id, "delegate:debater_0")
    _ok(res.trace)
    assert res.trace.events[k + 1].attrs["value"] == ["debater_0"]


def test_fork_refuses_what_cannot_apply(debate, tmp_path):
    path, original = debate
    spawn = next(e for e in original.events if e.type == "spawn")
    with pytest.raises(OrchestraceError, match="applies to"):
        fork(path, spawn.id, "stop")
    with pytest.raises(OrchestraceError, match="no event"):
        fork(path, "e9999", "stop")
    with pytest.raises(OrchestraceError, match="unknown intervention"):
        fork(path, spawn.id, "explode")
    dec = next(e for e in original.events if e.type == "orchestrator_decision")
    with pytest.raises(OrchestraceError, match="unknown policy"):
        fork(path, dec.id, "policy:nope")
    with pytest.raises(OrchestraceError, match="'stop' takes no argument"):  # was ignored
        fork(path, dec.id, "stop:extra")
    bare = tmp_path / "bare.events.jsonl"
    bare.write_text(open(path).read())
    with pytest.raises(OrchestraceError, match="cache"):
        replay(str(bare))


@pytest.mark.parametrize("program", ["centralized", "pec", "debate"])
def test_every_example_replays_and_forks(tmp_path, program):
    path = str(tmp_path / f"{program}.events.jsonl")
    rec = run(program, path, backend={"kind": "scripted", "seed": 2}, seed=3)
    res, original = replay(path)
    assert res.live_calls == 0 and same_trace(res.trace, original) is None
    ret = next(e for e in original.events if e.type == "return")
    k = original.events.index(ret)
    f = fork(path, ret.id, "replace:42")
    _ok(f.trace)
    assert f.trace.events[:k] == original.events[:k] and f.trace.events[k + 1].content == "42"
    assert rec.live_calls > 0


def test_drop_a_delegation_message_and_swap_policy(debate):
    path, original = debate
    msg = next(e for e in original.events if e.type == "message" and e.agent == "orchestrator")
    k = original.events.index(msg)
    res = fork(path, msg.id, "drop")
    _ok(res.trace)
    assert res.trace.events[:k] == original.events[:k]
    dropped = res.trace.events[k + 1]
    assert (dropped.type, dropped.to, dropped.content) == ("message", msg.to, "")
    # the debater got an empty prompt: a request never made before, so it went live
    assert res.live_calls >= 1
    dec = original.events[0]
    swapped = fork(path, dec.id, "policy:no-early-stop")
    _ok(swapped.trace)
    assert swapped.trace.events[0].type == "human_intervention"
    assert swapped.trace.events[0].attrs["intervention"] == "policy:no-early-stop"


def test_fork_continues_live_against_the_server_only_where_needed(tmp_path, server):
    path = str(tmp_path / "c.events.jsonl")
    run("centralized", path, backend=backend_spec(base_url=server.url, model="m"), seed=1)
    assert len(server.requests) == 4
    original = load_one(path)
    ret = next(e for e in original.events if e.type == "return" and e.agent == "worker_1")
    res = fork(path, ret.id, "resample:9")
    _ok(res.trace)
    # the prefix and the other workers (same batch) come from the cache; only the resampled call is live
    assert len(server.requests) == 5 and server.requests[-1]["seed"] == 9
    assert res.live_calls == 1 and res.cache_hits == 3
    k = original.events.index(ret)
    assert res.trace.events[:k] == original.events[:k]


def test_replay_of_a_changed_program_fails_fast_instead_of_hanging(debate, tmp_path):
    path, original = debate
    cache = tmp_path / "deb.cache.jsonl"
    lines = cache.read_bytes().splitlines(keepends=True)
    cache.write_bytes(b"".join(lines[:1] + lines[2:]))  # as if the program now asked something else
    with pytest.raises(OrchestraceError, match="OT601|no such call"):  # raised: it did not wait
        replay(path, str(tmp_path / "r.events.jsonl"))
    # even the failed replay left a valid trace behind
    _ok(load_one(tmp_path / "r.events.jsonl"))


def test_runs_that_cancelled_agents_replay_identically(tmp_path):
    from orchestrace.runtime.backends.scripted import ScriptedBackend
    from orchestrace.runtime.orchestrator import Budget, derive_seed

    slow_seed = derive_seed(5, "debater_2", 0)
    b = ScriptedBackend(choices=["cold"], delay=lambda req: 30.0 if req.seed == slow_seed else 0.01)
    p1 = str(tmp_path / "early.events.jsonl")
    run("debate", p1, config={"rounds": 1}, backend=b, seed=5)
    p2 = str(tmp_path / "budget.events.jsonl")
    run("debate", p2, backend=ScriptedBackend(choices=["cold"], delay=5.0), budget=Budget(wall_clock_s=0.3))
    for p, reason in ((p1, "majority"), (p2, "budget:wall_clock")):
        res, original = replay(p)
        assert original.metadata["outcome"]["stop_reason"] == reason
        assert any(e.type == "despawn" and e.attrs["reason"] == "cancelled" for e in original.events)
        assert res.live_calls == 0 and same_trace(res.trace, original) is None


def _recorded_with(tmp_path, edit):
    """A recorded vote run whose runtime metadata (on every record that carries it) ``edit`` changed."""
    import json

    p = str(tmp_path / "r.events.jsonl")
    run("vote", p, backend=backend_spec("scripted"), config={"budget": 2})
    recs = [json.loads(line) for line in open(p)]
    for r in recs:
        if isinstance(r.get("metadata"), dict) and "runtime" in r["metadata"]:
            edit(r["metadata"])
    with open(p, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in recs))
    return p


@pytest.mark.parametrize(
    ("edit", "pointer", "said"),
    [
        # each was an internal error (exit 3): float("abc"), int([1]), dict([1]), an AssertionError
        (lambda m: m["runtime"].update(timeout="abc"), "/metadata/runtime", "Expected `float`, got `str` - at `$.timeout`"),
        (lambda m: m["runtime"].update(seed=[1]), "/metadata/runtime", "Expected `int`, got `array` - at `$.seed`"),
        (lambda m: m["runtime"].update(config=[1]), "/metadata/runtime", "got `array` - at `$.config`"),
        (lambda m: m["runtime"].update(retries=-1), "/metadata/runtime", "Expected `int` >= 0 - at `$.retries`"),
        (lambda m: m["runtime"].update(budget={"tokens": "x"}), "/metadata/runtime", "at `$.budget.tokens`"),
        (lambda m: m.update(fork={"at": "e1", "index": "x", "do": 5}), "/metadata/fork", "at `$.index`"),
    ],
)  # fmt: skip
def test_a_recorded_run_with_values_of_the_wrong_type_cannot_be_replayed(tmp_path, edit, pointer, said):
    p = _recorded_with(tmp_path, edit)
    with pytest.raises(OrchestraceError) as e:
        replay(p, str(tmp_path / "out.events.jsonl"))
    assert (e.value.code, e.value.exit_code, e.value.path, e.value.pointer) == ("OT606", 1, p, pointer)
    assert said in e.value.message


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"timeout": -1.0}, "--timeout must be a finite number of seconds > 0"),  # every call timed out
        ({"timeout": float("nan")}, "--timeout must be a finite number of seconds > 0"),  # never timed out
        ({"retries": -1}, "--retries must be >= 0, got -1"),  # AssertionError, exit 3
    ],
)
def test_run_limits_no_run_can_use_are_refused(tmp_path, kw, said):
    with pytest.raises(OrchestraceError, match=said) as e:
        run("vote", str(tmp_path / "r.events.jsonl"), backend=backend_spec("scripted"), **kw)
    assert e.value.code == "OT010"


def test_a_negative_budget_is_refused_not_an_empty_run(tmp_path):
    from orchestrace.runtime.orchestrator import Budget

    # the run stopped before it began: one event, "stop: budget:tokens", exit 0
    with pytest.raises(OrchestraceError, match="--budget-tokens must be a finite number > 0, got -5"):
        run(
            "vote",
            str(tmp_path / "r.events.jsonl"),
            backend=backend_spec("scripted"),
            budget=Budget(tokens=-5),
        )
