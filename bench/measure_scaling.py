"""Analysis time of the full metric set against load time, for 10^4, 10^5, 10^6-event traces and
a 1,000 x 1,000 corpus.

Goals (issue 3): linear growth (log-log slope <= 1.1 across the sizes) and a full analysis of a
loaded 1M-event trace in no more than 2x its load time. "Full analysis" = building the arrays
(``TraceView``, which includes core's ``TraceGraph``) + ``analyze`` (every E1-E4 and safety
metric) + writing the metrics back; for the corpus also the corpus report.

    python bench/measure_scaling.py                  # 1e4, 1e5, 1e6 and the 1000 x 1000 corpus
    python bench/measure_scaling.py --sizes 10000 100000 --no-corpus   # quick
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import tempfile
import time

import numpy as np

from orchestrace.core import io
from orchestrace.gen import generate, generate_corpus
from orchestrace.measure import TraceView, analyze, corpus_report, write_metrics


def timed(f, repeat: int = 1):
    """(best wall-clock seconds, best CPU seconds of this process, last result) over ``repeat`` runs.

    CPU time is reported too because on a shared machine wall-clock carries other processes' load.
    """
    best, best_cpu, out = math.inf, math.inf, None
    for _ in range(repeat):
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        out = f()
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best, best_cpu, out


def full_analysis(tr):
    r = analyze(TraceView(tr))
    write_metrics(tr, r)
    return r


def bench_trace(n: int, tmp: str, topology: str) -> dict[str, float]:
    tr = generate(seed=0, size=n, topology=topology)
    path = os.path.join(tmp, f"t{n}.json")
    io.save(tr, path)
    del tr
    repeat = 5 if n <= 10_000 else 3 if n <= 100_000 else 1
    load_s, load_cpu, tr = timed(lambda: io.load_one(path), repeat)
    analyze_s, analyze_cpu, r = timed(lambda: full_analysis(tr), repeat)
    return {
        "events": len(tr.events),
        "load_s": load_s,
        "analyze_s": analyze_s,
        "ratio": analyze_s / load_s,
        "load_cpu": load_cpu,
        "analyze_cpu": analyze_cpu,
        "ratio_cpu": analyze_cpu / load_cpu,
        "critical_steps": r["critical_steps"],
        "efficiency": r["parallel_speedup"],
    }


def bench_corpus(k: int, size: int, tmp: str) -> dict[str, float]:
    path = os.path.join(tmp, "corpus.jsonl")
    io.save(generate_corpus(k, seed=0, size=size), path)
    load_s, load_cpu, traces = timed(lambda: io.load(path))

    def run():
        results = [full_analysis(tr) for tr in traces]
        return corpus_report(results, "topology")

    analyze_s, analyze_cpu, rep = timed(run)
    return {
        "traces": len(traces),
        "events": sum(len(t.events) for t in traces),
        "load_s": load_s,
        "analyze_s": analyze_s,
        "ratio": analyze_s / load_s,
        "ratio_cpu": analyze_cpu / load_cpu,
        "mas_native": rep["mas_native"],
    }


def slope(ns: list[int], ts: list[float]) -> float:
    """Least-squares slope of log(time) on log(size)."""
    return float(np.polyfit(np.log(ns), np.log(ts), 1)[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--topology", default="hierarchical")
    ap.add_argument("--no-corpus", action="store_true")
    ap.add_argument("--corpus", type=int, nargs=2, default=[1000, 1000], metavar=("TRACES", "EVENTS"))
    a = ap.parse_args()
    print(f"cpus={os.cpu_count()} load average={os.getloadavg()[0]:.1f} topology={a.topology}")
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        print(
            f"{'events':>9} {'load s':>8} {'analyze s':>10} {'analyze/load':>13}"
            f" {'load cpu':>9} {'analyze cpu':>12} {'cpu ratio':>10} {'crit.steps':>10} {'par.eff':>8}"
        )
        for n in a.sizes:
            r = bench_trace(n, tmp, a.topology)
            rows.append(r)
            print(
                f"{r['events']:>9} {r['load_s']:>8.3f} {r['analyze_s']:>10.3f} {r['ratio']:>13.2f}"
                f" {r['load_cpu']:>9.3f} {r['analyze_cpu']:>12.3f} {r['ratio_cpu']:>10.2f}"
                f" {r['critical_steps']:>10} {r['efficiency']:>8.3f}",
                flush=True,
            )
        if len(rows) >= 2:
            ns = [r["events"] for r in rows]
            for what in ("analyze_s", "analyze_cpu", "load_s", "load_cpu"):
                goal = " (goal <= 1.1)" if what.startswith("analyze") else ""
                print(f"log-log slope of {what:<12} {slope(ns, [r[what] for r in rows]):.3f}{goal}")
            big = rows[-1]
            verdict = "met" if big["ratio"] <= 2 else "NOT met"
            print(
                f"largest trace: analysis = {big['ratio']:.2f} x load time (wall), {big['ratio_cpu']:.2f} x (cpu)"
                f" (goal <= 2: {verdict})"
            )
        if not a.no_corpus:
            c = bench_corpus(a.corpus[0], a.corpus[1], tmp)
            print(
                f"corpus {c['traces']} traces x ~{a.corpus[1]} events ({c['events']} events): load {c['load_s']:.2f} s,"
                f" analysis + report {c['analyze_s']:.2f} s, ratio {c['ratio']:.2f} (cpu {c['ratio_cpu']:.2f}),"
                f" MAS-native={c['mas_native']}"
            )


if __name__ == "__main__":
    main()
