"""Streaming credit and analysis: same numbers as one batch, a bar only for many traces."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from tracekit import centralized, ev, mk
from typer.testing import CliRunner

from orchestrace.cli import app
from orchestrace.cli.progress import MIN_TRACES, count_traces, tracked
from orchestrace.core.io import load, save
from orchestrace.credit import assign_credit, iter_credit, streamable
from orchestrace.credit.methods import credit_at


def _wide(k: int, team: float) -> object:
    """14 agents each posting one message into an aggregate: beyond exact Shapley (sampled)."""
    es = [ev(f"m{i}", 0, "message", f"a{i}", status="error" if i == k else "ok") for i in range(14)]
    es.append(ev("agg", 1, "aggregate", "judge"))
    return mk(es, [(f"m{i}", "agg", "message") for i in range(14)], rewards={"team": team}, trace_id=f"w{k}")


@pytest.mark.parametrize(
    ("method", "opts"),
    [("shapley", {"samples": 64, "seed": 3}), ("loo", {}), ("grpo", {}), ("broadcast", {"baseline": "mean"})],
)
def test_stream_equals_batch(method: str, opts: dict) -> None:
    traces = [_wide(k, 1.0 - 0.25 * k) for k in range(4)] + [centralized(team=1.0)]
    batch = list(traces)
    for unit in ("agent", "message"):
        batch = assign_credit(batch, method, unit, **opts)
    fresh = [_wide(k, 1.0 - 0.25 * k) for k in range(4)] + [centralized(team=1.0)]
    streamed = list(iter_credit(iter(fresh), method, ["agent", "message"], **opts))
    assert [t.trace_id for t in streamed] == [t.trace_id for t in batch]
    for a, b in zip(streamed, batch, strict=True):
        assert [e.credit for e in a.events] == [e.credit for e in b.events]
    assert streamable(method, **opts) is (method in ("shapley", "loo"))


def test_a_trace_credited_alone_gets_its_stream_seed() -> None:
    # the third trace of a stream seeded 3 is sampled with seed 3 + 2 (a Ray task credits it alone)
    alone = credit_at((2, _wide(2, 0.5)), "shapley", ["agent"], "team", False, {"samples": 64, "seed": 3})
    (want,) = assign_credit([_wide(2, 0.5)], "shapley", "agent", samples=64, seed=5)
    assert [e.credit for e in alone.events] == [e.credit for e in want.events]
    (seed3,) = assign_credit([_wide(2, 0.5)], "shapley", "agent", samples=64, seed=3)
    assert [e.credit for e in alone.events] != [e.credit for e in seed3.events]


def test_count_traces(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    save([centralized(), centralized()], str(f))
    one = tmp_path / "one.json"
    save([centralized()], str(one))
    assert count_traces([str(f), str(one)]) == 3
    assert count_traces([str(f), str(tmp_path / "x.jsonl.gz")]) is None  # compressed: unknown
    assert count_traces(["-"]) is None


def _bar(n: int, quiet: bool = False) -> str:
    out = io.StringIO()
    con = Console(file=out, force_terminal=True, width=100)
    assert list(tracked(range(n), label="analyze", total=n, quiet=quiet, console=con)) == list(range(n))
    return out.getvalue()


def test_bar_only_for_many_traces() -> None:
    assert "analyze" in _bar(MIN_TRACES)
    assert _bar(MIN_TRACES - 1) == "" and _bar(MIN_TRACES, quiet=True) == ""


def test_cli_streams_many_traces(tmp_path: Path) -> None:
    """300 traces through analyze, reward and credit: streamed outputs hold every trace, credits as in batch."""
    traces = [_wide(k % 5, 1.0 - 0.2 * (k % 5)) for k in range(300)]
    for k, t in enumerate(traces):
        t.trace_id = f"w{k}"
    src = tmp_path / "many.jsonl"
    save(traces, str(src))
    r = CliRunner().invoke(app, ["analyze", str(src), "--format", "json", "-o", str(tmp_path / "m.jsonl")])
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)["traces"]) == 300 and len(load(str(tmp_path / "m.jsonl"))) == 300
    r = CliRunner().invoke(app, ["reward", str(src), "-o", str(tmp_path / "r.jsonl")])
    assert r.exit_code == 0, r.output
    assert "first 50 of 300 traces" in r.stdout
    rewarded = load(str(tmp_path / "r.jsonl"))
    assert [t.rewards["hybrid"] for t in rewarded] == [
        t.rewards["team"] for t in traces
    ]  # default spec: R8 = team
    args = ["credit", "-m", "shapley", "--samples", "16", str(src), "-o", str(tmp_path / "c.jsonl")]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "first 50 of 300 traces" in r.stdout
    got = load(str(tmp_path / "c.jsonl"))
    want = assign_credit(load(str(src)), "shapley", "agent", samples=16, seed=0)
    assert [[e.credit for e in t.events] for t in got] == [[e.credit for e in t.events] for t in want]
