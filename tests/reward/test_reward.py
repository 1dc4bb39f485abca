import math

import pytest
from tracekit import ev, mk, swarm

from orchestrace.core.errors import OrchestraceError
from orchestrace.core.validate import validate_trace
from orchestrace.reward import (
    Caps,
    Hooks,
    RewardSpec,
    Schedule,
    Term,
    apply_rewards,
    compute_rewards,
    critical_steps,
    load_spec,
    r1_team,
    r2_agent,
    r4_process,
    r5_tool,
    r6_verifier,
    r7_orchestration,
    spec_from_dict,
)


def test_critical_steps_kimi_worked_example():
    # spec §2.3: stages 1, (1 + {6, 9, 4, 7}), 1 -> total 29, critical 12; balanced {7,7,6,6} -> 10
    assert validate_trace(swarm([6, 9, 4, 7])) == []
    assert critical_steps(swarm([6, 9, 4, 7])) == (12.0, 29.0)
    assert critical_steps(swarm([7, 7, 6, 6])) == (10.0, 29.0)
    out = r7_orchestration(swarm([6, 9, 4, 7]))
    assert out.channels["speedup"] == pytest.approx(29 / 12)


def test_critical_steps_without_edges_chains_each_agent():
    tr = mk([ev("a", 0, "message", "x"), ev("b", 1, "message", "y"), ev("c", 2, "message", "x")])
    assert critical_steps(tr) == (2.0, 3.0)


def test_r_parallel_and_r_finish_kimi_forms():
    tr = swarm([2, 2, 2, 2], ok=[True, True, True, False])
    out = r7_orchestration(tr, parallel_cap=8)
    assert out.channels["r_parallel"] == 0.5  # 4 useful sub-agents / cap 8
    assert out.channels["r_finish"] == 0.75  # 3 of 4 returned successfully
    assert out.channels["split_correctness"] == 0.75
    assert out.channels["aggregation_quality"] == 1.0  # every ok return reaches the aggregate
    term = r7_orchestration(tr, finish_form="terminated")
    assert term.channels["r_finish"] == 1.0  # all 4 reached a return
    spd = r7_orchestration(tr, parallel_form="speedup")
    # by hand: 11 steps (d1, d2 with its 4 spawns, 4 x 2 sub-agent steps, agg); the critical path
    # d1, d2, 2 steps of one sub-agent, agg is 5 of them
    assert spd.channels["r_parallel"] == pytest.approx(1 - 5 / 11)


def test_spurious_parallelism_earns_nothing():
    # 8 spawned sub-agents that never act: no useful sub-agent, no finish
    es = [ev("d", 0, "orchestrator_decision", "main")]
    es += [ev(f"s{i}", 1, "spawn", "main", to=f"sub{i}") for i in range(8)]
    tr = mk(es, [("d", f"s{i}", "spawn") for i in range(8)], rewards={"team": 1.0})
    out = compute_rewards(tr)
    assert out.channels["r_parallel"] == 0.0
    assert out.channels["r_finish"] == 0.0
    # a spawn flood with trivial sub-agents is capped at max_spawn and gated by finish rate
    many = swarm([1] * 20, ok=[True] * 10 + [False] * 10)
    spec = RewardSpec(terms=[Term(channel="r_parallel")])
    res = compute_rewards(many, spec)
    assert res.channels["r_parallel"] == pytest.approx(1.0 * 0.5)  # min(20, 8)/8 * finish 10/20


def test_tool_spam_duplicate_and_cap():
    es = [
        ev("c1", 0, "tool_call", "a", tool="s", content="q", call_id="1"),
        ev("r1", 1, "tool_result", "s", tool="s", call_id="1", status="ok"),
        ev("c2", 2, "tool_call", "a", tool="s", content="q", call_id="2"),
        ev("r2", 3, "tool_result", "s", tool="s", call_id="2", status="ok"),
        ev("c3", 4, "tool_call", "a", tool="s", content="other", call_id="3"),
        ev("r3", 5, "tool_result", "s", tool="s", call_id="3", status="error"),
        ev("c4", 6, "tool_call", "a", tool="s", content="never answered"),
    ]
    tr = mk(es, rewards={"team": 0})
    out = r5_tool(tr)
    # +1 (ok), -0.5 (duplicate), -1 (error), -1 (no result) -> mean -1.5/4
    assert out.per_event["tool"] == {"c1": 1.0, "c2": -0.5, "c3": -1.0, "c4": -1.0}
    assert out.channels["tool"] == pytest.approx(-1.5 / 4)
    assert out.channels["tool_spam"] == 1
    capped = r5_tool(tr, max_calls_per_agent=1, penalize_duplicates=False)
    assert capped.per_event["tool"] == {"c1": 1.0, "c2": -0.5, "c3": -0.5, "c4": -0.5}


