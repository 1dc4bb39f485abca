"""Import throughput (MB/s) against parsing the same JSONL bytes with orjson alone.

    python bench/import_throughput.py [--repeat 3]

Inputs: every Claude Code session of the public sample (with its sub-agent files) and the Codex
rollout. "orjson alone" decodes every line of exactly the files the importer reads; "import"
is the full importer (parse, map, repair times, build, no validation), and "import+validate"
adds ``validate_trace`` on each trace. Best of ``--repeat`` runs, one process.
"""

from __future__ import annotations

import argparse
import os
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
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
