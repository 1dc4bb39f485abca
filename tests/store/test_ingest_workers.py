"""Ingest with worker processes: the same tables, report and errors as in one process."""

from __future__ import annotations

import gzip
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import msgspec
import pytest
from store_kit import hand_trace, run_cli

from orchestrace.core.errors import LoadError, OrchestraceError
from orchestrace.core.io import dumps, save
from orchestrace.core.model import Edge
from orchestrace.core.read import Piece, split_file
from orchestrace.parallel import parallel_map
from orchestrace.store import IngestAborted, db, ingest
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
    assert not store.exists()  # a new store: an aborted ingest leaves none behind
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


def _one_big_file(path: Path) -> list[int]:
    """One JSONL file of 13 lines: seven hand traces, two blank lines, a line that does not
    parse, an invalid trace, a byte-identical repeat and a conflicting repeat of hand-1.
    Returns the byte offset of the start of every line."""
    broken = hand_trace("bad-1")
    broken.edges.append(Edge("e6", "e99", "causal"))
    lines = [dumps(hand_trace(f"hand-{i}")) for i in (3, 1, 2)]  # not in id order: nor is agents
    lines += [b"", b"  ", b'{"trace_id": "cut", "events": [', dumps(broken), dumps(hand_trace("hand-4"))]
    lines += [
        dumps(hand_trace("hand-1")),
        dumps(hand_trace("hand-5")),
        dumps(hand_trace("hand-1", reward=0.5)),
    ]
    lines += [dumps(hand_trace("hand-6")), dumps(hand_trace("hand-7"))]
    path.write_bytes(b"\n".join(lines))  # no newline after the last line
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    return starts


