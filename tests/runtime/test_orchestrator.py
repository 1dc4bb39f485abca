"""The orchestrator end to end: real HTTP server, real files, every trace validated."""

from __future__ import annotations

import re

import pytest

from orchestrace.core.io import load_one
from orchestrace.core.validate import validate_path, validate_trace
from orchestrace.runtime.backends.base import BackendError
from orchestrace.runtime.backends.scripted import ScriptedBackend
from orchestrace.runtime.orchestrator import Budget
from orchestrace.runtime.runner import backend_spec, run


def _valid(res):
    assert [f for f in validate_trace(res.trace) if f.severity == "error"] == []
    assert validate_path(res.path).valid
    assert load_one(res.path).events == res.trace.events


def _returns(tr, agent=None):
    return [e for e in tr.events if e.type == "return" and (agent is None or e.agent == agent)]


def test_centralized_over_http_with_retries_on_429_500_malformed_close_timeout(tmp_path, server):
    server.plan = {
        '"hot"': ["429", "500"],
        '"tall"': ["malformed"],
        '"early"': ["close"],
        '"happy"': ["slow"],
    }
    res = run(
        "centralized",
        str(tmp_path / "c.events.jsonl"),
        backend=backend_spec(base_url=server.url, model="m"),
        seed=0,
        timeout=0.4,
        retries=2,
    )
    _valid(res)
    assert res.outcome["status"] == "ok"
    assert res.outcome["final"] == "hot->cold; tall->short; early->late; happy->sad"
    tr = res.trace
    errs = {(e.agent, e.attrs["error"], e.attrs.get("http_status")) for e in tr.events if e.status == "error"}
    assert errs == {
        ("worker_0", "http", 429),
        ("worker_0", "http", 500),
        ("worker_1", "malformed", None),
        ("worker_2", "connection", None),
        ("worker_3", "timeout", None),
    }
    # each worker: failed attempts (numbered), then one ok return with usage tokens
    w0 = _returns(tr, "worker_0")
    assert [(e.status, e.attrs["attempt"]) for e in w0] == [("error", 0), ("error", 1), (None, 2)]
    assert w0[-1].tokens_out == 1 and w0[-1].tokens_in > 0 and w0[-1].model == "m"
    assert len(server.requests) == 4 + 5
    # spawned, delegated, returned, aggregated, stopped, despawned
    kinds = [e.type for e in tr.events]
    assert kinds.count("spawn") == kinds.count("despawn") == 4
    assert kinds[-5] == "orchestrator_decision" and tr.events[-5].attrs["decision"] == "stop"
    assert tr.costs["tokens"] == sum(e.tokens for e in tr.events) > 0


def test_exhausted_retries_continue_or_fail_by_policy(tmp_path, server):
    server.plan = {'"tall"': ["500"] * 10}
    res = run(
        "centralized", str(tmp_path / "a.events.jsonl"), backend=backend_spec(base_url=server.url), retries=1
    )
    _valid(res)
    assert res.outcome["status"] == "ok"
    assert res.outcome["final"] == "hot->cold; tall->?; early->late; happy->sad"
    assert [e.status for e in _returns(res.trace, "worker_1")] == ["error", "error"]

    server.plan = {'"tall"': ["500"] * 10}
    res = run(
        "centralized",
        str(tmp_path / "b.events.jsonl"),
        config={"on_error": "fail"},
        backend=backend_spec(base_url=server.url),
        retries=1,
    )
    _valid(res)
    assert res.outcome["status"] == "error" and res.outcome["stop_reason"] == "error"
    ds = [e for e in res.trace.events if e.type == "despawn"]
    assert len(ds) == 4  # every worker is despawned, finished or cancelled


