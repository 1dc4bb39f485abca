"""The whole pipeline on the real public logs, stage by stage, plus format detection and the
memory of streamed credit.

    python bench/pipeline_real.py [--copies 40]

1. Detection: ``importers.detect`` on every file under shared/data in a fresh interpreter (so
   module imports count), CPU seconds.
2. Stages on the 227 traces of Claude Code, Codex, Who&When and ChatDev: import (+validate),
   measure, reward, Shapley agent credit (partitioned), survey / OTLP / TRL export; wall and CPU.
3. ``orchestrace credit -m shapley`` on ``--copies`` copies of the Who&When corpus as one
   ``.jsonl``: peak RSS of the streamed command against loading every trace first (the old way),
   each in its own process.
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

from orchestrace import importers
from orchestrace.core.paths import data_dir

SOURCES = ("claude-code/test/test_data/real_projects", "codex", "who-and-when", "chatdev")


def clock() -> tuple[float, float]:
    """(wall, CPU of this process and of finished child processes)."""
    t = os.times()
    return time.perf_counter(), t.user + t.system + t.children_user + t.children_system


def since(t: tuple[float, float]) -> str:
    w, c = clock()
    return f"wall {w - t[0]:6.2f} s  cpu {c - t[1]:6.2f} s"


def child(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return r.stdout.strip()


def detection(data: Path) -> None:
    code = (
        "import time, resource\n"
        "t = time.process_time()\n"
        "from orchestrace import importers\n"
        f"fs = importers.walk([{str(data)!r}])\n"
        "n = sum(importers.detect(f) is not None for f in fs)\n"
        "print(len(fs), n, round(time.process_time() - t, 2))\n"
    )
    files, known, cpu = child(code).split()
    print(f"detect: {files} files, {known} recognised, {cpu} s CPU (fresh interpreter, imports included)")


def stages(data: Path, out: Path) -> list:
    from orchestrace.credit import assign_credit
    from orchestrace.export import get_exporter
    from orchestrace.measure import analyze
    from orchestrace.reward import apply_rewards, spec_from_dict

    t = clock()
    traces = []
    for rel in SOURCES:
        traces += importers.iter_import(importers.plan(importers.walk([data / rel])))
    print(f"import+validate {len(traces)} traces ({sum(len(x.events) for x in traces)} events): {since(t)}")
    t = clock()
    for x in traces:
        analyze(x)
    print(f"measure.analyze: {since(t)}")
    spec = spec_from_dict({"terms": [{"channel": "tool", "weight": 0.5}, {"channel": "process"}]})
    t = clock()
    traces = [apply_rewards(x, spec, step=0) if x.rewards else x for x in traces]
    traces = [x for x in traces if "hybrid" in x.rewards]
    print(f"reward ({len(traces)} traces with an outcome): {since(t)}")
    t = clock()
    traces = assign_credit(traces, "shapley", "agent", channel="hybrid", partition=True, inplace=True)
    print(f"shapley/agent credit, partitioned: {since(t)}")
    for target, dest, opts in (
        ("survey", out / "s.jsonl", {"warn": lambda _: None}),
        ("otlp", out / "o.json", {}),
        ("samples", out / "samples", {"method": "shapley", "unit": "agent", "channel": "hybrid"}),
    ):
        t = clock()
        n = get_exporter(target)(traces, str(dest), **opts)
        print(f"export {target}: {n} items, {since(t)}")
    return traces


def credit_memory(data: Path, out: Path, copies: int) -> None:
    ww = list(importers.iter_import(importers.plan(importers.walk([data / "who-and-when"]))))
    big = out / "big.jsonl"
    with open(big, "wb") as f:
        from orchestrace.core.io import dumps

        for k in range(copies):
            for x in ww:
                x.trace_id = f"{x.trace_id}#{k}"
                f.write(dumps(x) + b"\n")
                x.trace_id = x.trace_id.rsplit("#", 1)[0]
    n = len(ww) * copies
    mb = big.stat().st_size / 1e6
    cli = (
        "import resource, sys\nfrom orchestrace.cli import main\n"
        f"sys.argv = ['orchestrace', 'credit', '-m', 'shapley', '-q', {str(big)!r}, '-o', {str(out / 'c.jsonl')!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, file=sys.stderr)\n"
    )
    batch = (
        "import resource\nfrom orchestrace.core.io import load, save\nfrom orchestrace.credit import assign_credit\n"
        f"tr = assign_credit(load({str(big)!r}), 'shapley', 'agent', inplace=True)\n"
        f"save(tr, {str(out / 'b.jsonl')!r})\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)\n"
    )
    t = clock()
    r = subprocess.run([sys.executable, "-c", cli], capture_output=True, text=True, check=True)
    streamed = int(r.stderr.strip().splitlines()[-1])
    ws = since(t)
    t = clock()
    loaded = int(child(batch))
    print(f"credit on {n} traces ({mb:.0f} MB jsonl): streamed CLI peak RSS {streamed} MB ({ws});")
    print(f"  load-all-then-credit peak RSS {loaded} MB ({since(t)}); ratio {loaded / streamed:.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=40)
    args = ap.parse_args()
    data = data_dir()
    assert data is not None
    detection(data)
    with tempfile.TemporaryDirectory() as d:
        stages(data, Path(d))
        credit_memory(data, Path(d), args.copies)
    print(
        f"this process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB, {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