def test_message_padding_cap_and_duplicates():
    es = [
        ev("m1", 0, "message", "a", content="x", tokens_out=100, attrs={"judge_score": 1.0}),
        ev("m2", 1, "message", "a", content="pad", tokens_out=400, attrs={"judge_score": 1.0}),
        ev("m3", 2, "message", "a", content="x", tokens_out=10, attrs={"judge_score": 1.0}),
    ]
    out = r6_verifier(mk(es), max_message_tokens=200)
    assert out.per_event["judge"] == {"m1": 1.0, "m2": 0.5, "m3": 0.0}
    assert out.channels["judge"] == pytest.approx(0.5)


def test_r6_is_the_judge_channel_and_its_former_name_still_reads():
    """R6 was the channel ``verifier``, a word the spec's [hooks] verifier (which scores R1 team)
    also uses: a reward table showed verifier 0 beside team 1. It is ``judge`` now; the former name
    still works in a spec term and for credit, and a trace rewarded before is not left with both."""
    from orchestrace.credit import assign_credit
    from orchestrace.reward import spec_from_dict

    es = [ev("m1", 0, "message", "a", content="x", attrs={"judge_score": 0.8})]
    tr = mk(es, rewards={"team": 1.0})
    rewarded = apply_rewards(tr)
    assert rewarded.rewards["judge"] == pytest.approx(0.8) and "verifier" not in rewarded.rewards
    assert rewarded.metadata["reward_channels"]["judge"]["family"] == "R6"
    old_spec = spec_from_dict({"terms": [{"channel": "verifier", "weight": 2.0}]})
    assert compute_rewards(tr, old_spec).channels["hybrid"] == pytest.approx(1.6)
    (credited,) = assign_credit([rewarded], "broadcast", "agent", channel="verifier")
    assert credited.metadata["credit"]["broadcast/agent"]["units"]["a"] == pytest.approx(0.8)
    # a trace `reward` wrote before the rename: R6 under the former name, recorded as R6
    before = mk(es, rewards={"team": 1.0, "verifier": 0.8})
    before.metadata = {"reward_channels": {"verifier": {"family": "R6", "annealed": False}}}
    again = apply_rewards(before)
    assert "verifier" not in again.rewards and again.rewards["judge"] == pytest.approx(0.8)
    # a value the trace recorded itself under that name is kept
    own = apply_rewards(mk(es, rewards={"team": 1.0, "verifier": 0.3}))
    assert own.rewards["verifier"] == 0.3 and own.rewards["judge"] == pytest.approx(0.8)


def test_r1_r2_r4_sources():
    tr = mk(
        [
            ev("a", 0, "message", "x", attrs={"process_score": 0.2}),
            ev("b", 1, "message", "y", status="error", attrs={"process_score": 0.6}),
            ev("c", 2, "message", "y"),
        ],
        rewards={"team": 0.7},
    )
    assert r1_team(tr).channels == {"team": 0.7}
    assert r1_team(tr, verifier=lambda t: 0.25).channels == {"team": 0.25}
    assert r2_agent(tr).channels == {"agent/x": 1.0, "agent/y": 0.5}
    assert r4_process(tr).channels["process"] == pytest.approx(0.4)
    assert r4_process(tr, prm=lambda e, t: 1.0 if e.agent == "y" else None).channels["process"] == 1.0
    with pytest.raises(OrchestraceError):
        r1_team(mk([ev("a", 0, "message", "x")]))


