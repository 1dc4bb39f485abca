"""Bad situations, with real processes: killed mid-ingest, corrupt, locked, full disk."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from store_kit import dump_tables, hand_trace, run_cli

from orchestrace.core.io import save
from orchestrace.gen import generate_corpus
from orchestrace.store import StoreError, ingest, query, stats
from orchestrace.store.schema import TABLES

# Writes a line after each chunk is inserted (inside the open transaction), then keeps going.
_KILLABLE = """
import sys
from orchestrace.store import ingest
ingest(sys.argv[1], sys.argv[2:], measure=False, chunk_events=300,
       progress=lambda r: print("chunk", r.events, flush=True))
print("done", flush=True)
"""


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrace", *args], capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    f = tmp_path_factory.mktemp("big") / "big.jsonl"
    save(generate_corpus(24, seed=11, size=150), f)
    return f


def test_sigkill_mid_ingest_leaves_store_as_it_was(tmp_path: Path, big_file: Path) -> None:
    store = tmp_path / "s.duckdb"
    first = tmp_path / "first.json"
    save(hand_trace("before"), first)
    ingest(str(store), [str(first)])
    before = dump_tables(store)
    p = subprocess.Popen(
        [sys.executable, "-c", _KILLABLE, str(store), str(big_file)], stdout=subprocess.PIPE, text=True
    )
    try:
        line = p.stdout.readline()  # first chunk written, transaction still open
        assert line.startswith("chunk"), line
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.wait(timeout=60)
    assert p.returncode == -signal.SIGKILL
    assert dump_tables(store) == before  # opens cleanly, and nothing of the killed ingest is there
    rep = ingest(str(store), [str(big_file)], measure=False)  # the same ingest, run to the end
    assert rep.inserted == 24 and stats(str(store))["traces"] == 25


def test_sigkill_after_commit_leaves_store_fully_updated(tmp_path: Path, big_file: Path) -> None:
    store = tmp_path / "s.duckdb"
    p = subprocess.Popen(
        [sys.executable, "-c", _KILLABLE, str(store), str(big_file)], stdout=subprocess.PIPE, text=True
    )
    lines = []
    for line in p.stdout:
        lines.append(line)
        if line.startswith("done"):
            os.kill(p.pid, signal.SIGKILL)  # before the connection is closed cleanly
            break
    p.wait(timeout=60)
    assert lines[-1].startswith("done")
    # every row is there: the store equals one the same ingest wrote and closed cleanly (but
    # for the time of the ingest)
    clean = tmp_path / "clean.duckdb"
    ingest(str(clean), [str(big_file)], measure=False, chunk_events=300)
    assert stats(str(store))["traces"] == 24 and _untimed(store) == _untimed(clean)


def _untimed(store: Path) -> dict[str, list[tuple]]:
    at = [c for c, _ in TABLES["traces"]].index("ingested_at")
    rows = dump_tables(store)
    return {**rows, "traces": [r[:at] + r[at + 1 :] for r in rows["traces"]]}


def test_corrupt_store(tmp_path: Path, corpus, capsys) -> None:
    files, _ = corpus
    store = tmp_path / "bad.duckdb"
    store.write_bytes(b"this is not a database\n" * 500)
    r = run_cli(capsys, "ingest", str(files[3]), "--store", str(store))
    assert r.returncode == 2
    assert "OT301" in r.stderr and "corrupt" in r.stderr and "Traceback" not in r.stderr
    assert store.read_bytes() == b"this is not a database\n" * 500  # untouched
    with pytest.raises(StoreError) as e:
        query(str(store), "SELECT 1")
    assert e.value.code == "OT301"


def test_duckdb_file_that_is_not_a_store(tmp_path: Path, corpus) -> None:
    store = tmp_path / "other.duckdb"
    con = duckdb.connect(str(store))
    con.execute("CREATE TABLE x (a INT)")
    con.close()
    with pytest.raises(StoreError) as e:
        ingest(str(store), [str(corpus[0][3])])
    assert e.value.code == "OT304"


def test_locked_store(tmp_path: Path, corpus, capsys) -> None:
    files, _ = corpus
    store = tmp_path / "s.duckdb"
    ingest(str(store), [str(files[3])])
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(store)!r}); print('ok', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ok"
        r = run_cli(capsys, "ingest", str(files[0]), "--store", str(store))
        assert r.returncode == 2 and "OT302" in r.stderr and f"process {holder.pid}" in r.stderr
        assert "Traceback" not in r.stderr
        r = run_cli(capsys, "query", "SELECT count(*) FROM traces", "--store", str(store))
        assert r.returncode == 2 and "OT302" in r.stderr
    finally:
        holder.kill()
        holder.wait()
    assert stats(str(store))["traces"] == 1  # the refused ingest wrote nothing


def _capped(limit: int):
    def cap() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return cap


def test_disk_full_before_commit(tmp_path: Path, big_file: Path) -> None:
    """A file-size limit makes every write past it fail with EFBIG, as a full disk fails with ENOSPC.

    300 kB is less than the write-ahead log of this ingest needs: the commit itself fails.
    """
    store = tmp_path / "s.duckdb"
    first = tmp_path / "first.json"
    save(hand_trace("before"), first)
    ingest(str(store), [str(first)])
    before = dump_tables(store)
    # a watchdog, not a speed check: a disk-full ingest that hangs raises TimeoutExpired
    r = _cli(
        "ingest",
        str(big_file),
        "--store",
        str(store),
        "--no-measure",
        preexec_fn=_capped(300_000),
        timeout=600,
    )
    assert r.returncode == 2, r.stderr
    assert "OT303" in r.stderr and "disk full" in r.stderr and "Traceback" not in r.stderr
    assert dump_tables(store) == before


def test_disk_full_after_commit(tmp_path: Path, big_file: Path) -> None:
    """Room for the log but not for the checkpoint: committed, said so, and readable afterwards."""
    store = tmp_path / "s.duckdb"
    first = tmp_path / "first.json"
    save(hand_trace("before"), first)
    ingest(str(store), [str(first)])
    limit = os.path.getsize(store) + 100_000
    r = _cli("ingest", str(big_file), "--store", str(store), "--no-measure", preexec_fn=_capped(limit))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "OT305" in r.stderr and "committed" in r.stderr
    assert stats(str(store))["traces"] == 25  # the log is replayed on open


def test_a_typo_in_every_input_leaves_no_empty_store(tmp_path: Path) -> None:
    """ingest of a missing file created a 536 KB store with empty tables."""
    store = tmp_path / "new.duckdb"
    rep = ingest(str(store), [str(tmp_path / "rn.json")])
    assert [f.first().code for f in rep.failures] == ["OT001"] and not store.exists()
    good = tmp_path / "run.json"
    save(hand_trace(), good)
    ingest(str(store), [str(good)])
    rep = ingest(str(store), [str(tmp_path / "rn.json")])  # an existing store is kept
    assert rep.failures and stats(str(store))["traces"] == 1


def test_a_file_that_is_not_a_store_is_named_so(tmp_path: Path) -> None:
    """query on a trace file said "Catalog Error: Cannot launch in-memory database in read-only
    mode"; parquet -o an existing file was an internal error (FileExistsError, exit 3)."""
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.store import export_parquet

    trace = tmp_path / "run.json"
    save(hand_trace(), trace)
    with pytest.raises(StoreError) as e:
        query(str(trace), "SELECT 1")
    assert (e.value.code, "not a DuckDB store" in e.value.message) == ("OT301", True)
    store = tmp_path / "s.duckdb"
    ingest(str(store), [str(trace)])
    with pytest.raises(OrchestraceError) as e2:
        export_parquet(str(store), str(trace))
    assert e2.value.code == "OT011" and "is a file" in e2.value.message
    # a store that is none left an empty -o folder behind
    with pytest.raises(StoreError):
        export_parquet(str(trace), str(tmp_path / "pq"))
    assert not (tmp_path / "pq").exists()


def test_a_trace_file_whose_name_is_not_utf8_is_ingested(tmp_path: Path) -> None:
    """Its path went into the store's source column as surrogate escapes: DuckDB's "cannot encode
    str", reported as a store error (OT300), and nothing was stored."""
    from orchestrace.store.db import query

    folder = os.path.join(os.fsencode(tmp_path), b"d\xff")
    os.mkdir(folder)
    path = os.fsdecode(os.path.join(folder, b"t\xfe.json"))
    save(hand_trace(), path)
    store = str(tmp_path / "s.duckdb")
    rep = ingest(store, [path])
    assert not rep.failures and stats(store)["traces"] == 1
    (row,) = query(store, "SELECT source FROM traces").to_pylist()
    assert row["source"].endswith("d\\xff/t\\xfe.json")
