"""`orchestrace ui` over HTTP: bad input is a clear 4xx page (never a traceback or a 500), a
foreign Host is refused, the store is opened read-only, request text never becomes SQL."""

from __future__ import annotations

import html
import shutil
from http.server import ThreadingHTTPServer

import duckdb
import httpx
import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.store import ingest, query
from orchestrace.store.schema import STORE_VERSION
from orchestrace.viewer.browse import open_store
from orchestrace.viewer.browse.data import Query, list_traces, parse_query
from orchestrace.viewer.browse.server import parse_args

from .browse_kit import N_GEN
from .test_cli_view import run


def get(base: str, path: str, **kw) -> httpx.Response:
    return httpx.get(base + path, timeout=30, **kw)


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/?sort=usd;DROP TABLE traces", 400, "sort: no column"),
        ("/?page=0", 400, "page: '0'"),
        ("/?page=abc", 400, "page: 'abc'"),
        ("/?reward_min=nan", 400, "not a finite number"),
        ("/?date_from=2026-13-01", 400, "not a date"),
        ("/?desc=yes", 400, "expected 0 or 1"),
        ("/?system=a&system=b", 400, "given 2 times"),
        ("/?bogus=1", 400, "unknown parameter"),
        ("/?text=%ff%fe", 400, "malformed query string"),
        ("/?a=1&b", 400, "malformed query string"),
        ("/trace", 400, "'id' is required"),
        ("/trace?id=no-such-trace", 404, "no trace 'no-such-trace'"),
        ("/compare?a=gen-00", 400, "'b' is required"),
        ("/compare?a=gen-00&b=nope", 404, "no trace 'nope'"),
        ("/compare?pick=gen-00", 400, "pick exactly two"),
        ("/run?r=7", 404, "expected a run number"),
        ("/run?r=0&it=99", 404, "expected an iteration"),
        ("/run/trace?r=0&it=1&f=../../etc/passwd", 400, "expected a trace number"),
        ("/etc/passwd", 404, "no page"),
    ],
)
def test_bad_requests_are_clear_4xx_pages(browse_server, path, status, says) -> None:
    r = get(browse_server, path)
    assert r.status_code == status, r.text
    assert says in html.unescape(r.text)
    assert "Traceback" not in r.text and r.headers["content-type"].startswith("text/html")


def test_foreign_host_and_writes_are_refused(browse_server) -> None:
    port = browse_server.rsplit(":", 1)[1]
    assert get(browse_server, "/", headers={"Host": "evil.example"}).status_code == 421
    assert get(browse_server, "/", headers={"Host": f"evil.example:{port}"}).status_code == 421
    assert get(browse_server, "/", headers={"Host": f"localhost:{port}"}).status_code == 200
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"):
        assert httpx.request(method, browse_server + "/", timeout=30).status_code == 405, method


def test_text_filter_is_a_parameter_not_sql(browse_world) -> None:
    store = open_store(str(browse_world.store))
    n = len(browse_world.gen) + 3
    assert list_traces(store, Query()).total == n
    assert list_traces(store, Query(text="' OR 1=1 --")).total == 0
    assert list_traces(store, Query(text="%")).total == 0  # a LIKE wildcard is a character here
    assert list_traces(store, Query(text="gen-0")).total == 10
    assert list_traces(store, Query(text="web.fetch")).total > 0  # tool names
    assert list_traces(store, Query(text="<script>")).rows[0]["trace_id"] == browse_world.xss.trace_id


def test_the_store_is_attached_read_only(browse_world, tmp_path) -> None:
    copy = tmp_path / "s.duckdb"
    shutil.copy(browse_world.store, copy)
    before = copy.read_bytes()
    store = open_store(str(copy))
    with pytest.raises(duckdb.Error, match="read-only"):
        store.con.execute("DELETE FROM st.traces")
    list_traces(store, parse_query(parse_args("sort=usd&desc=0&text=gen")))
    store.con.close()
    assert copy.read_bytes() == before


