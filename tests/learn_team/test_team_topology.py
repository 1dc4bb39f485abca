"""The team program's topologies, run with the scripted backend (no model): who answers, who
hears whom, which adapters the calls name."""

from __future__ import annotations

import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.learn.team.program import adapters_for
from orchestrace.runtime.runner import backend_spec, run


def team_run(tmp_path, **config):
    cfg = {"family": "continents", "question": "cont-albania", **config}
    res = run("team", str(tmp_path / "r.events.jsonl"), config=cfg, backend=backend_spec("scripted"))
    tr = res.trace
    returns = [(e.agent, (e.attrs or {}).get("adapter")) for e in tr.events if e.type == "return"]
    heard = [(e.agent, e.content) for e in tr.events if e.type == "message" and e.agent != "orchestrator"]
    return tr, returns, heard


def test_revise_a_proposer_then_a_reviser_who_reads_the_proposal(tmp_path):
    tr, returns, heard = team_run(tmp_path, topology="revise", adapters="role")
    assert [a for a, _ in returns] == ["proposer", "reviser"]
    assert [a for a, _ in heard] == ["proposer"]
    assert tr.metadata["outcome"]["final"] == "europe"
    assert adapters_for("role", 2, "revise") == ["proposer", "reviser"]
    assert adapters_for("shared", 2, "revise") == ["team"]
    from orchestrace.learn.team.accuracy import accuracy_figures

    figures = accuracy_figures([tr])  # each answerer under its own name, the reviser too
    assert (figures["proposer_accuracy"], figures["reviser_accuracy"]) == (1.0, 1.0)
    assert "solver_0_accuracy" not in figures


def test_mute_keeps_the_answers_but_does_not_relay_them(tmp_path):
    _, returns, heard = team_run(tmp_path, solvers=3, mute=["solver_0", "solver_2"])
    assert [a for a, _ in returns] == ["solver_0", "solver_1", "solver_2", "aggregator"]
    assert [a for a, _ in heard] == ["solver_1"]


def test_unknown_topology_is_bad_input(tmp_path):
    with pytest.raises(OrchestraceError, match="unknown team topology 'chain'"):
        team_run(tmp_path, topology="chain")
