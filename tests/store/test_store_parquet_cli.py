"""Parquet export read by DuckDB, Polars and pyarrow without our code; the three CLI commands."""

from __future__ import annotations

import subprocess
from pathlib import Path

import duckdb
import orjson
import polars as pl
import pyarrow.dataset as pads
import pytest
import typer
from store_kit import run_cli
from typer.testing import CliRunner

from orchestrace.cli import app
from orchestrace.cli.ray_option import RayCommand, RayOption
from orchestrace.store import export_parquet, ingest, query, stats
from orchestrace.store.schema import TABLES


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, corpus) -> Path:
    files, _ = corpus
    s = tmp_path_factory.mktemp("pq") / "s.duckdb"
    ingest(str(s), [str(f) for f in files])
    return s


def test_parquet_layout_and_readers(tmp_path: Path, store: Path) -> None:
    out = tmp_path / "lake"
    counts = export_parquet(str(store), str(out))
    assert counts == stats(str(store))
    parts = sorted(
        p.relative_to(out / "events").parent.as_posix() for p in (out / "events").rglob("*.parquet")
    )
    today = query(
        str(store), "SELECT max(date) AS d FROM traces WHERE system = 'orchestrace-gen'"
    ).to_pylist()[0]["d"]
    assert parts == ["system=handmade/date=2025-03-04", f"system=orchestrace-gen/date={today.isoformat()}"]
    assert {p.name for p in out.iterdir()} == set(TABLES)  # no temporary folder left behind

    glob = str(out / "events" / "**" / "*.parquet")
    want = {
        r["agent"]: (r["n"], r["usd"])
        for r in query(
            str(store), "SELECT agent, count(*) AS n, sum(cost_usd) AS usd FROM events GROUP BY agent"
        ).to_pylist()
    }
    con = duckdb.connect()
    got_duck = {
        a: (n, u)
        for a, n, u in con.execute(
            f"SELECT agent, count(*), sum(cost_usd) FROM read_parquet('{glob}', hive_partitioning = true) GROUP BY agent"
        ).fetchall()
    }
    hand = con.execute(
        f"SELECT DISTINCT system, date FROM read_parquet('{glob}', hive_partitioning = true) WHERE trace_id = 'hand-1'"
    ).fetchall()
    assert [(s, str(d)) for s, d in hand] == [("handmade", "2025-03-04")]
    got_pl = {
        r["agent"]: (r["n"], r["usd"])
        for r in pl.scan_parquet(glob, hive_partitioning=True)
        .group_by("agent")
        .agg(pl.len().alias("n"), pl.col("cost_usd").sum().alias("usd"))
        .collect()
        .to_dicts()
    }
    table = pads.dataset(str(out / "events"), format="parquet", partitioning="hive").to_table()
    got_pa = {}
    for r in table.group_by("agent").aggregate([("agent", "count"), ("cost_usd", "sum")]).to_pylist():
        got_pa[r["agent"]] = (r["agent_count"], r["cost_usd_sum"])
    for got in (got_duck, got_pl, got_pa):
        assert got.keys() == want.keys()
        for a, (n, u) in want.items():
            assert got[a][0] == n and got[a][1] == pytest.approx(u or 0.0, abs=1e-12)
    assert table.num_rows == counts["events"] and "system" in table.column_names
    # JSON columns are plain strings any reader can parse
    attrs = con.execute(
        f"SELECT attrs FROM read_parquet('{glob}', hive_partitioning = true) WHERE trace_id = 'hand-1' AND id = 'e1'"
    ).fetchall()
    assert orjson.loads(attrs[0][0]) == {"k": [1, 2]}


def test_parquet_refuses_to_overwrite(tmp_path: Path, store: Path) -> None:
    out = tmp_path / "lake"
    export_parquet(str(store), str(out), tables=["traces"])
    from orchestrace.core.errors import OrchestraceError

    with pytest.raises(OrchestraceError) as e:
        export_parquet(str(store), str(out), tables=["traces"])
    assert e.value.code == "OT011"
    assert export_parquet(str(store), str(out), tables=["traces"], overwrite=True) == {"traces": 13}


def test_cli_ingest_query_parquet(tmp_path: Path, corpus) -> None:
    files, _ = corpus
    s = str(tmp_path / "c.duckdb")
    runner = CliRunner()
    r = runner.invoke(app, ["ingest", *map(str, files), "--store", s, "--no-measure"])
    assert r.exit_code == 0, r.output
    assert "13 new, 0 replaced, 0 unchanged" in r.output
    r = runner.invoke(app, ["ingest", str(files[0]), "-s", s, "--no-measure"])
    assert "0 new, 0 replaced, 10 unchanged" in r.output
    r = runner.invoke(
        app, ["query", "SELECT agent, events FROM agents WHERE trace_id = 'hand-1' ORDER BY agent", "-s", s]
    )
    assert r.exit_code == 0 and "orch" in r.output and "2 row(s)" in r.output
    r = runner.invoke(
        app, ["query", "SELECT trace_id, date FROM traces WHERE system = 'handmade'", "-s", s, "-f", "json"]
    )
    assert orjson.loads(r.stdout) == [{"trace_id": "hand-1", "date": "2025-03-04"}]
    r = runner.invoke(
        app,
        [
            "query",
            "SELECT channel, value FROM rewards WHERE trace_id = 'hand-1' ORDER BY 1",
            "-s",
            s,
            "-f",
            "csv",
        ],
    )
    assert r.stdout.splitlines() == ["channel,value", "success,1.0", "team,1.0"]
    r = runner.invoke(app, ["parquet", "-s", s, "-o", str(tmp_path / "lake"), "-t", "agents"])
    assert r.exit_code == 0 and (tmp_path / "lake" / "agents" / "system=handmade").is_dir()


