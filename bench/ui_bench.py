"""Trace browser benchmark: list and filter pages of ``orchestrace ui`` on a large store.

    python bench/ui_bench.py                          # 100,000 traces, about 10 M events
    python bench/ui_bench.py --traces 10000           # smaller
    python bench/ui_bench.py --store /tmp/ui.duckdb   # keep (and reuse) the store

1. Store: ``--base`` traces of about ``--size`` events from ``orchestrace.gen`` are ingested
   (validated, measured, summary rows), then copied under new trace ids inside DuckDB until the
   store holds ``--traces`` traces, every table included (as bench/store_bench.py grows its
   store: generating and ingesting 10 M events one by one takes most of an hour on 2 shared
   cores). Each copy gets its own system (one of three), date (90 days), and cost, tokens and
   times scaled by a factor from a hash of its id, so sorts and filters meet varied values.
   Then one trace of ``--big`` events is generated and ingested on its own (not copied).
2. Pages: the server of ``orchestrace ui`` in a thread, each page fetched over HTTP on
   127.0.0.1 (query, distributions, HTML rendering and the socket included): one warm-up, then
   ``--repeat`` fetches *cold* (the browser's cache of filter counts and distributions emptied
   before each: a filter seen for the first time) and ``--repeat`` *warm* (cached: another sort
   or page of a filter already shown); median and worst of each. The goal: every list page under
   300 ms, cold. The trace pages (the ``--big``-event one and one of the copies) are timed the same
   way, for information.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time

import duckdb
import httpx

from orchestrace.core.io import save
from orchestrace.gen import generate, generate_corpus
from orchestrace.store import ingest
from orchestrace.store.schema import TABLES
from orchestrace.viewer.browse.server import ui_server

GOAL_MS = 300.0
SYSTEMS = ("alpha", "beta", "gamma")
BIG_ID = "big-trace"


def build_store(path: str, traces: int, base: int, size: int, big: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        corpus = os.path.join(tmp, "base.jsonl")
        save(generate_corpus(base, seed=0, size=size), corpus)
        rep = ingest(path, [corpus], workers=1)
        print(
            f"base: {base} generated traces, {rep.events:,} events ingested in {time.perf_counter() - t:.1f} s"
        )
    copies = -(-traces // base)
    t = time.perf_counter()
    con = duckdb.connect(path)
    con.execute("BEGIN TRANSACTION")
    con.execute(f"CREATE TEMP TABLE k AS SELECT range AS k FROM range(1, {copies})")
    for name, cols in TABLES.items():
        names = [c for c, _ in cols]
        sel = {c: f'x."{c}"' for c in names}
        sel["trace_id"] = "x.trace_id || '~' || k.k"
        f = "(0.5 + (hash(x.trace_id || k.k) % 1000) / 1000.0)"  # 0.5 .. 1.5, per copy
        if name in ("summary", "traces"):
            sel["system"] = f"['{SYSTEMS[0]}', '{SYSTEMS[1]}', '{SYSTEMS[2]}'][(1 + hash(k.k) % 3)::BIGINT]"
            sel["date"] = "x.date - (hash(k.k) % 90)::INTEGER"
        if name == "summary":
            for c in ("usd", "wall_clock_s", "critical_path_s"):
                sel[c] = f"x.{c} * {f}"
            sel["tokens"] = f"(x.tokens * {f})::BIGINT"
        body = ", ".join(sel[c] for c in names)
        con.execute(f"INSERT INTO {name} SELECT {body} FROM {name} x CROSS JOIN k")
    # exactly ``traces`` traces: drop the copies past it (the last copy round is partial)
    n = con.execute("SELECT count(*) FROM traces").fetchall()[0][0]
    if n > traces:
        con.execute(
            f"CREATE TEMP TABLE extra AS SELECT trace_id FROM traces ORDER BY trace_id DESC LIMIT {n - traces}"
        )
        for name in TABLES:
            con.execute(f"DELETE FROM {name} WHERE trace_id IN (SELECT trace_id FROM extra)")
    con.execute("COMMIT")
    con.execute("CHECKPOINT")
    got = {
        name: con.execute(f"SELECT count(*) FROM {name}").fetchall()[0][0]
        for name in ("traces", "events", "summary")
    }
    con.close()
    print(
        f"copied to {got['traces']:,} traces, {got['events']:,} events, {got['summary']:,} summary rows "
        f"in {time.perf_counter() - t:.1f} s ({os.path.getsize(path) / 1e6:,.0f} MB)"
    )
    if big:
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            one = os.path.join(tmp, "big.json")
            save(generate(seed=1, size=big, topology="hierarchical", trace_id=BIG_ID), one)
            rep = ingest(path, [one], workers=1)
            print(f"big: one trace of {rep.events:,} events ingested in {time.perf_counter() - t:.1f} s")


def pages(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    n = con.execute("SELECT count(*) FROM summary").fetchall()[0][0]
    some = con.execute(
        "SELECT trace_id FROM summary ORDER BY trace_id LIMIT 1 OFFSET ?", [n // 2]
    ).fetchall()[0][0]
    day = con.execute("SELECT max(date) FROM summary").fetchall()[0][0]
    last = max(1, -(-n // 50))
    return {
        "list, default (newest first)": "/",
        "sort by USD": "/?sort=usd",
        "sort by Critical Steps, ascending, page 2": "/?sort=critical_steps&desc=0&page=2",
        f"last page ({last:,}) by wall clock": f"/?sort=wall_clock_s&page={last}",
        "filter: system + status + reward >= 1": "/?system=beta&status=success&reward_min=1&sort=tokens",
        "filter: 30-day date range, by tokens": f"/?date_from={day.replace(day=1)}&date_to={day}&sort=tokens",
        "filter: text in tool names (web.fetch)": "/?text=web.fetch",
        "filter: text in ids (rare)": f"/?text={some}",
        "filter: nothing matches": "/?text=no-such-thing",
        "trace page, ~100 events (informational)": f"/trace?id={some}",
        "trace page, the big trace (informational)": f"/trace?id={BIG_ID}",
    }


def bench(store: str, repeat: int) -> bool:
    server, app = ui_server(store)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    base = f"http://{host}:{port}"
    ok = True
    print(f"\n{'page':<46} {'cold median':>11} {'worst':>7} {'warm median':>11} {'worst':>7}  bytes")
    with httpx.Client(timeout=300) as client:
        for label, path in pages(app.store.con).items():
            r = client.get(base + path)
            if r.status_code == 404:  # a store built without --big
                continue
            assert r.status_code == 200, (path, r.status_code, r.text[:300])
            cold, warm = [], []
            for times, clear in ((cold, True), (warm, False)):
                for _ in range(repeat):
                    if clear:
                        app.store.cache.clear()
                    t = time.perf_counter()
                    r = client.get(base + path)
                    times.append((time.perf_counter() - t) * 1000)
            listing = not path.startswith("/trace")
            ok &= not listing or max(cold) < GOAL_MS
            flag = "" if not listing else ("  ok" if max(cold) < GOAL_MS else "  OVER 300 ms")
            print(
                f"{label:<46} {statistics.median(cold):11.1f} {max(cold):7.1f} "
                f"{statistics.median(warm):11.1f} {max(warm):7.1f}  {len(r.content):,}{flag}"
            )
    server.shutdown()
    server.server_close()
    app.store.con.close()
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=100_000)
    ap.add_argument(
        "--base", type=int, default=1000, help="generated and ingested traces, copied up to --traces"
    )
    ap.add_argument("--size", type=int, default=100, help="events per generated trace (about)")
    ap.add_argument("--big", type=int, default=100_000, help="events of the one big trace (0: none)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--store", help="store file to build (kept) or reuse if it exists")
    a = ap.parse_args()
    tmp = None
    store = a.store
    if store is None:
        tmp = tempfile.TemporaryDirectory()
        store = os.path.join(tmp.name, "ui.duckdb")
    if not os.path.exists(store):
        build_store(store, a.traces, min(a.base, a.traces), a.size, a.big)
    ok = bench(store, a.repeat)
    print(f"\nevery list page under {GOAL_MS:.0f} ms (worst of {a.repeat} cold): {'yes' if ok else 'NO'}")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