def test_missing_other_and_foreign_files_are_named(tmp_path) -> None:
    with pytest.raises(OrchestraceError) as e:
        open_store(str(tmp_path / "none.duckdb"))
    assert e.value.code == "OT300"
    (tmp_path / "t.duckdb").write_text('{"trace_id": "x"}\n')
    with pytest.raises(OrchestraceError) as e:
        open_store(str(tmp_path / "t.duckdb"))
    assert e.value.code == "OT301"
    con = duckdb.connect(str(tmp_path / "v0.duckdb"))
    con.execute("CREATE TABLE store_info (key VARCHAR, value VARCHAR)")
    con.execute("INSERT INTO store_info VALUES ('version', 'orchestrace-store/0')")
    con.close()
    with pytest.raises(OrchestraceError, match="orchestrace-store/0") as e:
        open_store(str(tmp_path / "v0.duckdb"))
    assert e.value.code == "OT304"
    r = run("ui", "-s", str(tmp_path / "none.duckdb"))
    assert r.returncode == 2 and "OT300" in r.stderr and "Traceback" not in r.stderr + r.stdout


def test_cli_warns_off_loopback_and_names_the_address(browse_world, monkeypatch) -> None:
    def stop(self) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ThreadingHTTPServer, "serve_forever", stop)
    r = run("ui", "-s", str(browse_world.store), "--port", "0")
    assert (
        r.returncode == 0 and r.stdout.startswith("serving http://127.0.0.1:") and "warning" not in r.stderr
    )
    r = run("ui", "-s", str(browse_world.store), "--port", "0", "--host", "0.0.0.0")
    assert r.returncode == 0 and "warning: serving on 0.0.0.0" in r.stderr


def _downgrade(path) -> None:
    """What a store written before the summary table looks like (orchestrace-store/1)."""
    con = duckdb.connect(str(path))
    con.execute("DROP TABLE summary")
    con.execute("UPDATE store_info SET value = 'orchestrace-store/1'")
    con.close()


def test_an_old_store_is_browsed_with_a_notice_and_upgraded_by_an_ingest(browse_world, tmp_path) -> None:
    old = tmp_path / "old.duckdb"
    shutil.copy(browse_world.store, old)
    _downgrade(old)
    store = open_store(str(old))
    assert store.version == "orchestrace-store/1" and "orchestrace-store/1" in store.notice
    assert list_traces(store, Query(sort="usd")).total == N_GEN + 3
    store.con.close()
    assert query(str(old), "SELECT count(*) AS n FROM traces")["n"].to_pylist() == [
        N_GEN + 3
    ]  # still readable
    rep = ingest(str(old), [], workers=1)  # any ingest upgrades it
    assert rep.inserted == 0
    got = query(str(old), "SELECT value FROM store_info")["value"].to_pylist()
    assert got == [STORE_VERSION]
    fresh = query(str(browse_world.store), "SELECT * FROM summary ORDER BY trace_id").to_pylist()
    assert query(str(old), "SELECT * FROM summary ORDER BY trace_id").to_pylist() == fresh
    assert open_store(str(old)).notice is None


def test_summary_rows_of_a_fork_and_its_parent(browse_world) -> None:
    rows = {r["trace_id"]: r for r in query(str(browse_world.store), "SELECT * FROM summary").to_pylist()}
    child, parent = rows[browse_world.child.trace_id], rows[browse_world.parent.trace_id]
    assert child["parent_id"] == browse_world.parent.trace_id and parent["parent_id"] is None
    assert child["events"] == len(browse_world.child.events) and child["agents"] == len(
        browse_world.child.agents()
    )
    g = browse_world.gen[0]
    assert rows[g.trace_id]["team_reward"] == g.rewards["team"]
    assert rows[g.trace_id]["tokens"] == g.costs["tokens"]
    assert rows[g.trace_id]["status"] == ("success" if g.metrics["task_success"] >= 0.5 else "failure")


