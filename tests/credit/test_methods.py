"""Advantages and credits against hand-computed numbers."""

import math

import pytest
from tracekit import centralized, ev, flat_team, mk

from orchestrace.core.errors import OrchestraceError
from orchestrace.core.validate import validate_trace
from orchestrace.credit import (
    REST,
    RemovalGame,
    assign_credit,
    compute_credit,
    iter_credit,
    partition_gap,
    unit_keys,
)


def runs(rewards, task="q", agents=("a", "b")):
    out = []
    for g, r in enumerate(rewards):
        es = [ev(f"e{k}", k, "message", a, content=f"{g}-{k}") for k, a in enumerate(agents)]
        out.append(mk(es, rewards={"team": r}, task_id=task, trace_id=f"t{g}"))
    return out


def credits(traces, key):
    """Credits of every event, trace after trace, flattened (pytest.approx needs flat lists)."""
    return [e.credit[key] for t in traces for e in t.events]


def flat(rows):
    return [x for row in rows for x in row]


def test_grpo_hand_computed():
    trs = runs([1, 0, 0, 1]) + runs([1.0], task="other")
    out = assign_credit(trs, "grpo", "agent")
    sd = math.sqrt(1 / 3)  # unbiased std of [1, 0, 0, 1]
    a = 0.5 / (sd + 1e-6)
    assert credits(out, "grpo/agent")[:8] == pytest.approx(flat([[a, a], [-a, -a], [-a, -a], [a, a]]))
    assert credits(out, "grpo/agent")[8:] == pytest.approx([1.0, 1.0])  # singleton group: mu 0, sigma 1
    assert all(validate_trace(t) == [] for t in out)


def test_drmas_hand_computed():
    # trace 1 (R=1): agent a speaks twice; trace 2 (R=0): a once, b once.
    t1 = mk([ev("x", 0, "message", "a"), ev("y", 1, "message", "a")], rewards={"team": 1}, trace_id="t1")
    t2 = mk([ev("x", 0, "message", "a"), ev("z", 1, "message", "b")], rewards={"team": 0}, trace_id="t2")
    out = assign_credit([t1, t2], "drmas", "message")
    # Y_a = [1, 1, 0]: mu 2/3, unbiased sd sqrt(1/3); Y_b = [0] singleton: mu 0, sigma 1
    sd = math.sqrt(1 / 3)
    assert credits(out, "drmas/message") == pytest.approx(
        flat([[(1 / 3) / (sd + 1e-6)] * 2, [(-2 / 3) / (sd + 1e-6), 0.0]])
    )
    dr = assign_credit([t1, t2], "drmas", "message", variant="drgrpo")
    assert credits(dr, "drmas/message") == pytest.approx([1 / 3, 1 / 3, -2 / 3, 0.0])
    # per-agent reward channel (R2) at the agent unit
    t1r = mk(t1.events, rewards={"team": 1, "agent/a": 0.2}, trace_id="t1")
    t2r = mk(t2.events, rewards={"team": 0, "agent/a": 0.6, "agent/b": 0.5}, trace_id="t2")
    ag = assign_credit([t1r, t2r], "drmas", "agent", reward="agent")
    s = math.sqrt(0.08)  # std of [0.2, 0.6]
    assert credits(ag, "drmas/agent") == pytest.approx(
        flat([[-0.2 / (s + 1e-6)] * 2, [0.2 / (s + 1e-6), 0.5]])
    )


def c3_tree():
    """K = 8, fanout [2, 4]: reasoner R1 -> actor rewards [1, 0, 1, 1]; R2 -> [0, 0, 1, 0]."""
    trs = []
    for r_i, leaves in (("R1", [1, 0, 1, 1]), ("R2", [0, 0, 1, 0])):
        for k, rew in enumerate(leaves):
            es = [
                ev("q", 0, "message", "reasoner", role="reasoner", content=r_i),
                ev("a", 1, "message", "actor", role="actor", content=f"{r_i}-answer-{k}"),
            ]
            trs.append(mk(es, [("q", "a", "message")], rewards={"team": rew}, trace_id=f"{r_i}{k}"))
    return trs


