"""Ray: same results as local mode, Ray Data over Parquet, and loopback-only networking.

One local Ray instance (2 CPUs) is shared by the whole session (``ray_local`` in conftest).
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest

from orchestrace.gen import generate
from orchestrace.parallel import BOOTSTRAP_FILE, BOOTSTRAP_TEXT, item_seeds, parallel_map
from orchestrace.store import agent_cost_ray, export_parquet, ingest, map_traces, query

pytestmark = pytest.mark.slow


def noisy_rollout(topology: str, seed: int) -> tuple[str, int, float]:
    """A seeded job: generate a trace from the item's seed and reduce it to numbers."""
    tr = generate(seed=seed, size=40, topology=topology)
    rng = np.random.default_rng(seed)
    return tr.trace_id, len(tr.events), float(rng.normal())


def critical_path_s(trace) -> tuple[str, float]:
    from orchestrace.measure import critical_path

    return trace.trace_id, critical_path(trace)["length_s"]


def test_item_seeds_depend_on_index_only() -> None:
    a = item_seeds(7, 5)
    assert a == item_seeds(7, 5) and a[:3] == item_seeds(7, 3) and len(set(a)) == 5
    assert a != item_seeds(8, 5) and all(0 <= s < 2**63 for s in a)


def test_parallel_map_same_as_local(ray_local: str) -> None:
    items = ["centralized", "debate", "swarm", "hierarchical", "harness", "planner_executor_critic"] * 2
    local = parallel_map(noisy_rollout, items, seed=42)
    assert parallel_map(noisy_rollout, items, seed=42, ray=ray_local) == local
    assert parallel_map(noisy_rollout, items, seed=42, ray=ray_local, batch=5) == local
    assert parallel_map(noisy_rollout, items, seed=43, ray=ray_local) != local


def _rows(store: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(store), read_only=True)
    try:
        out = {"traces": sorted(con.execute("SELECT * EXCLUDE (ingested_at) FROM traces").fetchall())}
        for t in ("events", "edges", "agents", "rewards", "credits", "metrics"):
            out[t] = sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
        return out
    finally:
        con.close()


def test_ingest_with_ray_same_as_local(tmp_path: Path, corpus, ray_local: str) -> None:
    files, _ = corpus
    paths = [str(f) for f in files]
    a, b = tmp_path / "local.duckdb", tmp_path / "ray.duckdb"
    ra = ingest(str(a), paths)
    rb = ingest(str(b), paths, ray=ray_local)
    assert (ra.inserted, ra.events) == (rb.inserted, rb.events) == (13, ra.events)
    assert _rows(a) == _rows(b)
    assert ingest(str(b), paths, ray=ray_local).unchanged == 13


def test_map_traces_and_ray_data(tmp_path: Path, corpus, ray_local: str) -> None:
    files, _ = corpus
    store = tmp_path / "s.duckdb"
    ingest(str(store), [str(f) for f in files], measure=False)
    local = map_traces(critical_path_s, str(store))
    assert [t for t, _ in local] == sorted(t for t, _ in local) and len(local) == 13
    assert map_traces(critical_path_s, str(store), ray=ray_local, batch=4) == local
    assert map_traces(critical_path_s, [str(f) for f in files], ray=ray_local) == map_traces(
        critical_path_s, [str(f) for f in files]
    )

    lake = tmp_path / "lake"
    export_parquet(str(store), str(lake), tables=["events"])
    got = agent_cost_ray(str(lake), ray=ray_local)
    want = query(
        str(store),
        "SELECT agent, count(*) AS n, coalesce(sum(tokens_in), 0) + coalesce(sum(tokens_out), 0) AS tok, "
        "coalesce(sum(cost_usd), 0) AS usd FROM events GROUP BY agent",
    ).to_pylist()
    assert got.keys() == {r["agent"] for r in want}
    for r in want:
        g = got[r["agent"]]
        assert (g["events"], g["tokens"]) == (r["n"], r["tok"]) and g["usd"] == pytest.approx(
            r["usd"], abs=1e-12
        )


_RAY_SCRIPT = """
import sys
from orchestrace.parallel import parallel_map, start_local
start_local(num_cpus=1, home=sys.argv[1])
print(parallel_map(abs, [-1, -2, 3], ray="local"), flush=True)
"""
_ADDR = re.compile(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)"')


def _loopback(addr: str) -> bool:
    ip = ipaddress.ip_address(addr)
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def test_loopback_check_itself() -> None:
    assert _loopback("127.0.0.1") and _loopback("::1") and _loopback("::ffff:127.0.0.1")
    assert not _loopback("8.8.8.8") and not _loopback("192.0.2.2") and not _loopback("::ffff:192.0.2.2")
    assert not _loopback("169.254.169.254")


def test_ray_connects_to_loopback_only(tmp_path: Path) -> None:
    """Every connect() of Ray and all its child processes goes to 127.0.0.1 (or ::1)."""
    strace = shutil.which("strace")
    assert strace, "strace is required for this test (apt-get install strace)"
    home = tmp_path / "home"
    home.mkdir()
    (home / BOOTSTRAP_FILE).write_text(BOOTSTRAP_TEXT)
    log = tmp_path / "connect.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    r = subprocess.run(
        [
            strace,
            "-f",
            "-qq",
            "-e",
            "trace=connect",
            "-o",
            str(log),
            sys.executable,
            "-c",
            _RAY_SCRIPT,
            str(home),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=170,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().endswith("[1, 2, 3]")
    addrs = [a or b for a, b in _ADDR.findall(log.read_text())]
    assert addrs, "strace saw no IP connection at all: the check would prove nothing"
    outside = sorted({a for a in addrs if not _loopback(a)})
    assert outside == [], f"Ray connected outside loopback: {outside}"


def test_cli_ingest_with_bare_ray_flag(tmp_path: Path, corpus, ray_local: str) -> None:
    from typer.testing import CliRunner

    from orchestrace.cli import app

    files, _ = corpus
    s = str(tmp_path / "c.duckdb")
    r = CliRunner().invoke(app, ["ingest", *map(str, files), "-s", s, "--no-measure", "--ray"])
    assert r.exit_code == 0, r.output
    assert "13 new, 0 replaced, 0 unchanged" in r.output
    assert query(s, "SELECT count(*) AS n FROM traces")["n"].to_pylist() == [13]
