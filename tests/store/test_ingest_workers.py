"""Ingest with worker processes: the same tables, report and errors as in one process."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import time
from pathlib import Path

import duckdb
import msgspec
import pytest
from store_kit import hand_trace, run_cli

from orchestrace.core.errors import LoadError, OrchestraceError
from orchestrace.core.io import dumps, save
from orchestrace.core.model import Edge
from orchestrace.parallel import parallel_map
from orchestrace.store import IngestAborted, ingest
from orchestrace.store.db import PARALLEL_MIN_BYTES, ingest_processes
from orchestrace.store.schema import TABLES


@pytest.fixture
def mixed(tmp_path: Path, corpus) -> list[str]:
    """Seven files: hand traces with a truncated line, an invalid trace, a byte-identical
    repeat and a conflicting repeat, then the generated corpus (.jsonl, .json, .events.jsonl.gz)."""
    d = tmp_path / "in"
    d.mkdir()
    save(hand_trace("hand-1"), d / "a.json")
    (d / "b.jsonl").write_bytes(dumps(hand_trace("hand-2")) + b"\n" + b'{"trace_id": "cut", "events": [\n')
    broken = hand_trace("bad-1")
    broken.edges.append(Edge("e6", "e99", "causal"))
    save([hand_trace("hand-1"), broken, hand_trace("hand-3")], d / "c.jsonl")
    save(hand_trace("hand-1", reward=0.5), d / "d.json")
    files, _ = corpus
    return [str(d / n) for n in ("a.json", "b.jsonl", "c.jsonl", "d.json")] + [str(f) for f in files[:3]]


def _tables(store: Path) -> dict[str, list[tuple]]:
    """Every table's rows in stored order (``ingested_at`` apart: the clock of each ingest)."""
    con = duckdb.connect(str(store), read_only=True)
    try:
        return {
            name: con.execute(
                f"SELECT * EXCLUDE (ingested_at) FROM {name}" if name == "traces" else f"SELECT * FROM {name}"
            ).fetchall()
            for name in TABLES
        }
    finally:
        con.close()


def _failures(rep) -> list[tuple]:
    return [
        (os.path.basename(f.path), f.line, f.trace_id, f.first().code, f.first().pointer)
        for f in rep.failures
    ]


def test_workers_same_tables_and_errors(tmp_path: Path, mixed: list[str], corpus) -> None:
    assert ingest_processes(mixed, 2) == 2 and ingest_processes(mixed, 4) == 4  # workers really start
    reports, tables = {}, {}
    for w in (1, 2, 4):
        store = tmp_path / f"w{w}.duckdb"
        reports[w] = ingest(str(store), mixed, workers=w)
        tables[w] = _tables(store)
        con = duckdb.connect(str(store), read_only=True)
        assert con.execute("SELECT count(DISTINCT ingested_at) FROM traces").fetchall() == [(1,)]
        con.close()
    rep = reports[1]
    # hand-1, hand-2, hand-3 (6 events each) and the 12 generated traces; hand-1 again in c.jsonl
    # with the same content is a duplicate, in d.json with another reward a conflict
    assert (rep.inserted, rep.replaced, rep.unchanged, rep.duplicates) == (15, 0, 0, 1)
    assert rep.events == 3 * 6 + sum(len(t.events) for t in corpus[1][:12])
    assert _failures(rep) == [
        ("b.jsonl", 2, None, "OT006", None),  # the truncated line
        ("c.jsonl", 2, "bad-1", "OT202", "/edges/5/dst"),  # an edge to an event that does not exist
        ("d.json", None, "hand-1", "OT310", None),
    ]
    for w in (2, 4):
        assert msgspec.structs.replace(reports[w], seconds=0) == msgspec.structs.replace(rep, seconds=0)
        assert tables[w] == tables[1], w
    assert [t[0] for t in tables[1]["traces"][:3]] == ["hand-1", "hand-2", "hand-3"]  # input order