def test_c3_hand_computed():
    out = assign_credit(c3_tree(), "c3", "message")
    got = credits(out, "c3/message")
    # reasoner: r(R1) = 0.75, r(R2) = 0.25 -> A = +-0.5
    # actor under R1: reward 1 -> 1 - 2/3 = 1/3; reward 0 -> 0 - 1 = -1
    # actor under R2: reward 1 -> 1 - 0 = 1;   reward 0 -> 0 - 1/3 = -1/3
    want = [
        [0.5, 1 / 3],
        [0.5, -1],
        [0.5, 1 / 3],
        [0.5, 1 / 3],
        [-0.5, -1 / 3],
        [-0.5, -1 / 3],
        [-0.5, 1],
        [-0.5, -1 / 3],
    ]
    assert got == pytest.approx(flat(want))
    # no sibling alternative -> A = 0
    alone = assign_credit(c3_tree()[:1], "c3", "message")
    assert credits(alone, "c3/message") == [0.0, 0.0]
    # value-assisted with alpha = 1 and Q = node reward equals reward_only
    va = assign_credit(c3_tree(), "c3", "message", variant="value_assisted", q=lambda tr, u, uid: 0.0)
    assert credits(va, "c3/message")[:2] == pytest.approx([0.75, 1.0])


def test_coma_baseline():
    es = [
        ev(
            "d",
            0,
            "orchestrator_decision",
            "main",
            attrs={"q": 1.0, "q_alternatives": [{"p": 0.5, "q": 1.0}, [0.5, 0.2]]},
        ),
        ev("d2", 1, "orchestrator_decision", "main"),
    ]
    out = assign_credit([mk(es, rewards={"team": 1})], "coma", "orchestrator")
    assert credits(out, "coma/orchestrator") == pytest.approx([0.4, 0.0])
    assert out[0].metadata["credit"]["coma/orchestrator"]["units_without_q"] == 1


def test_broadcast_cannot_blame_but_counterfactual_can():
    tr = flat_team(team=0.0, bad="c")
    b = assign_credit([tr], "broadcast", "agent")[0]
    assert len({e.credit["broadcast/agent"] for e in b.events if e.agent in "abc"}) == 1  # identical
    for method in ("shapley", "loo"):
        out = assign_credit([tr], method, "agent")[0]
        c = {e.agent: e.credit[f"{method}/agent"] for e in out.events}
        assert c == pytest.approx({"a": 0.0, "b": 0.0, "c": -1.0, "judge": 0.0})
    # success: v(S) = (k + [judge in S and k >= 1]) / 4 with k = |S & {a,b,c}| (the verdict needs a message).
    # judge's marginal is 1/4 when it comes after one of a, b, c (prob. 3/4): phi = 3/16; others (1 - 3/16)/3
    ok = assign_credit([flat_team(team=1.0, bad="none")], "shapley", "agent")[0]
    got = {e.agent: e.credit["shapley/agent"] for e in ok.events}
    assert got == pytest.approx({"a": 13 / 48, "b": 13 / 48, "c": 13 / 48, "judge": 3 / 16})


def test_orchestrated_failure_blame():
    tr = centralized(team=0.0)
    sh = {
        e.agent: e.credit["shapley/agent"]
        for e in assign_credit([tr], "shapley", "agent")[0].events
        if e.agent != "search"
    }
    # the error lives iff main (which spawned c) and c are both present: a unanimity game worth -1
    assert sh == pytest.approx({"main": -0.5, "a": 0.0, "b": 0.0, "c": -0.5})
    tool = assign_credit([tr], "loo", "tool")[0]
    assert {e.id: e.credit["loo/tool"] for e in tool.events if e.type.startswith("tool")} == {
        "tc_c": -1.0,
        "tr_c": -1.0,
    }


def test_removal_only_downstream():
    tr = centralized(team=1.0, c_fails=False)
    u = unit_keys(tr, "agent")
    g = RemovalGame(tr, u)
    import numpy as np

    mask = np.array([p != "a" for p in g.players])
    kept = g.kept(mask[None, :])[:, 0]
    gone = {e.id for e, k in zip(tr.events, kept, strict=True) if not k}
    assert gone == {"m_a", "r_a"}  # agg survives: it also depends on d1, r_b, r_c
    no_main = np.array([p != "main" for p in g.players])
    assert not g.kept(no_main[None, :]).any()  # everything is downstream of the orchestrator
    # A = all 12 events feed the terminal aggregate, so removing a's 2 events loses 2/12 of R
    assert g(mask) == pytest.approx(10 / 12)


