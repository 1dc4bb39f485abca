"""Validating one trace as an event log (``.events.jsonl``) vs as one ``.json`` document.

    python bench/validate_log_bench.py                      # 200,000 events
    python bench/validate_log_bench.py --events 1000000     # the issue's 1M-event figure

The same generated trace is saved in both formats; each is validated ``--repeat`` times in
alternation in this process (so both sides see the same machine load; the best time counts),
and the peak memory of each is read in a fresh subprocess. Goal (issue 20): the log <= 1.2x
the ``.json`` time and <= 1.5 GB at 1M events.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from orchestrace.core.io import save
from orchestrace.core.validate import validate_path
from orchestrace.gen import generate

CACHE = Path(__file__).parent / ".cache"


def _peak_rss_mb(path: Path) -> float:
    """VmHWM of a fresh process validating ``path`` (ru_maxrss would keep the parent's size)."""
    code = (
        "import sys;from orchestrace.core.validate import validate_path;"
        "r=validate_path(sys.argv[1]);assert r.valid, r.findings[:3];"
        "print(next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM'))/1024)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    CACHE.mkdir(exist_ok=True)
    paths = {fmt: CACHE / f"log_{a.events}.{fmt}" for fmt in ("json", "events.jsonl")}
    if not all(p.exists() for p in paths.values()):
        tr = generate(seed=0, size=a.events, topology="centralized")
        for p in paths.values():
            save(tr, p)
        del tr
    best = {fmt: float("inf") for fmt in paths}
    for _ in range(a.repeat):
        for fmt, p in paths.items():
            t0 = time.perf_counter()
            r = validate_path(p)
            best[fmt] = min(best[fmt], time.perf_counter() - t0)
            assert r.valid, r.findings[:3]
    peak = {fmt: _peak_rss_mb(p) for fmt, p in paths.items()}
    print(f"{'format':14} {'MB':>6} {'best s':>8} {'peak MB':>8}")
    for fmt, p in paths.items():
        print(f"{fmt:14} {p.stat().st_size / 1e6:6.0f} {best[fmt]:8.2f} {peak[fmt]:8.0f}")
    ratio = best["events.jsonl"] / best["json"]
    print(f"events.jsonl / json time: {ratio:.2f}x (goal <= 1.2x); {a.events:,} events")


if __name__ == "__main__":
    main()
