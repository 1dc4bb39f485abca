"""Time of the main job, ``orchestrace train stop`` (defaults), and whether it prints the same.

    python bench/train_stop_speed.py                                  # this tree, once
    python bench/train_stop_speed.py --baseline-src /tmp/old/src      # vs another checkout's src/

Each side runs as a fresh CLI process (``OMP_NUM_THREADS=1``); with a baseline both sides run
alternately ``--repeat`` times, so both see the same machine load. CPU time (user + system of
the child) is the figure to compare on a shared machine: the job is single-threaded, so on an
idle machine its wall time is its CPU time plus a little. The printed results (every line but
the last, which holds the seconds) must be identical on both sides; the bench says so.

    git archive <commit> src | tar -x -C /tmp/old      # a baseline checkout
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parent.parent / "src")


def run(src: str, out: str) -> tuple[float, float, list[str]]:
    """(wall s, CPU s, printed lines without the timing line) of one default train stop."""
    env = {**os.environ, "PYTHONPATH": src, "OMP_NUM_THREADS": "1", "COLUMNS": "400"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "orchestrace", "train", "stop", "-o", f"{out}/policy"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [x.replace(out, "OUT") for x in res.stdout.splitlines() if x.strip()]
    return wall, cpu, [x for x in lines if "pareto.png mark" not in x and not x.startswith("policy ")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline-src", help="another checkout's src/ to compare against")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    sides = {"this tree": SRC} | ({"baseline": a.baseline_src} if a.baseline_src else {})
    got: dict[str, list[tuple[float, float, list[str]]]] = {k: [] for k in sides}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.repeat):
            for name, src in sides.items():
                got[name].append(run(src, f"{tmp}/{name.replace(' ', '_')}"))
    load = os.getloadavg()[0]
    for name, runs in got.items():
        walls = ", ".join(f"{w:.1f}" for w, _, _ in runs)
        cpus = ", ".join(f"{c:.1f}" for _, c, _ in runs)
        print(f"{name:10} wall s: {walls}   CPU s: {cpus}")
    if a.baseline_src:
        cpu = {k: min(c for _, c, _ in v) for k, v in got.items()}
        print(f"CPU ratio this tree / baseline: {cpu['this tree'] / cpu['baseline']:.2f}")
        same = got["this tree"][0][2] == got["baseline"][0][2]
        print("printed results identical" if same else "printed results DIFFER:")
        if not same:
            for x, y in zip(got["this tree"][0][2], got["baseline"][0][2], strict=False):
                if x != y:
                    print(f"  this tree: {x}\n  baseline:  {y}")
    print(f"(1-min load average {load:.1f} on {os.cpu_count()} cores)")
    print("\n".join(got["this tree"][0][2]))


if __name__ == "__main__":
    main()
