"""Ingest: table contents by hand, round trip, idempotence, replacement, --on-error, duplicates."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import orjson
import pytest
from store_kit import dump_tables, hand_trace

from orchestrace.core.io import dumps, load, save
from orchestrace.gen import generate_corpus
from orchestrace.measure import analyze
from orchestrace.measure.cost import breakdown
from orchestrace.store import IngestAborted, ingest, iter_store_traces, query, stats
from orchestrace.store.schema import STORE_VERSION


def test_hand_trace_rows(tmp_path: Path) -> None:
    f = tmp_path / "hand.json"
    save(hand_trace(), f)
    store = tmp_path / "s.duckdb"
    rep = ingest(str(store), [str(f)])
    assert (rep.inserted, rep.replaced, rep.unchanged, rep.events, rep.failed) == (1, 0, 0, 6, 0)
    assert stats(str(store)) == {
        "traces": 1,
        "events": 6,
        "edges": 5,
        "agents": 2,
        "rewards": 2,
        "credits": 4,
        "metrics": len(query(str(store), "SELECT * FROM metrics").to_pylist()),
        "summary": 1,
    }
    tr = query(str(store), "SELECT * FROM traces").to_pylist()[0]
    assert tr["trace_id"] == "hand-1" and tr["system"] == "handmade" and tr["topology"] == "centralized"
    assert tr["date"] == dt.date(2025, 3, 4)  # from metadata.started_at
    assert (tr["n_events"], tr["n_edges"], tr["measured"]) == (6, 5, True)
    agents = {r["agent"]: r for r in query(str(store), "SELECT * FROM agents").to_pylist()}
    o, w = agents["orch"], agents["w"]
    # orch: e1 (100/20 tokens, $0.01, busy 1 s), e2, e6; w: e3 (50/5, $0.002; busy 3 s: from the
    # spawn at 1, when it could start, to 4), e4 (error), e5 (10/10, $0.001; busy 2 s: from 4 to 6)
    assert (o["role"], o["first_idx"], o["events"], o["tokens_in"], o["tokens_out"]) == (
        "lead",
        0,
        3,
        100,
        20,
    )
    assert (
        o["cost_usd"] == pytest.approx(0.01) and o["busy_s"] == 1.0 and (o["first_t"], o["last_t"]) == (0, 6)
    )
    assert (w["role"], w["first_idx"], w["events"], w["tokens_in"], w["tokens_out"]) == (
        "worker",
        2,
        3,
        60,
        15,
    )
    assert (
        w["cost_usd"] == pytest.approx(0.003) and w["busy_s"] == 5.0 and (w["first_t"], w["last_t"]) == (2, 6)
    )
    assert (w["tool_calls"], w["errors"], o["errors"]) == (1, 1, 0)
    # critical path (measure's wall-clock definition): e1 -> e2 -> e3 -> e4 -> e5
    ev = query(
        str(store), "SELECT id, critical, from_agent, to_agent, attrs, extra FROM events ORDER BY idx"
    ).to_pylist()
    assert [e["critical"] for e in ev] == [True, True, True, True, True, False]
    assert (o["critical_events"], w["critical_events"]) == (2, 3)
    assert (ev[4]["from_agent"], ev[4]["to_agent"], ev[1]["to_agent"]) == ("w", "orch", "w")
    assert orjson.loads(ev[0]["attrs"]) == {"k": [1, 2]} and orjson.loads(ev[0]["extra"]) == {
        "x_custom": "keep"
    }
    credits = query(
        str(store), "SELECT event_id, channel, value FROM credits ORDER BY event_idx, ord"
    ).to_pylist()
    assert [(c["event_id"], c["channel"], c["value"]) for c in credits] == [
        ("e3", "team", 0.5),
        ("e5", "team", 0.25),
        ("e5", "w", 1.0),
        ("e6", "team", 0.25),
    ]
    team = query(str(store), "SELECT sum(value) AS s FROM credits WHERE channel = 'team'").to_pylist()[0]["s"]
    assert team == 1.0  # the credit of the team reward partitions it
    m = {(r["source"], r["name"]): r["value"] for r in query(str(store), "SELECT * FROM metrics").to_pylist()}
    assert m[("recorded", "task_success")] == 1.0
    assert (m[("costs", "tokens")], m[("costs", "wall_clock_s")], m[("costs", "usd")]) == (195, 6, 0.013)
    assert m[("measure", "critical_path_s")] == 6.0 and m[("measure", "tokens")] == 195.0
    assert m[("measure", "tool_calls")] == 1.0
    rewards = dict(
        query(str(store), "SELECT channel, value FROM rewards").to_pylist()[i].values() for i in range(2)
    )
    assert rewards == {"team": 1.0, "success": 1.0}


def test_round_trip_all_formats(tmp_path: Path, corpus: tuple[list[Path], list]) -> None:
    files, traces = corpus
    store = tmp_path / "s.duckdb"
    rep = ingest(str(store), [str(f) for f in files], measure=False)
    assert rep.inserted == 13 and rep.events == sum(len(t.events) for t in traces)
    back = {t.trace_id: t for t in iter_store_traces(str(store))}
    originals = {t.trace_id: t for f in files for t in load(f)}
    assert back.keys() == originals.keys()
    for tid, t in originals.items():
        assert back[tid] == t, tid
        assert orjson.loads(dumps(back[tid])) == orjson.loads(dumps(t))
    assert stats(str(store))["edges"] == sum(len(t.edges) for t in traces)
    assert query(str(store), "SELECT count(*) AS n FROM traces WHERE measured").to_pylist()[0]["n"] == 0
    assert (
        query(str(store), "SELECT count(*) AS n FROM events WHERE critical IS NOT NULL").to_pylist()[0]["n"]
        == 0
    )


def test_reingest_changes_nothing(tmp_path: Path, corpus: tuple[list[Path], list]) -> None:
    files, _ = corpus
    store = tmp_path / "s.duckdb"
    ingest(str(store), [str(f) for f in files])
    before = dump_tables(store)
    rep = ingest(str(store), [str(f) for f in reversed(files)])
    assert (rep.inserted, rep.replaced, rep.unchanged, rep.events) == (0, 0, 13, 0)
    assert dump_tables(store) == before  # ingested_at included: untouched rows are not rewritten
    rep = ingest(str(store), [str(files[0])], measure=False)  # measured already: nothing to add
    assert rep.unchanged == 10 and dump_tables(store) == before


def test_changed_trace_replaces_and_measure_upgrades(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    save(hand_trace(reward=1.0), a)
    save(hand_trace(reward=0.0), b)
    ingest(str(store), [str(a)], measure=False)
    assert (
        query(str(store), "SELECT count(*) AS n FROM metrics WHERE source = 'measure'").to_pylist()[0]["n"]
        == 0
    )
    rep = ingest(str(store), [str(a)])  # same content, now asked to measure: rows rewritten once
    assert (rep.replaced, rep.unchanged) == (1, 0)
    assert (
        query(str(store), "SELECT count(*) AS n FROM metrics WHERE source = 'measure'").to_pylist()[0]["n"]
        > 0
    )
    rep = ingest(str(store), [str(b)])
    assert (rep.inserted, rep.replaced) == (0, 1)
    assert stats(str(store))["events"] == 6 and stats(str(store))["agents"] == 2
    rows = query(str(store), "SELECT value FROM rewards WHERE channel = 'team'").to_pylist()
    assert rows == [{"value": 0.0}]


def _batch_with_bad_middle(tmp_path: Path) -> Path:
    good1, good3 = hand_trace("good-1"), hand_trace("good-3")
    bad = orjson.loads(dumps(hand_trace("bad-2")))
    bad["edges"].append({"src": "e6", "dst": "e1", "type": "causal"})  # a cycle and a backwards edge
    f = tmp_path / "batch.jsonl"
    f.write_bytes(dumps(good1) + b"\n" + orjson.dumps(bad) + b"\n" + dumps(good3) + b"\n")
    return f


@pytest.mark.parametrize("mode", ["report", "skip"])
def test_invalid_trace_mid_batch_is_left_out(tmp_path: Path, mode: str) -> None:
    f = _batch_with_bad_middle(tmp_path)
    store = tmp_path / "s.duckdb"
    rep = ingest(str(store), [str(f)], on_error=mode)  # type: ignore[arg-type]
    assert rep.inserted == 2 and rep.failed == 1
    fail = rep.failures[0]
    assert (fail.trace_id, fail.line) == ("bad-2", 2)
    assert {x.code for x in fail.findings} >= {"OT203"}
    assert query(str(store), "SELECT trace_id FROM traces ORDER BY 1")["trace_id"].to_pylist() == [
        "good-1",
        "good-3",
    ]
    assert (
        query(str(store), "SELECT count(*) AS n FROM events WHERE trace_id = 'bad-2'").to_pylist()[0]["n"]
        == 0
    )


def test_invalid_trace_aborts_everything(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    first = tmp_path / "first.json"
    save(hand_trace("kept"), first)
    ingest(str(store), [str(first)])
    before = dump_tables(store)
    f = _batch_with_bad_middle(tmp_path)
    with pytest.raises(IngestAborted) as err:
        ingest(str(store), [str(first), str(f)], on_error="abort")
    assert err.value.line == 2 and "bad-2" in err.value.message and "nothing was written" in err.value.message
    assert dump_tables(store) == before


def test_unparseable_line_fails_alone(tmp_path: Path) -> None:
    f = tmp_path / "x.jsonl"
    f.write_bytes(dumps(hand_trace("ok-1")) + b"\n{not json\n" + dumps(hand_trace("ok-2")) + b"\n")
    rep = ingest(str(tmp_path / "s.duckdb"), [str(f)], on_error="report")
    assert rep.inserted == 2 and [(x.line, x.first().code) for x in rep.failures] == [(2, "OT003")]


def test_same_id_different_content_in_one_input(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    save(hand_trace(reward=1.0), a)
    save(hand_trace(reward=0.5), b)
    store = tmp_path / "s.duckdb"
    rep = ingest(str(store), [str(a), str(b), str(a)])
    assert (rep.inserted, rep.unchanged, rep.duplicates) == (1, 0, 1)
    assert [x.first().code for x in rep.failures] == ["OT310"]
    assert rep.failures[0].path == str(b) and rep.failures[0].first().message.endswith(f"(first in {a})")
    assert query(str(store), "SELECT value FROM rewards WHERE channel = 'team'").to_pylist() == [
        {"value": 1.0}
    ]
    with pytest.raises(IngestAborted):
        ingest(str(tmp_path / "t.duckdb"), [str(a), str(b)], on_error="abort")
    assert not (tmp_path / "t.duckdb").exists()  # a new store: an aborted ingest leaves none behind
    with pytest.raises(IngestAborted):  # an existing one is left as it was
        ingest(str(store), [str(b), str(tmp_path / "missing.json")], on_error="abort")
    assert stats(str(store))["traces"] == 1


def test_same_id_twice_in_one_file(tmp_path: Path) -> None:
    """Repeats inside one file (one chunk of rows) are stored once, like repeats across files."""
    f = tmp_path / "x.jsonl"
    same, changed, other = hand_trace(reward=1.0), hand_trace(reward=0.5), hand_trace("other-1")
    f.write_bytes(b"".join(dumps(t) + b"\n" for t in (same, other, same, changed)))
    store = tmp_path / "s.duckdb"
    rep = ingest(str(store), [str(f)])
    assert (rep.inserted, rep.unchanged, rep.duplicates, rep.events) == (2, 0, 1, 12)
    assert [x.first().code for x in rep.failures] == ["OT310"]
    assert rep.failures[0].first().message.endswith("(earlier in this file)")
    counts = stats(str(store))
    assert (counts["traces"], counts["events"], counts["edges"], counts["rewards"]) == (2, 12, 10, 4)
    agents = query(str(store), "SELECT events FROM agents WHERE trace_id = 'hand-1' ORDER BY agent")
    assert agents["events"].to_pylist() == [3, 3]  # orch e1 e2 e6, w e3 e4 e5: counted once
    assert query(str(store), "SELECT value FROM rewards WHERE trace_id = 'hand-1' AND channel = 'team'")[
        "value"
    ].to_pylist() == [1.0]


def test_duplicate_key_fails_and_digest_is_key_order_free(tmp_path: Path) -> None:
    """The duplicate-key check reuses the digest's sorted dump: a repeated key is still OT005,
    and the same trace written with its keys in another order is the same content."""
    ok = dumps(hand_trace("ok-1"))
    dup_key = dumps(hand_trace("dup-1")).replace(b'"task_id":', b'"system":"x","task_id":', 1)
    assert dup_key.count(b'"system":') == 2
    f = tmp_path / "x.jsonl"
    f.write_bytes(ok + b"\n" + dup_key + b"\n")
    store = tmp_path / "s.duckdb"
    rep = ingest(str(store), [str(f)])
    assert rep.inserted == 1 and [(x.line, x.first().code) for x in rep.failures] == [(2, "OT005")]
    reordered = tmp_path / "y.json"
    reordered.write_bytes(orjson.dumps(dict(reversed(list(orjson.loads(ok).items())))))
    again = ingest(str(store), [str(reordered)])
    assert (again.inserted, again.unchanged) == (0, 1)


def test_per_agent_cost_query_matches_measure(tmp_path: Path, corpus: tuple[list[Path], list]) -> None:
    from orchestrace.measure import breakdown

    files, traces = corpus
    store = tmp_path / "s.duckdb"
    ingest(str(store), [str(f) for f in files], measure=False)
    want: dict[str, list[float]] = {}
    for t in traces:
        for agent, row in breakdown(t, "agent").items():
            acc = want.setdefault(agent, [0, 0, 0.0])
            acc[0] += row["events"]
            acc[1] += row["tokens"]
            acc[2] += row["usd"]
    got = query(
        str(store),
        "SELECT agent, sum(events) AS n, sum(tokens_in + tokens_out) AS tok, sum(cost_usd) AS usd FROM agents GROUP BY agent",
    ).to_pylist()
    assert {r["agent"]: [r["n"], r["tok"]] for r in got} == {a: v[:2] for a, v in want.items()}
    for r in got:
        assert r["usd"] == pytest.approx(want[r["agent"]][2], rel=1e-12, abs=1e-15)


def _busy(store: Path) -> dict[tuple[str, str], float | None]:
    return {
        (r["trace_id"], r["agent"]): r["busy_s"]
        for r in query(str(store), "SELECT * FROM agents").to_pylist()
    }


def _analyzed_busy(traces: list) -> dict[tuple[str, str], float]:
    return {(t.trace_id, a): row["busy_s"] for t in traces for a, row in breakdown(t, "agent").items()}


def test_agents_busy_s_is_analyze_by_agent_busy_s(tmp_path: Path) -> None:
    """One quantity under one name: the store's agents.busy_s is analyze --by agent's busy_s
    (measure's busy time, which adds up to serial_work_s), not the sum of t_end - t: on the hand
    trace the worker is busy 5 s (3 s from its spawn to its tool call's end, then 2 s), where its
    events last 3 s. NULL for a trace ingested without measure, as its critical flags."""
    traces = [hand_trace(), *generate_corpus(3, seed=2, size=200)]
    f = tmp_path / "c.jsonl"
    save(traces, f)
    store = tmp_path / "s.duckdb"
    ingest(str(store), [str(f)], workers=1)
    got, want = _busy(store), _analyzed_busy(traces)
    assert got.keys() == want.keys() and got == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert (want["hand-1", "w"], want["hand-1", "orch"]) == (5.0, 1.0)
    for t in traces:
        serial = analyze(t)["serial_work_s"]
        assert sum(v for (tid, _), v in got.items() if tid == t.trace_id) == pytest.approx(serial, rel=1e-9)
    bare = tmp_path / "bare.duckdb"
    ingest(str(bare), [str(f)], measure=False, workers=1)
    assert set(_busy(bare).values()) == {None}


def test_an_older_store_gets_measures_busy_s_at_the_next_ingest(tmp_path: Path) -> None:
    """A store of format /2 holds the old busy_s (sum of t_end - t); any ingest upgrades it to /3
    and recomputes the column from the stored traces."""
    traces = [hand_trace(), *generate_corpus(2, seed=4, size=100)]
    f = tmp_path / "c.jsonl"
    save(traces, f)
    store = tmp_path / "s.duckdb"
    ingest(str(store), [str(f)], workers=1)
    con = duckdb.connect(str(store))
    con.execute("UPDATE agents SET busy_s = -1.0")
    con.execute("UPDATE store_info SET value = 'orchestrace-store/2'")
    con.close()
    assert set(_busy(store).values()) == {-1.0}  # read as it is
    ingest(str(store), [], workers=1)
    assert query(str(store), "SELECT value FROM store_info")["value"].to_pylist() == [STORE_VERSION]
    assert _busy(store) == pytest.approx(_analyzed_busy(traces), rel=1e-12, abs=1e-12)