class _CompletedCalls(ScriptedBackend):
    """A scripted backend that lists the seeds of the calls it finished (a cancelled one never is)."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.completed: list[int] = []

    async def chat(self, req):
        out = await super().chat(req)
        self.completed.append(req.seed)
        return out


def _slow_debater(delay_for: str, seconds: float) -> _CompletedCalls:
    return _CompletedCalls(
        choices=["cold"],
        delay=lambda req: seconds if req.seed == DELAYED[delay_for] else 0.01,
    )


DELAYED: dict[str, int] = {}


def test_stop_cancels_running_agents_and_despawns_them(tmp_path):
    from orchestrace.runtime.orchestrator import derive_seed

    DELAYED["debater_2"] = derive_seed(5, "debater_2", 0)
    backend = _slow_debater("debater_2", 30.0)
    res = run("debate", str(tmp_path / "d.events.jsonl"), config={"rounds": 1}, backend=backend, seed=5)
    # did not wait for the slow debater: its call was cancelled, never finished; the others finished
    assert sorted(backend.completed) == sorted(derive_seed(5, f"debater_{i}", 0) for i in (0, 1))
    _valid(res)
    assert res.outcome["stop_reason"] == "majority"
    tr = res.trace
    assert [e.agent for e in _returns(tr)] == ["debater_0", "debater_1"]
    ds = {e.to: e.attrs["reason"] for e in tr.events if e.type == "despawn"}
    assert ds == {"debater_2": "cancelled", "debater_0": "done", "debater_1": "done"}
    assert res.outcome["final"] == "cold"


def test_budgets_end_runs_cleanly(tmp_path):
    res = run(
        "debate",
        str(tmp_path / "t.events.jsonl"),
        backend=ScriptedBackend(choices=["cold", "warm"], seed=1),
        budget=Budget(tokens=60),
    )
    _valid(res)
    assert res.outcome["stop_reason"] == "budget:tokens"
    assert res.trace.costs["tokens"] >= 60

    res = run(
        "debate",
        str(tmp_path / "w.events.jsonl"),
        backend=ScriptedBackend(choices=["cold"], delay=5.0),
        budget=Budget(wall_clock_s=0.3),
    )
    _valid(res)
    assert res.outcome["stop_reason"] == "budget:wall_clock"
    assert sorted(e.attrs["reason"] for e in res.trace.events if e.type == "despawn") == ["cancelled"] * 3


def test_failing_tool_is_an_error_event_and_run_goes_on(tmp_path):
    res = run(
        "pec",
        str(tmp_path / "p.events.jsonl"),
        config={"question": "What is 7 / 0?", "cycles": 1},
        backend=ScriptedBackend(choices=["It is undefined."]),
    )
    _valid(res)
    tr = [e for e in res.trace.events if e.type == "tool_result"]
    assert [(e.tool, e.status) for e in tr] == [("calculator", "error")]
    assert "ZeroDivisionError" in tr[0].content
    assert res.outcome["stop_reason"] == "max_cycles"


def test_pec_tool_result_reaches_the_executor(tmp_path):
    res = run(
        "pec", str(tmp_path / "p.events.jsonl"), backend=ScriptedBackend(choices=["ok"]), config={"cycles": 1}
    )
    _valid(res)
    tr = res.trace
    result = next(e for e in tr.events if e.type == "tool_result")
    assert result.content == "395" and result.trusted is True  # 17 * 23 + 4
    call = next(e for e in tr.events if e.type == "tool_call")
    assert {(x.src, x.type) for x in tr.edges if x.dst == result.id} == {(call.id, "return")}
    assert [e.role for e in _returns(tr)] == ["planner", "executor", "critic"]


def test_non_retryable_error_is_not_retried(tmp_path):
    b = ScriptedBackend(choices=["x"], failures=[('"hot"', BackendError("http", "bad request", status=400))])
    res = run("centralized", str(tmp_path / "n.events.jsonl"), backend=b, retries=3)
    _valid(res)
    assert [(e.status, e.attrs.get("http_status")) for e in _returns(res.trace, "worker_0")] == [
        ("error", 400)
    ]


def test_usd_budget_from_server_usage(tmp_path, server):
    from orchestrace.runtime.backends.openai_compat import OpenAICompatBackend

    # $1 per token in, $1 per token out: the first round of three debaters costs far more than $10
    b = OpenAICompatBackend(server.url, price_in=1e6, price_out=1e6)
    res = run(
        "debate",
        str(tmp_path / "u.events.jsonl"),
        backend=b,
        budget=Budget(usd=10.0),
        config={"early": False},
    )
    _valid(res)
    assert res.outcome["stop_reason"] == "budget:usd"
    rets = [e for e in res.trace.events if e.type == "return"]
    assert rets and all(e.cost_usd == e.tokens_in + e.tokens_out for e in rets)
    assert res.trace.costs["usd"] == sum(e.cost_usd for e in rets)


def test_debate_messages_read_cause_the_next_answer(tmp_path):
    never_agree = ScriptedBackend(fn=lambda req: f"word{req.seed}")
    res = run("debate", str(tmp_path / "d.events.jsonl"), backend=never_agree, seed=7, config={"rounds": 2})
    _valid(res)
    tr = res.trace
    by = {e.id: e for e in tr.events}
    second = [e for e in tr.events if e.type == "return" and e.turn == 1]
    assert len(second) == 3
    for r in second:
        heard = sorted(
            by[x.src].from_
            for x in tr.edges
            if x.dst == r.id and by[x.src].type == "message" and x.type == "message"
        )
        # its own task message from the orchestrator, and one message from each other debater
        others = sorted(f"debater_{i}" for i in range(3) if f"debater_{i}" != r.agent)
        assert heard == sorted(["orchestrator", *others])


@pytest.mark.parametrize(
    ("program", "config", "said"),
    [
        ("debate", {"n": "abc"}, "debate: config 'n' must be a positive integer, got 'abc'"),  # int(): exit 3
        (
            "debate",
            {"rounds": 0},
            "debate: config 'rounds' must be a positive integer, got 0",
        ),  # an empty run
        (
            "debate",
            {"early": "false"},
            "debate: config 'early' must be true or false",
        ),  # bool("false") is True
        ("debate", {"on_error": "stop"}, "debate: config 'on_error' must be one of continue, fail"),
        ("centralized", {"words": "hot"}, "centralized: config 'words' must be a non-empty list"),  # h, o, t
        ("pec", {"cycles": -1}, "pec: config 'cycles' must be a positive integer, got -1"),
    ],
)
def test_a_program_config_value_of_the_wrong_kind_is_named(tmp_path, program, config, said):
    from orchestrace.core.errors import OrchestraceError

    with pytest.raises(OrchestraceError, match=re.escape(said)) as e:
        run(
            program,
            str(tmp_path / "r.events.jsonl"),
            config=config,
            backend=ScriptedBackend(choices=["cold"]),
        )
    assert e.value.code == "OT604" and not (tmp_path / "r.events.jsonl").exists()