def test_split_file_cuts_after_newlines(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    starts = _one_big_file(big)
    size = big.stat().st_size
    piece = starts[4] - starts[2]  # about two lines
    pieces = split_file(str(big), piece)
    assert len(pieces) > 3
    assert pieces[0].start == 0 and pieces[-1].end == size
    for a, b in zip(pieces, pieces[1:], strict=False):
        assert a.end == b.start  # no byte lost or read twice
    for p in pieces:
        assert p.start in starts and starts.index(p.start) + 1 == p.first_line  # a line's start, its number
        assert p.end is not None and p.end - p.start >= min(piece, size - p.start)
    assert split_file(str(big), size) == [Piece(str(big))]  # small enough: whole
    gz = tmp_path / "big.jsonl.gz"
    gz.write_bytes(gzip.compress(big.read_bytes()))
    blank = tmp_path / "blank.jsonl"
    blank.write_bytes(b"\n" * 100)
    one = tmp_path / "one.json"
    one.write_bytes(big.read_bytes().split(b"\n")[0])
    for f in (gz, blank, one, tmp_path / "missing.jsonl"):
        assert split_file(str(f), 10) == [Piece(str(f))]  # compressed, blank, one document, missing


def test_pieces_of_one_file_same_tables_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.jsonl"
    starts = _one_big_file(big)
    monkeypatch.setattr(db, "PIECE_BYTES", starts[2])  # about two lines per piece
    assert ingest_processes([str(big)], 4) == 4  # one file, yet every worker gets pieces
    reports, tables = {}, {}
    for w in (1, 2, 4):
        store = tmp_path / f"w{w}.duckdb"
        reports[w] = ingest(str(store), [str(big)], workers=w)
        tables[w] = _tables(store)
    rep = reports[1]
    assert (rep.inserted, rep.duplicates, rep.events) == (7, 1, 7 * 6)
    assert _failures(rep) == [
        ("big.jsonl", 6, None, "OT006", None),  # the line that does not parse
        ("big.jsonl", 7, "bad-1", "OT202", "/edges/5/dst"),
        ("big.jsonl", None, "hand-1", "OT310", None),  # hand-1 again, another reward
    ]
    for w in (2, 4):
        assert msgspec.structs.replace(reports[w], seconds=0) == msgspec.structs.replace(rep, seconds=0)
        assert tables[w] == tables[1], w
    assert [t[0] for t in tables[1]["traces"]] == [f"hand-{i}" for i in (3, 1, 2, 4, 5, 6, 7)]


_PARENT = os.getpid()
#: the folder every process of the pool test signs (set before the pool forks)
_SIGNED: list[Path] = []


def _pid_after_a_worker_signed(x: int) -> int:
    """This process holds its item until a worker has signed too: the two share the work
    whatever the machine's load (a fixed nap raced the worker's start)."""
    folder = _SIGNED[0]
    (folder / str(os.getpid())).touch()
    deadline = time.monotonic() + 30
    while os.getpid() == _PARENT and len(list(folder.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    return os.getpid()


def _fail_on_odd(x: int) -> int:
    if x % 2:
        raise LoadError("OT006", f"item {x} is odd", path=f"f{x}.jsonl", line=x)
    return x


def test_process_pool_shares_work_and_passes_errors(tmp_path: Path) -> None:
    _SIGNED[:] = [tmp_path]
    pids = parallel_map(_pid_after_a_worker_signed, list(range(10)), processes=2)
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


_BLOCKING_SIGTERM = """
import signal, sys, time
from orchestrace.core.errors import LoadError
from orchestrace.parallel import parallel_map

# as ray.init leaves it: a SIGTERM handler that does slow work (drains the Ray node) before exiting
signal.signal(signal.SIGTERM, lambda *_: (time.sleep(3600), sys.exit(1)))


def fail(x):
    if x == 1:
        raise LoadError("OT006", "item 1 is odd", path="f.jsonl", line=1)
    time.sleep(0.3)  # the worker is still busy, or waiting for more, when the pool is stopped
    return x


try:
    parallel_map(fail, [0, 1, 2, 3, 4, 5], processes=2)
except LoadError as e:
    print("raised", e.code)
"""


def test_error_stops_workers_whatever_sigterm_handler_the_caller_has(tmp_path: Path) -> None:
    script = tmp_path / "blocking_sigterm.py"
    script.write_text(_BLOCKING_SIGTERM)
    p = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the script and its stuck worker
        p.communicate()
        pytest.fail("the pool waited for a worker stuck in the SIGTERM handler it inherited")
    assert p.returncode == 0 and out.strip() == "raised OT006", err


def _stuck_in_worker_or_fail(x: int) -> int:
    """A worker signs, then ignores SIGTERM and never returns (a lock it inherited, a handler
    that blocks); this process fails once the worker is stuck."""
    folder = _SIGNED[0]
    if os.getpid() != _PARENT:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        (folder / str(os.getpid())).touch()
        time.sleep(3600)
    if x == 0:
        return x
    deadline = time.monotonic() + 30
    while not list(folder.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.01)
    raise LoadError("OT006", f"item {x} fails", path="f.jsonl", line=x)


@pytest.mark.timeout(60)
def test_error_stops_a_worker_that_ignores_sigterm(tmp_path: Path) -> None:
    _SIGNED[:] = [tmp_path]
    with pytest.raises(LoadError):
        parallel_map(_stuck_in_worker_or_fail, list(range(6)), processes=2)
    assert list(tmp_path.iterdir())  # a worker was stuck when the error came
    assert multiprocessing.active_children() == []  # killed and reaped, not left behind


_RAY_THEN_POOL = """
import time
from orchestrace.core.errors import LoadError
from orchestrace.parallel import ensure_ray, parallel_map

ensure_ray("local", 1)  # Ray's threads and signal handlers are in this process before the fork


def fail(x):
    if x == 1:
        raise LoadError("OT006", "item 1 is odd", path="f.jsonl", line=1)
    time.sleep(0.2)
    return x


for _ in range(3):
    try:
        parallel_map(fail, [0, 1, 2, 3, 4, 5], processes=2)
    except LoadError as e:
        print("raised", e.code)
print(parallel_map(abs, [-2, -1, 0], processes=2))
"""


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_pool_stops_after_ray_started_in_the_same_process(tmp_path: Path) -> None:
    script = tmp_path / "ray_then_pool.py"
    script.write_text(_RAY_THEN_POOL)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    p = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=env,
    )
    try:
        out, err = p.communicate(timeout=200)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail("a pool forked after Ray had started was not stopped")
    assert p.returncode == 0, err
    assert out.split("\n")[:4] == ["raised OT006"] * 3 + ["[2, 1, 0]"], (out, err)


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


def test_asked_workers_are_at_most_four_per_cpu(tmp_path: Path) -> None:
    """--workers 100000 on a corpus of as many files started as many processes."""
    files = []
    for i in range(8 * (os.cpu_count() or 1) + 1):
        p = tmp_path / f"{i}.jsonl"
        p.write_text("{}\n")
        files.append(str(p))
    assert ingest_processes(files, 100_000) == 4 * (os.cpu_count() or 1)
    assert ingest_processes(files, 3) == 3
