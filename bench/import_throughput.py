"""Import throughput (MB/s) against parsing the same JSONL bytes with orjson alone.

    python bench/import_throughput.py [--repeat 3]
    python bench/import_throughput.py --cli-copies 8      # the CLI on the Claude Code logs x 8 (72 MB)

Inputs: every Claude Code session of the public sample (with its sub-agent files) and the Codex
rollout. "orjson alone" decodes every line of exactly the files the importer reads; "import"
is the full importer (parse, map, repair times, build, no validation), and "import+validate"
adds ``validate_trace`` on each trace. Best of ``--repeat`` runs, one process.

``--cli-copies N``: ``orchestrace import`` as a user runs it, on the Claude Code sample copied N
times, with ``--workers 1`` and ``--workers 2`` (alternating with the start-up and orjson runs),
in wall seconds (what the user waits) and CPU seconds (the child's user + system time, its
workers included; other processes' load does not count), each minus the CLI's start-up
(``orchestrace --version``), against orjson decoding the same lines in this process (wall and
CPU). Issue 20's goal: >= 0.5x orjson. The children run as a user's shell runs them: Python
caches bytecode (``PYTHONDONTWRITEBYTECODE`` is dropped; a first untimed run of each command
writes the cache), else every run would compile the CLI's modules again (0.1 s here).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from orchestrace import importers
from orchestrace.core.errors import OrchestraceError
from orchestrace.core.paths import data_dir
from orchestrace.core.validate import validate_trace


def _orjson_only(files: list[Path]) -> int:
    n = 0
    for f in files:
        with open(f, "rb") as fh:
            for line in fh:
                if line.strip():
                    try:
                        orjson.loads(line)
                    except orjson.JSONDecodeError:
                        pass
                    n += 1
    return n


def _import(planned: list[tuple[str, str]], validate: bool) -> int:
    n = 0
    for path, fmt in planned:
        try:
            for tr in importers.load(path, fmt):
                n += len(tr.events)
                if validate:
                    validate_trace(tr)
        except OrchestraceError:
            pass
    return n


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


_USER_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _child(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and user + system CPU seconds of one child process (its workers included:
    they are its children, waited for before it exits)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=_USER_ENV)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _timed(fn) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def cli_run(copies: int, repeat: int) -> None:
    src = data_dir() / "claude-code" / "test" / "test_data"
    cli = [sys.executable, "-m", "orchestrace"]
    runs: dict[str, list[tuple[float, float]]] = {
        "start-up": [],
        "workers 1": [],
        "workers 2": [],
        "orjson": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(copies):
            shutil.copytree(src, f"{tmp}/logs/c{k}")
        files = [Path(f) for f in importers.walk([f"{tmp}/logs"]) if f.endswith(".jsonl")]
        mb = sum(f.stat().st_size for f in files) / 1e6
        imp = [*cli, "import", f"{tmp}/logs", "-q", "-o", f"{tmp}/out.jsonl", "--workers"]
        _child([*imp, "1"])  # untimed: writes the bytecode cache
        for _ in range(repeat):  # alternating, so each side sees the same load
            runs["start-up"].append(_child([*cli, "--version"]))
            runs["workers 1"].append(_child([*imp, "1"]))
            runs["workers 2"].append(_child([*imp, "2"]))
            runs["orjson"].append(_timed(lambda: _orjson_only(files)))
    wall = {k: min(w for w, _ in v) for k, v in runs.items()}
    cpu = {k: min(c for _, c in v) for k, v in runs.items()}
    print(f"{len(files)} files, {mb:.1f} MB; best of {repeat}, wall / CPU s:")
    for k in runs:
        print(f"  {k:<10} {wall[k]:6.2f} / {cpu[k]:5.2f}")
    for k in ("workers 1", "workers 2"):
        w, c = wall[k] - wall["start-up"], cpu[k] - cpu["start-up"]
        print(
            f"CLI import --{k} after start-up: {mb / w:.1f} MB/s wall, {mb / c:.1f} MB/s CPU; "
            f"{wall['orjson'] / w:.2f}x of orjson in wall, {cpu['orjson'] / c:.2f}x in CPU (goal >= 0.5x)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cli-copies", type=int, help="time the CLI on the Claude Code logs copied this often")
    args = ap.parse_args()
    if args.cli_copies:
        cli_run(args.cli_copies, args.repeat)
        return
    root = data_dir()
    cases = {
        "claude-code": root / "claude-code" / "test" / "test_data",
        "codex": root / "codex",
    }
    print(
        f"{'input':<12} {'MB':>6} {'orjson MB/s':>12} {'import MB/s':>12} {'+validate':>10} {'import/orjson':>14}"
    )
    for name, folder in cases.items():
        files = [Path(f) for f in importers.walk([folder]) if f.endswith(".jsonl") and os.path.getsize(f)]
        planned = [(p, f) for p, f in importers.plan([str(x) for x in files]) if f == name]
        mb = sum(f.stat().st_size for f in files) / 1e6
        t_json = _best(lambda files=files: _orjson_only(files), args.repeat)
        t_imp = _best(lambda planned=planned: _import(planned, False), args.repeat)
        t_val = _best(lambda planned=planned: _import(planned, True), args.repeat)
        print(
            f"{name:<12} {mb:>6.2f} {mb / t_json:>12.1f} {mb / t_imp:>12.1f} {mb / t_val:>10.1f} {t_json / t_imp:>13.2f}x"
        )


if __name__ == "__main__":
    main()