@pytest.mark.parametrize(
    "unit", ["team", "orchestrator", "role", "agent", "turn", "message", "tool", "token"]
)
@pytest.mark.parametrize("method", ["broadcast", "grpo", "loo", "shapley"])
def test_exact_partition_sums(method, unit):
    trs = [centralized(team=0.8, c_fails=True), centralized(team=0.2, c_fails=False)]
    trs[1] = mk(
        trs[1].events, [(x.src, x.dst, x.type) for x in trs[1].edges], rewards={"team": 0.2}, trace_id="t2"
    )
    out = assign_credit(trs, method, unit, partition=True)
    for t in out:
        meta = t.metadata["credit"][f"{method}/{unit}"]
        assert partition_gap(t, f"{method}/{unit}", meta["target"]) == pytest.approx(0.0, abs=1e-9)
        if method in ("loo", "shapley"):
            assert meta["target"] == t.rewards["team"]
        assert validate_trace(t) == []


def test_partition_reports_residual_and_refuses_drmas():
    tr = centralized(team=0.0)  # the error penalty makes v(N) = -1 != R = 0
    out = assign_credit([tr], "shapley", "agent", partition=True)[0]
    assert out.metadata["credit"]["shapley/agent"]["residual"] == pytest.approx(1.0)
    unpart = assign_credit([tr], "shapley", "agent")[0]
    assert partition_gap(unpart, "shapley/agent") == pytest.approx(-1.0)
    with pytest.raises(OrchestraceError, match="partition"):
        assign_credit([tr], "drmas", "agent", partition=True)


def test_units_partition_every_event():
    tr = centralized()
    assert unit_keys(tr, "agent").keys[tr.events.index(next(e for e in tr.events if e.id == "tr_c"))] == "c"
    orch = unit_keys(tr, "orchestrator")
    assert orch.ids == ["d1"] and orch.keys[:4] == ["d1"] * 4 and orch.keys[-1] == REST
    tool = unit_keys(tr, "tool")
    assert tool.ids == ["tc_c"]
    tok = unit_keys(tr, "token")
    assert tok.size["m_b"] == 6.0 and tok.size["d1"] == 1.0  # content without tokens_out counts 1
    turn = unit_keys(tr, "turn")
    assert set(turn.keys) == {"turn:0"}
    assert unit_keys(tr, "role").ids == ["orchestrator", "worker", "searcher"]


def test_token_level_is_per_token():
    tr = centralized(team=1.0, c_fails=False)
    out = assign_credit([tr], "shapley", "token")
    meta = out[0].metadata["credit"]["shapley/token"]
    per_tok = {e.id: e.credit["shapley/token"] for e in out[0].events}
    assert sum(meta["sizes"][k] * per_tok[k] for k in meta["sizes"]) + meta["units"].get(
        REST, 0.0
    ) == pytest.approx(1.0)


def test_unknown_method_and_unit():
    with pytest.raises(OrchestraceError, match="unknown credit method"):
        compute_credit([centralized()], "magic", "agent")
    with pytest.raises(OrchestraceError, match="unknown credit unit"):
        compute_credit([centralized()], "grpo", "paragraph")
    with pytest.raises(OrchestraceError, match="no rewards.team"):
        compute_credit([mk([ev("a", 0, "message", "x")])], "grpo", "agent")


@pytest.mark.parametrize("method", ["shapley", "loo", "difference"])
def test_counterfactual_methods_refuse_a_missing_channel(method):
    # the removal game read a missing channel as R = 0: every credit 0, exit 0
    tr = mk(
        [ev("a", 0, "message", "x"), ev("b", 1, "message", "y")],
        [("a", "b", "message")],
        rewards={"team": 1.0},
    )
    with pytest.raises(OrchestraceError, match="no rewards.nope") as ei:
        compute_credit([tr], method, "agent", channel="nope")
    assert ei.value.code == "OT411"
    assert compute_credit([tr], method, "agent")[0][1].values != {"x": 0.0, "y": 0.0}


def test_drmas_refuses_an_unknown_option_value():
    # reward=nope was read as reward=team, variant=nope as drmas
    for opt in ({"reward": "nope"}, {"variant": "nope"}):
        with pytest.raises(OrchestraceError, match="unknown drmas") as ei:
            compute_credit([centralized()], "drmas", "agent", **opt)
        assert ei.value.code == "OT412"


def test_copy_by_default_inplace_on_request():
    tr = centralized(team=1.0)
    out = assign_credit([tr], "grpo", "agent")[0]
    a = 1.0 / (1.0 + 1e-6)  # singleton group: (R - 0) / (1 + eps)
    assert tr.events[0].credit is None and tr.metadata is None and out.events[0].credit == {"grpo/agent": a}
    same = assign_credit([tr], "grpo", "agent", inplace=True)[0]
    assert same is tr and tr.events[0].credit == {"grpo/agent": a}