def test_query_json_writes_every_duckdb_type_exactly(store: Path) -> None:
    # a DECIMAL, a HUGEINT or an INTERVAL in a json result was an internal error (exit 3)
    sql = (
        "SELECT 1.5::DECIMAL(10,2) AS d, 12345678901234567.891::DECIMAL(38,3) AS e, "
        "170141183460469231731687303715884105727::HUGEINT AS h, 42::HUGEINT AS s, "
        "INTERVAL 1 DAY AS i, '\\xff'::BLOB AS b, [1.25::DECIMAL(5,2)] AS l, "
        "'nan'::DOUBLE AS n, 18446744073709551615::UBIGINT AS u"
    )
    r = CliRunner().invoke(app, ["query", sql, "-s", str(store), "-f", "json"])
    assert r.exit_code == 0, r.output
    [row] = orjson.loads(r.stdout)
    assert row == {
        "d": 1.5,
        "e": "12345678901234567.891",  # no float holds it: its exact text
        "h": "170141183460469231731687303715884105727",  # past 64 bits: its exact text
        "s": 42,
        "i": "MonthDayNano(months=0, days=1, nanoseconds=0)",
        "b": "ff",
        "l": [1.25],
        "n": None,  # JSON has no NaN
        "u": 18446744073709551615,
    }


def test_cli_errors_are_one_line(tmp_path: Path, corpus, capsys) -> None:
    files, _ = corpus
    s = str(tmp_path / "c.duckdb")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(files[3].read_bytes().replace(b"\n", b"") + b"\n" + b'{"trace_id": "x"}\n')

    def run(*args: str) -> subprocess.CompletedProcess:
        return run_cli(capsys, *args)

    r = run("ingest", str(bad), "-s", s)
    assert r.returncode == 1 and "bad.jsonl:2 trace x" in r.stderr and "OT101" in r.stderr
    assert "1 new" in r.stderr and "1 invalid not ingested" in r.stderr
    r = run("ingest", str(bad), "-s", s, "--on-error", "abort")
    assert r.returncode == 1 and "nothing was written" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run("query", "SELECT * FROM nowhere", "-s", s)
    assert r.returncode == 2 and "OT320" in r.stderr and "Traceback" not in r.stderr
    r = run("query", "SELECT 1", "-s", str(tmp_path / "missing.duckdb"))
    assert r.returncode == 2 and "no store here" in r.stderr
    assert not (tmp_path / "missing.duckdb").exists()


def test_ray_option_without_value() -> None:
    seen = []
    cmd = typer.Typer()

    @cmd.command(cls=RayCommand)
    def run(paths: list[str], ray: RayOption = None, quiet: bool = False) -> None:
        seen.append((ray, paths))

    @cmd.command()
    def other() -> None: ...

    runner = CliRunner()
    for args, want in [
        (["run", "a"], None),
        (["run", "a", "--ray"], "local"),
        (["run", "--ray", "--quiet", "a"], "local"),
        (["run", "--ray", "auto", "a"], "auto"),
        (["run", "a", "--ray", "10.0.0.5:6379"], "10.0.0.5:6379"),
    ]:
        assert runner.invoke(cmd, args).exit_code == 0
        assert seen.pop() == (want, ["a"])


def test_lake_with_an_empty_table_by_trace_start_day(tmp_path: Path) -> None:
    """Polars and pyarrow read every table, an empty one included; partitions are start days."""
    from orchestrace.core.io import save
    from orchestrace.gen import generate

    traces = [generate(seed=s, size=20) for s in range(3)]
    traces[0].metadata = {"t0_unix": 1_746_962_815.0}  # 2025-05-11 11:26:55 UTC
    traces[1].metadata = {"t0_unix": 1_747_007_999.0}  # 2025-05-11 23:59:59 UTC
    save(traces, tmp_path / "t.jsonl")
    store = str(tmp_path / "s.duckdb")
    ingest(store, [str(tmp_path / "t.jsonl")])
    out = tmp_path / "lake"
    counts = export_parquet(store, str(out))
    stored = stats(store)
    assert counts == stored and stored["credits"] == 0  # generated traces carry no credit
    assert [p.name for p in (out / "credits").rglob("*.parquet")] == ["empty.parquet"]
    for name in TABLES:
        lazy = pl.scan_parquet(str(out / name / "**" / "*.parquet"), hive_partitioning=True)
        assert lazy.select(pl.len()).collect().item() == stored[name], name
        table = pads.dataset(str(out / name), format="parquet", partitioning="hive").to_table()
        assert table.num_rows == stored[name], name
        cols = {c for c, _ in TABLES[name]} | {"system", "date"}
        assert cols <= set(lazy.collect_schema().names()) and cols <= set(table.column_names), name
    today = query(store, "SELECT max(date) AS d FROM traces").to_pylist()[0]["d"]
    parts = {p.parent.name for p in (out / "events").rglob("*.parquet")}
    assert parts == {"date=2025-05-11", f"date={today.isoformat()}"}  # the undated one: ingest day