def test_workers_abort_writes_nothing(tmp_path: Path, mixed: list[str]) -> None:
    store = tmp_path / "s.duckdb"
    with pytest.raises(IngestAborted) as e:
        ingest(str(store), mixed, workers=2, on_error="abort")
    assert (e.value.code, os.path.basename(e.value.path or ""), e.value.line) == ("OT006", "b.jsonl", 2)
    assert _tables(store)["traces"] == []
    assert multiprocessing.active_children() == []  # the workers were stopped with the ingest


def test_default_workers_only_for_large_inputs(tmp_path: Path, mixed: list[str]) -> None:
    assert sum(os.path.getsize(f) for f in mixed) < PARALLEL_MIN_BYTES
    assert ingest_processes(mixed, None) == 1  # small: no process is started
    assert ingest_processes(mixed[:1], 8) == 1  # one file: nothing to share
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as f:
        f.truncate(PARALLEL_MIN_BYTES)
    cpus = len(os.sched_getaffinity(0))
    assert ingest_processes([str(big), mixed[0]], None, load=0.0) == min(cpus, 2)
    assert ingest_processes([str(big), mixed[0]], None, load=cpus - 0.5) == 1  # one core left: ours
    assert ingest_processes([str(big), mixed[0]], None, load=cpus + 3.0) == 1  # overloaded
    assert ingest_processes([str(big), mixed[0]], 2, load=cpus + 3.0) == 2  # asked for: always


def _pid_after_nap(x: int) -> int:
    time.sleep(0.1)  # long enough for a worker to start and claim items while this process naps
    return os.getpid()


def _fail_on_odd(x: int) -> int:
    if x % 2:
        raise LoadError("OT006", f"item {x} is odd", path=f"f{x}.jsonl", line=x)
    return x


def test_process_pool_shares_work_and_passes_errors() -> None:
    pids = parallel_map(_pid_after_nap, list(range(10)), processes=2)
    assert pids[0] == os.getpid() and len(set(pids)) == 2  # the first here, others in one worker
    assert parallel_map(abs, [-3, -2, -1, 0, 1], processes=3) == [3, 2, 1, 0, 1]
    with pytest.raises(LoadError) as e:
        parallel_map(_fail_on_odd, [0, 1, 2], processes=2)
    assert (e.value.code, e.value.path, e.value.line, e.value.message) == (
        "OT006",
        "f1.jsonl",
        1,
        "item 1 is odd",
    )
    back = pickle.loads(pickle.dumps(e.value))  # how an error raised in a worker comes back
    assert type(back) is LoadError and str(back) == str(e.value) and back.exit_code == 1


_PARENT = os.getpid()


def _die_in_worker(x: int) -> int:
    if os.getpid() != _PARENT:
        os._exit(3)  # as the kernel's OOM killer would end it: no exception, no result
    time.sleep(0.1)
    return x


def test_dead_worker_is_an_error_not_a_hang() -> None:
    with pytest.raises(OrchestraceError) as e:
        parallel_map(_die_in_worker, list(range(8)), processes=2)
    assert e.value.code == "OT331" and "worker process died" in e.value.message
    assert multiprocessing.active_children() == []


def test_workers_must_be_positive(tmp_path: Path, capsys, mixed: list[str]) -> None:
    store = tmp_path / "s.duckdb"
    for bad in ("0", "-2"):
        r = run_cli(capsys, "ingest", mixed[0], "--store", str(store), "--workers", bad)
        assert r.returncode == 2 and "--workers" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not store.exists()
    with pytest.raises(OrchestraceError) as e:
        ingest(str(store), mixed, workers=0)
    assert e.value.code == "OT010"
    r = run_cli(capsys, "ingest", mixed[0], "--store", str(store), "--workers", "2", "--ray", "local")
    assert r.returncode == 2 and "not both" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not store.exists()  # refused before Ray starts or the store is created
