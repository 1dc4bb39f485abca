"""Store benchmark: ingest throughput, query latency at 10M events, Ray speed-up (one run, one machine).

    python bench/store_bench.py                       # full run (10M events for the queries)
    python bench/store_bench.py --base-traces 40 --target-events 1000000 --ray-items 16   # quick

1. Ingest: ``orchestrace.store.ingest`` (parse + validate + rows + transaction; with and without
   the measure metrics; in one process, ``workers=1``, and with one process per CPU) against
   DuckDB's own ``read_json`` + ``unnest`` of the same JSONL files into an events table (no
   validation, no other tables), the three alternating ``--repeat`` times: median events per
   second each, and the median ratio with every run's.
2. Queries: the store is grown to ``--target-events`` by copying the generated traces under new
   trace ids inside DuckDB (generating 10M events with ``orchestrace.gen`` takes ~15 min here);
   per-agent cost and critical-path aggregates, median of 5 warm runs, DuckDB on 2 threads.
3. Ray: a CPU-bound per-trace job (generate a trace from its seed, run ``measure.analyze``) over
   ``--ray-items`` seeds: in-process, then Ray with 1 and 2 worker CPUs; speed-ups and the fitted
   scaling model T(N) = a + b/N (see docs/store.md).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time
from typing import Any

import duckdb

from orchestrace.core.io import save
from orchestrace.gen import GEN_TOPOLOGIES, generate, generate_corpus
from orchestrace.parallel import parallel_map
from orchestrace.store import ingest
from orchestrace.store.schema import TABLES

QUERIES = {
    "per-agent cost": "SELECT agent, count(*) AS events, sum(tokens_in + tokens_out) AS tokens, "
    "sum(cost_usd) AS usd FROM events GROUP BY agent ORDER BY usd DESC",
    "top-10 (trace, agent) cost": "SELECT trace_id, agent, sum(cost_usd) AS usd FROM events "
    "GROUP BY ALL ORDER BY usd DESC LIMIT 10",
    "critical path by topology": "SELECT t.topology, count(*) AS traces, avg(m.value) AS mean_s, "
    "quantile_cont(m.value, 0.9) AS p90_s FROM metrics m JOIN traces t USING (trace_id) "
    "WHERE m.source = 'measure' AND m.name = 'critical_path_s' GROUP BY 1 ORDER BY 1",
    "critical-path share per agent": "SELECT agent, sum(greatest(t_end - t, 0)) FILTER (WHERE critical) "
    "/ nullif(sum(greatest(t_end - t, 0)), 0) AS share FROM events GROUP BY agent ORDER BY share DESC",
}


def timed(fn: Any, *a: Any, **kw: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn(*a, **kw)
    return time.perf_counter() - t, out


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_timed(fn: Any, *a: Any, **kw: Any) -> tuple[float, float, Any]:
    """Wall seconds, CPU seconds of this process (every thread, DuckDB's too) plus the worker
    processes it started and waited for (ingest's), and the result."""
    c, k = time.process_time(), _children_cpu()
    dt, out = timed(fn, *a, **kw)
    return dt, time.process_time() - c + _children_cpu() - k, out


def _read_json(work: str, k: int, n_events: int) -> tuple[float, float]:
    """DuckDB's own ``read_json`` + ``unnest`` of the JSONL files into a new events table."""
    con = duckdb.connect(os.path.join(work, f"readjson{k}.duckdb"))
    con.execute("SET threads = 2")
    glob = os.path.join(work, "part*.jsonl")
    dt, cpu, _ = cpu_timed(
        con.execute,
        f"CREATE TABLE events AS SELECT trace_id, unnest(events, recursive := true) FROM "
        f"read_json('{glob}', format = 'newline_delimited', sample_size = -1, maximum_object_size = 1000000000)",
    )
    assert con.execute("SELECT count(*) FROM events").fetchall()[0][0] == n_events
    con.close()
    return dt, cpu


def bench_ingest(work: str, n_traces: int, size: int, repeat: int) -> tuple[str, int]:
    dt_gen, traces = timed(generate_corpus, n_traces, seed=0, size=size)
    n_events = sum(len(t.events) for t in traces)
    files = []
    for k in range(4):  # four JSONL files, like a folder of runs
        f = os.path.join(work, f"part{k}.jsonl")
        save(traces[k::4], f)
        files.append(f)
    mb = sum(os.path.getsize(f) for f in files) / 1e6
    print(f"corpus: {n_traces} traces, {n_events:,} events, {mb:.0f} MB JSONL (generated in {dt_gen:.1f} s)")

    cpus = len(os.sched_getaffinity(0))
    names = (
        "orchestrace ingest --no-measure --workers 1",
        f"orchestrace ingest --no-measure --workers {cpus}",
        "duckdb read_json + unnest (no validation)",
    )
    runs: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for k in range(repeat):  # alternating, so that a change in the machine's speed hits all alike
        for w, name in ((1, names[0]), (cpus, names[1])):
            dt, cpu, rep = cpu_timed(
                ingest, os.path.join(work, f"w{w}-{k}.duckdb"), files, measure=False, workers=w
            )
            assert rep.events == n_events
            runs[name].append((dt, cpu))
        runs[names[2]].append(_read_json(work, k, n_events))
    store = os.path.join(work, "store.duckdb")
    dt_meas, cpu_meas, rep = cpu_timed(ingest, store, files, measure=True, workers=cpus)
    dt_again, cpu_again, rep2 = cpu_timed(ingest, store, files, measure=True)
    assert rep2.unchanged == n_traces and rep2.events == 0
    print("\n== ingest (events/s) ==")
    print(
        "ingest: read, parse, validate every rule (duplicate keys, ids, edges, time, limits), digest each\n"
        "  trace, write traces/events/edges/rewards/credits/metrics and derive agents, one transaction,\n"
        "  then CHECKPOINT; read_json: parse into one events table (schema inferred from every record,\n"
        "  sample_size = -1), no validation, no other table, 2 DuckDB threads; CPU s: this process, all\n"
        f"  threads, plus ingest's worker processes; --workers {cpus}: this process and {cpus - 1} forked\n"
        "  worker(s) prepare the files in pieces of about 4 MB (one per CPU), this process writes;\n"
        f"  the three alternate {repeat} times (median and each run)"
    )
    med = {
        n: (statistics.median(d for d, _ in r), statistics.median(c for _, c in r)) for n, r in runs.items()
    }
    rows = [
        *((n, *med[n]) for n in names),
        (f"orchestrace ingest --workers {cpus} (measure metrics)", dt_meas, cpu_meas),
        ("orchestrace ingest again (all unchanged)", dt_again, cpu_again),
    ]
    for name, dt, cpu in rows:
        print(f"{name:45s} {dt:8.2f} s  {n_events / dt:12,.0f} events/s  {cpu:7.2f} CPU s")
    duck = runs[names[2]]
    for w, name in ((1, names[0]), (cpus, names[1])):
        wall = [d / x for (d, _), (x, _) in zip(duck, runs[name], strict=True)]
        cpu = [c / x for (_, c), (_, x) in zip(duck, runs[name], strict=True)]
        print(
            f"ingest --no-measure --workers {w} at {statistics.median(wall):.2f}x the speed of read_json (wall), "
            f"{statistics.median(cpu):.2f}x in CPU seconds, median of {repeat} (goal >= 1.0x); "
            f"each run: {', '.join(f'{x:.2f}' for x in wall)}"
        )
    return store, n_events


def grow(store: str, n_events: int, target: int) -> int:
    """Copy every trace under new ids (``<id>#r<k>``) until the store holds about ``target`` events."""
    copies = max(1, -(-target // n_events))
    con = duckdb.connect(store)
    con.execute("SET threads = 2")
    con.execute(f"CREATE TEMP TABLE k AS SELECT range AS k FROM range(1, {copies})")
    for name, cols in TABLES.items():
        sel = ", ".join("x.trace_id || '#r' || k.k" if c == "trace_id" else f'x."{c}"' for c, _ in cols)
        con.execute(f"INSERT INTO {name} SELECT {sel} FROM {name} x, k")
    total = con.execute("SELECT count(*) FROM events").fetchall()[0][0]
    con.execute("CHECKPOINT")
    con.close()
    return total


def bench_queries(store: str, n_events: int, target: int) -> None:
    dt, total = timed(grow, store, n_events, target)
    size = os.path.getsize(store) / 1e6
    print(f"\n== queries over {total:,} events ({size:.0f} MB store; grown by copying in {dt:.1f} s) ==")
    con = duckdb.connect(store, read_only=True)
    con.execute("SET threads = 2")
    for name, sql in QUERIES.items():
        con.execute(sql).fetchall()  # warm
        times = []
        for _ in range(5):
            t = time.perf_counter()
            con.execute(sql).fetchall()
            times.append(time.perf_counter() - t)
        print(
            f"{name:32s} median {statistics.median(times) * 1000:8.1f} ms   (min {min(times) * 1000:.1f} ms)"
        )
    con.close()


def rollout_job(item: int, seed: int) -> tuple[int, float, float]:
    """A CPU-bound, seeded per-trace job: one synthetic rollout and its full metric set."""
    from orchestrace.measure import analyze

    tr = generate(seed=seed, size=2000, topology=GEN_TOPOLOGIES[item % len(GEN_TOPOLOGIES)])
    r = analyze(tr)
    return item, r["critical_path_s"], r["tokens"]


def noop(item: int, seed: int) -> int:
    return item


def cpu_timed_job(item: int, seed: int) -> tuple[tuple[int, float, float], float]:
    """``rollout_job`` and the CPU seconds it used in the process that ran it."""
    c = time.process_time()
    r = rollout_job(item, seed)
    return r, time.process_time() - c


def bench_ray(n_items: int, rounds: int = 3) -> None:
    """In-process, Ray with 1 task in flight (one worker busy) and Ray with both CPUs busy,
    interleaved ``rounds`` times so that the load of other jobs hits all three alike; min of rounds."""
    import ray

    from orchestrace.parallel import parallel_imap, start_local

    items = list(range(n_items))
    dt_start, _ = timed(start_local, num_cpus=2)
    ref = [r for r, _ in parallel_map(cpu_timed_job, items, seed=0)]  # also warms this process
    list(parallel_imap(noop, items, seed=0, ray="local"))  # warm the workers
    runs: dict[str, list[float]] = {"in-process": [], "ray, 1 worker": [], "ray, 2 workers": []}
    over: list[float] = []
    cpu: list[float] = []
    for _ in range(rounds):
        runs["in-process"].append(timed(parallel_map, rollout_job, items, seed=0)[0])
        for name, window in (("ray, 1 worker", 1), ("ray, 2 workers", 4)):
            dt, res = timed(
                lambda w=window: list(parallel_imap(cpu_timed_job, items, seed=0, ray="local", window=w))
            )
            assert [r for r, _ in res] == ref, "Ray results differ from local results"
            runs[name].append(dt)
            cpu.append(sum(c for _, c in res))
        over.append(timed(lambda: list(parallel_imap(noop, items, seed=0, ray="local", window=1)))[0])
    ray.shutdown()
    best = {k: min(v) for k, v in runs.items()}
    local = best["in-process"]
    print(f"\n== Ray: {n_items} rollouts (generate 2000 events + analyze), same results as in-process ==")
    print(
        f"(Ray started in {dt_start:.1f} s; wall-clock, min of {rounds} interleaved rounds; all rounds listed)"
    )
    for name, v in runs.items():
        print(
            f"{name:16s} {best[name]:7.2f} s  speed-up vs in-process {local / best[name]:5.2f}x   {[round(x, 2) for x in v]}"
        )
    # model: T(N) = a + b/N; a = Ray's cost of the same tasks doing nothing, b = CPU seconds of the
    # work measured inside the tasks (what it takes on a CPU nobody else uses)
    a, b = min(over), min(cpu)
    print(
        f"scaling model T(N) = a + b/N: a = {a:.2f} s ({n_items} no-op tasks, one at a time), "
        f"b = {b:.2f} CPU s of work (measured in the tasks)"
    )
    for n, name in ((1, "ray, 1 worker"), (2, "ray, 2 workers")):
        print(
            f"  N={n}: model {a + b / n:6.2f} s on free CPUs; measured here {best[name]:6.2f} s (shared CPUs)"
        )
    for n in (4, 8, 16, 64):
        tn = a + b / n
        print(f"  predicted N={n:3d}: {tn:6.2f} s, speed-up over N=1 {(a + b) / tn:5.2f}x")
    print(
        f"  ceiling: {(a + b) / max(a, 1e-9):.0f}x (N -> inf), and no more than {n_items} workers can be busy"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-traces", type=int, default=200, help="generated traces of --size events each")
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--target-events", type=int, default=10_000_000)
    ap.add_argument("--ray-items", type=int, default=64)
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument("--repeat", type=int, default=5, help="ingest and read_json runs, alternating")
    ap.add_argument("--only-ray", action="store_true")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    if args.only_ray:
        bench_ray(args.ray_items)
        return
    work = tempfile.mkdtemp(prefix="store-bench-")
    try:
        store, n_events = bench_ingest(work, args.base_traces, args.size, args.repeat)
        bench_queries(store, n_events, args.target_events)
        if not args.skip_ray:
            bench_ray(args.ray_items)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