@pytest.mark.parametrize(
    ("sched", "step", "want"),
    [
        (Schedule(kind="linear", start=1, end=0, steps=1000), 500, 0.5),
        (Schedule(kind="linear", start=1, end=0, steps=1000), 5000, 0.0),
        (Schedule(kind="cosine", start=1, end=0, steps=1000), 250, 0.5 * (1 + math.cos(math.pi / 4))),
        (Schedule(kind="cosine", start=1, end=0, steps=1000), 1000, 0.0),
        (Schedule(kind="step", boundaries=[10, 20], values=[1.0, 0.5, 0.0]), 10, 0.5),
        (Schedule(kind="step", boundaries=[10, 20], values=[1.0, 0.5, 0.0]), 9, 1.0),
        (Schedule(kind="constant", start=0.3), 99, 0.3),
    ],
)
def test_schedules(sched, step, want):
    assert sched(step) == pytest.approx(want)


def test_bad_schedule_rejected():
    with pytest.raises(ValueError):
        Schedule(kind="step", boundaries=[1], values=[1.0])


def test_toml_spec_hybrid_annealed(tmp_path):
    p = tmp_path / "reward.toml"
    p.write_text(
        """
total = "hybrid"
[[terms]]
channel = "team"
[[terms]]
channel = "r_parallel"
weight = 0.4
schedule = { kind = "linear", start = 1.0, end = 0.0, steps = 100 }
[[terms]]
channel = "r_finish"
weight = 0.2
[caps]
max_spawn = 4
gate_parallel_by_finish = false
"""
    )
    spec = load_spec(p)
    tr = swarm([2, 2, 2, 2], ok=[True, True, True, False], team=1.0)
    # r_parallel = 4/4 = 1, r_finish = 0.75
    assert compute_rewards(tr, spec, step=0).channels["hybrid"] == pytest.approx(1 + 0.4 + 0.2 * 0.75)
    assert compute_rewards(tr, spec, step=50).channels["hybrid"] == pytest.approx(1 + 0.2 + 0.15)
    assert compute_rewards(tr, spec, step=100).channels["hybrid"] == pytest.approx(1 + 0.15)
    out = apply_rewards(tr, spec, step=50)
    assert validate_trace(out) == []
    assert out.metadata["reward_channels"]["r_parallel"] == {"family": "R7", "annealed": True}
    assert out.metadata["reward_channels"]["hybrid"]["family"] == "R8"


def test_budget_cap_zeroes_outcome():
    tr = swarm([6, 9, 4, 7])
    spec = RewardSpec(caps=Caps(max_critical_steps=11))
    assert compute_rewards(tr, spec).channels["hybrid"] == 0.0
    assert compute_rewards(tr).channels["hybrid"] == 1.0


