"""Long fuzz run: hostile inputs per command, problems per 10,000 inputs.

The cases and checks are those of the test suite (``tests/fuzz/hostile.py``): a crash is an
exception escaping the CLI, an internal error (exit 3) or a traceback; a disagreement is a
command whose outcome differs from validate's verdict; a store problem is a failed ingest that
changed the store. Seeds are 0..n-1 (plus ``--offset``), so a run is reproducible.

    python bench/fuzz_hostile.py --n 10000                       # every command
    python bench/fuzz_hostile.py --n 10000 --commands validate,load
    python bench/fuzz_hostile.py --n 2000 --minutes 20 --out fuzz.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fuzz"))

import hostile  # noqa: E402
from rich.progress import track  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000, help="inputs per command")
    ap.add_argument("--offset", type=int, default=0, help="first seed")
    ap.add_argument("--commands", default=",".join(hostile.ALL_COMMANDS))
    ap.add_argument("--minutes", type=float, default=None, help="stop each command after this long")
    ap.add_argument("--out", default=None, help="also write the results as JSON here")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for cmd in args.commands.split(","):
            kinds: Counter[str] = Counter()
            examples: dict[str, int] = {}
            start = time.perf_counter()
            done = 0
            for seed in track(range(args.offset, args.offset + args.n), description=cmd, transient=True):
                out = hostile.run_case(seed, cmd, Path(tmp) / "c")
                done += 1
                if out.problem:
                    kind = out.problem.split(":", 1)[0]
                    kinds[kind] += 1
                    examples.setdefault(out.problem[:200], seed)
                if args.minutes is not None and time.perf_counter() - start > args.minutes * 60:
                    break
            secs = time.perf_counter() - start
            bad = sum(kinds.values())
            row = {
                "command": cmd,
                "inputs": done,
                "problems": bad,
                "per_10000": round(bad * 10_000 / done, 2),
                "by_kind": dict(kinds),
                "examples": [{"seed": s, "problem": p} for p, s in list(examples.items())[:10]],
                "seconds": round(secs, 1),
            }
            results.append(row)
            print(
                f"{cmd:22s} {done:6d} inputs  {bad:5d} problems  {row['per_10000']:8.2f} per 10,000  "
                f"{dict(kinds)}  ({secs:.0f} s)",
                flush=True,
            )
            for ex in row["examples"][:3]:
                print(f"    seed {ex['seed']}: {ex['problem']}", flush=True)
    inputs = sum(r["inputs"] for r in results)
    problems = sum(r["problems"] for r in results)
    print(
        f"{'all':22s} {inputs:6d} inputs  {problems:5d} problems  "
        f"{problems * 10_000 / max(inputs, 1):8.2f} per 10,000  ({len(results)} commands)",
        flush=True,
    )
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