def test_an_unknown_option_name_is_refused():
    # samplse=64 was ignored and Shapley ran with its default 256 samples
    with pytest.raises(OrchestraceError, match="unknown credit option 'samplse'") as ei:
        compute_credit([centralized()], "shapley", "agent", samplse=64)
    assert ei.value.code == "OT413" and "samples" in ei.value.message
    assert compute_credit([centralized()], "loo", "agent", seed=3)  # an option another method reads is fine


def test_coma_honours_the_channel():
    """--channel was ignored by coma (issue 34's README walk): a Q keyed by channel is read for the
    channel asked; a plain number is the team channel's, so another channel finds no Q there;
    a malformed alternative (a string, a missing key: an internal error before) is no Q."""
    q = {"team": 1.0, "judge": 0.6}
    alts = [{"p": 0.5, "q": {"team": 1.0, "judge": 0.1}}, [0.5, {"team": 0.2, "judge": 0.5}]]
    es = [
        ev("d", 0, "orchestrator_decision", "main", attrs={"q": q, "q_alternatives": alts}),
        ev("d2", 1, "orchestrator_decision", "main", attrs={"q": 2.0, "q_alternatives": [[1.0, 1.5]]}),
        ev(
            "d3", 2, "orchestrator_decision", "main", attrs={"q": 1.0, "q_alternatives": [{"p": "x", "q": 1}]}
        ),
        ev("d4", 3, "orchestrator_decision", "main", attrs={"q": 1.0, "q_alternatives": [{"q": 1}]}),
    ]
    trace = mk(es, rewards={"team": 1, "judge": 0.5})
    team = assign_credit([trace], "coma", "orchestrator")
    assert credits(team, "coma/orchestrator") == pytest.approx([0.4, 0.5, 0.0, 0.0])
    assert team[0].metadata["credit"]["coma/orchestrator"]["units_without_q"] == 2
    judge = assign_credit([trace], "coma", "orchestrator", channel="judge")
    assert credits(judge, "coma/orchestrator") == pytest.approx([0.3, 0.0, 0.0, 0.0])  # 0.6 - 0.3
    assert judge[0].metadata["credit"]["coma/orchestrator"]["units_without_q"] == 3


@pytest.mark.parametrize(
    ("method", "opts", "said"),
    [
        # equal rewards in a group: sd = 0, so (R - mu) / (sd + eps) divided by zero (exit 3)
        ("grpo", {"eps": 0.0}, "eps must be a finite number > 0, got 0.0"),
        ("drmas", {"eps": -1.0}, "eps must be a finite number > 0, got -1.0"),
        ("grpo", {"eps": math.inf}, "eps must be a finite number > 0, got inf"),
        # NaN made every value_assisted credit NaN, written to the trace without a word
        ("c3", {"alpha": math.nan}, "alpha must be a finite number, got nan"),
    ],
)
def test_numeric_options_out_of_range_are_refused(method, opts, said):
    with pytest.raises(OrchestraceError, match=said) as ei:
        compute_credit(runs([1.0, 1.0]), method, "agent", **opts)
    assert ei.value.code == "OT412"


def test_value_hooks_that_answer_the_wrong_shape_name_the_hook():
    """A q hook's answer was trusted: c3 float()ed a string, coma unpacked a bare number (both
    internal errors); now OT401 naming the hook and the trace."""

    def bare(tr, u, uid):
        return 0.5

    with pytest.raises(OrchestraceError, match=r"'bare' returned 0.5 for trace 't0'") as ei:
        compute_credit(runs([1.0]), "coma", "agent", q=bare)
    assert ei.value.code == "OT401"
    with pytest.raises(OrchestraceError, match="returned 'x'.*expected a finite number") as ei:
        compute_credit(c3_tree(), "c3", "message", variant="value_only", q=lambda tr, u, uid: "x")
    assert ei.value.code == "OT401"
    ok = compute_credit(runs([1.0]), "coma", "agent", q=lambda tr, u, uid: (1.0, [(0.5, 1.0), [0.5, 0.0]]))
    assert ok[0][1].values["a"] == pytest.approx(0.5)


def test_no_unit_is_refused_not_an_empty_success():
    # orchestrace credit -u , credited nothing and exited 0
    with pytest.raises(OrchestraceError, match="no credit unit given") as ei:
        list(iter_credit(runs([1.0]), "grpo", []))
    assert ei.value.code == "OT410"