def test_pages_split_the_sorted_list_without_overlap(browse_world) -> None:
    store = open_store(str(browse_world.store))
    got = [list_traces(store, Query(sort="tokens", desc=False, page=k), page_size=10) for k in (1, 2, 3, 4)]
    ids = [r["trace_id"] for lst in got for r in lst.rows]
    assert [len(lst.rows) for lst in got] == [10, 10, N_GEN + 3 - 20, 0] and len(set(ids)) == N_GEN + 3
    tokens = [r["tokens"] for lst in got for r in lst.rows]
    assert tokens == sorted(tokens)


@pytest.mark.parametrize("sort", ["team_reward", "critical_path_s", "trace_id"])
@pytest.mark.parametrize("desc", [True, False])
def test_pages_from_either_end_follow_one_order(browse_world, sort, desc) -> None:
    """Pages past the middle are read in the reverse order: NULLs and ties land as on page 1's side."""
    store = open_store(str(browse_world.store))
    order = f"{sort} {'DESC' if desc else 'ASC'} NULLS LAST, trace_id"
    want = [r[0] for r in store.con.execute(f"SELECT trace_id FROM summary ORDER BY {order}").fetchall()]
    got = [
        r["trace_id"]
        for k in range(1, 9)
        for r in list_traces(store, Query(sort=sort, desc=desc, page=k), page_size=4).rows
    ]
    assert got == want


def test_a_large_compare_draws_stretches_not_one_rect_per_event() -> None:
    import re

    from orchestrace.gen import generate
    from orchestrace.viewer.browse.data import compare
    from orchestrace.viewer.browse.pages import MAX_BARS, compare_page

    a = generate(seed=1, size=8000, topology="swarm")
    b = generate(seed=2, size=300, topology="swarm")
    page = compare_page(compare(a, b), {}, {}, runs=False)
    merged = re.findall(r'<rect class="a merged"[^>]*><title>A ([\d,]+) events</title>', page)
    assert 0 < len(merged) < MAX_BARS and sum(int(n.replace(",", "")) for n in merged) == len(a.events)
    assert page.count('<rect class="b"') == len(b.events)  # a small trace keeps its events


def test_malformed_http_is_a_4xx_and_the_server_keeps_answering(browse_server) -> None:
    import socket

    host, port = browse_server.removeprefix("http://").split(":")
    for raw in (
        b"GARBAGE\r\n\r\n",
        b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\x00\xff\r\n\r\n",
    ):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(raw)
            reply = b""
            while chunk := s.recv(4096):
                reply += chunk
        # http.server's own error page (an HTTP/0.9-style reply to a request line it cannot read)
        assert b"Error code: 400" in reply or b"Error code: 414" in reply, reply[:300]
        assert b"Traceback" not in reply
    assert get(browse_server, "/").status_code == 200


def test_a_folder_that_is_no_training_run_is_named(tmp_path, browse_world) -> None:
    from orchestrace.viewer.browse import read_run

    with pytest.raises(OrchestraceError, match="not a training run folder") as e:
        read_run(tmp_path)
    assert e.value.code == "OT342"
    (tmp_path / "iter-000").mkdir()
    (tmp_path / "iter-000" / "iteration.json").write_text("{not json")
    with pytest.raises(OrchestraceError, match="unreadable iteration record") as e:
        read_run(tmp_path)
    r = run("ui", "-s", str(browse_world.store), "--run", str(tmp_path), "--port", "0")
    assert r.returncode == 2 and "OT342" in r.stderr and "Traceback" not in r.stderr