def test_bad_specs(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[[terms]]\nchanel = 'team'\n")
    with pytest.raises(OrchestraceError, match="bad reward spec"):
        load_spec(p)
    p.write_text("terms = [")
    with pytest.raises(OrchestraceError, match="TOML"):
        load_spec(p)
    with pytest.raises(OrchestraceError, match="cannot import"):
        compute_rewards(swarm([1]), RewardSpec(hooks=Hooks(verifier="nope.mod:fn")))


@pytest.mark.parametrize(
    ("toml", "where"),
    [
        # each was taken: a crash (exit 3), a null or silently wrong total, or a lost channel
        (b'[[terms]]\nchannel = "team"\n\xff\n', "not UTF-8: byte 0xff"),
        (b'[[terms]]\nchannel = "team"\nweight = nan\n', "finite - at `$.terms[0].weight`"),
        (b'[[terms]]\nchannel = "team"\nweight = 1e400\n', "finite - at `$.terms[0].weight`"),
        (b'[[terms]]\nchannel = "team"\nschedule = { kind = "step", boundaries = [1], values = [1.0, -inf] }\n',
         "finite - at `$.terms[0].schedule.values[1]`"),
        (b"[caps]\nmax_spawn = -3\n", ">= 0 - at `$.caps.max_spawn`"),
        (b"[caps]\nmax_critical_steps = -1\n", ">= 0.0 - at `$.caps.max_critical_steps`"),
        (b'parallel_form = "bogus"\n', "Invalid enum value 'bogus' - at `$.parallel_form`"),
        (b'total = "team"\n', "total 'team' would overwrite a computed channel"),
        (b'total = "r_parallel"\n', "total 'r_parallel' would overwrite"),
        (b'total = "agent/a"\n', "total 'agent/a' would overwrite"),
        (b'total = ""\n', "a channel name is needed - at `$.total`"),
        # a hook that is no string reached resolve(): AttributeError, exit 3
        (b"[hooks]\nverifier = 5\n", "got 5 - at `$.hooks.verifier`"),
        (b"[hooks]\nrubrics = { planner = [1] }\n", "got [1] - at `$.hooks.rubrics.planner`"),
        (b'[hooks]\njudge = "no_colon"\n', "got 'no_colon' - at `$.hooks.judge`"),
        # R1 wrote the outcome under it, then R4 / R6 / R2 replaced it: a silently wrong total
        (b'team_channel = "process"\n', "team_channel 'process' is a computed channel"),
        (b'team_channel = "agent/a"\n', "team_channel 'agent/a' is a computed channel"),
        (b'team_channel = " "\n', "a channel name is needed - at `$.team_channel`"),
    ],
)  # fmt: skip
def test_spec_mistakes_are_ot403_with_the_place(tmp_path, toml, where):
    p = tmp_path / "spec.toml"
    p.write_bytes(toml)
    with pytest.raises(OrchestraceError) as ei:
        load_spec(p)
    assert ei.value.code == "OT403" and ei.value.path == str(p)
    assert where in ei.value.message
    assert ei.value.line == (3 if b"\xff" in toml else None)


def test_a_spec_with_a_byte_order_mark_is_read(tmp_path):
    # Windows editors write one; tomllib refused it as "Invalid statement (at line 1, column 1)"
    p = tmp_path / "spec.toml"
    p.write_bytes(b'\xef\xbb\xbftotal = "mix"\n[caps]\nmax_spawn = 3\n')
    spec = load_spec(p)
    assert (spec.total, spec.caps.max_spawn) == ("mix", 3)


def test_a_team_channel_of_its_own_name_is_read():
    tr = mk([ev("a", 0, "message", "o")], rewards={"success": 0.25})
    out = compute_rewards(tr, spec_from_dict({"team_channel": "success", "terms": [{"channel": "success"}]}))
    assert out.channels["success"] == 0.25 and out.channels["hybrid"] == 0.25


def test_a_term_may_name_a_channel_the_trace_recorded():
    # the hybrid read only the computed channels: a recorded judge_score of 0.8 counted 0
    tr = mk([ev("a", 0, "message", "o")], rewards={"team": 1.0, "judge_score": 0.8, "tool": 5.0})
    spec = RewardSpec(
        terms=[Term(channel="team"), Term(channel="judge_score", weight=0.5), Term(channel="tool")]
    )
    out = compute_rewards(tr, spec)
    # team 1 + 0.5 x 0.8 (recorded) + tool: computed (no tool calls: 0) wins over the recorded 5
    assert out.channels["tool"] == 0.0 and out.channels["hybrid"] == pytest.approx(1.4)
    # a channel neither computed nor recorded (a typo: "teamm") counted 0 and dropped the team reward
    with pytest.raises(OrchestraceError, match="term channel 'teamm' is neither computed nor recorded") as ei:
        compute_rewards(tr, RewardSpec(terms=[Term(channel="teamm"), Term(channel="r_finish", weight=0.1)]))
    assert ei.value.code == "OT403" and "team" in ei.value.message
    assert compute_rewards(tr, RewardSpec(terms=[Term(channel="agent/nobody")])).channels["hybrid"] == 0.0


@pytest.mark.parametrize(
    ("hook", "says"),
    [
        (
            "os:getcwd",
            "reward hook 'os:getcwd' failed: TypeError",
        ),  # raises: was exit 3, "a bug in orchestrace"
        ("builtins:str", "'builtins:str' returned \"Trace("),  # not a number: was a ValueError, exit 3
        ("os:sep", "reward hook 'os:sep' is a str, not a function"),
    ],
)
def test_a_named_hook_that_fails_is_named(hook, says):
    tr = mk([ev("a", 0, "message", "o")], rewards={"team": 1.0})
    with pytest.raises(OrchestraceError) as ei:
        compute_rewards(tr, RewardSpec(hooks=Hooks(verifier=hook)))
    assert ei.value.code == "OT401" and says in ei.value.message