def test_an_empty_store_and_no_runs_are_pages_not_errors(tmp_path) -> None:
    from orchestrace.viewer.browse.server import App, serve_in_thread

    ingest(str(tmp_path / "e.duckdb"), [], workers=1)
    server, url = serve_in_thread(App(open_store(str(tmp_path / "e.duckdb"))))
    try:
        r = httpx.get(url + "?sort=usd&page=3", timeout=30)
        assert r.status_code == 200 and "0 trace(s) match" in r.text
        r = httpx.get(url + "run?r=0", timeout=30)
        assert r.status_code == 404 and "r: there are no training runs (ui --run FOLDER shows one)" in r.text
    finally:
        server.shutdown()
        server.server_close()


def test_a_taken_port_is_named(browse_world, browse_server) -> None:
    port = browse_server.rsplit(":", 1)[1]
    r = run("ui", "-s", str(browse_world.store), "--port", port)
    assert r.returncode == 2 and f"OT343 error: cannot listen on 127.0.0.1:{port}" in r.stderr
    assert "Traceback" not in r.stderr


def test_extreme_but_valid_totals_are_stored_and_listed(tmp_path) -> None:
    """2**63 - 1 tokens (valid) was past BIGINT once measure made it a float: the ingest failed
    with a DuckDB conversion error (OT300) where the store before the summary table took it."""
    import orjson

    big = 2**63 - 1
    doc = {
        "schema_version": "orchestrace/1",
        "trace_id": "huge",
        "task_id": "t",
        "edges": [],
        "rewards": {"team": -1e308},
        "costs": {"tokens": big, "usd": 1e308, "wall_clock_s": 1e308},
        "events": [
            {
                "id": "e1",
                "t": 0,
                "t_end": 1e308,
                "type": "message",
                "agent": "a",
                "tokens_in": big,
                "cost_usd": 1e308,
            }
        ],
    }
    small = {
        **doc,
        "trace_id": "small",
        "rewards": {"team": 1e308},
        "costs": {"tokens": 0, "usd": 0, "wall_clock_s": 1},
    }
    small["events"] = [{"id": "e1", "t": 0, "t_end": 1, "type": "message", "agent": "a"}]
    (tmp_path / "t.jsonl").write_bytes(orjson.dumps(doc) + b"\n" + orjson.dumps(small) + b"\n")
    rep = ingest(str(tmp_path / "s.duckdb"), [str(tmp_path / "t.jsonl")], workers=1)
    assert rep.inserted == 2 and not rep.failures
    assert query(str(tmp_path / "s.duckdb"), "SELECT tokens FROM summary WHERE trace_id = 'huge'")[
        "tokens"
    ].to_pylist() == [big]
    store = open_store(str(tmp_path / "s.duckdb"))
    lst = list_traces(store, Query(sort="team_reward"))
    assert [r["trace_id"] for r in lst.rows] == ["small", "huge"]
    reward = next(h for h in lst.histograms if h.key == "team_reward")
    assert reward.counts[0] == 1 and reward.counts[-1] == 1


def test_an_iteration_with_an_unreadable_trace_file_lists_the_rest(browse_world, tmp_path) -> None:
    """A file a running loop is still writing: its row names the file and the error (the whole
    iteration page was a 400 for it). The run folder is a copy: its records name the original's
    absolute paths, and the copy's own files are listed (they were left out)."""
    from orchestrace.viewer.browse import read_run
    from orchestrace.viewer.browse.server import App, serve_in_thread

    run_dir = tmp_path / "run"
    shutil.copytree(browse_world.run_dir, run_dir)
    bad = run_dir / "iter-001" / "run-1.json"
    bad.write_bytes(bad.read_bytes()[:100])
    server, url = serve_in_thread(App(open_store(str(browse_world.store)), [read_run(run_dir)]))
    try:
        r = httpx.get(url + "run?r=0&it=1", timeout=30)
    finally:
        server.shutdown()
        server.server_close()
    assert r.status_code == 200, r.text
    text = html.unescape(r.text)
    assert '<tr class="unreadable"><td>training</td><td>run-1.json</td><td>OT0' in text
    assert ">train-1-0</a>" in text and ">eval-1-q1</a>" in text and "iteration 1: 5 trace(s)" in text
