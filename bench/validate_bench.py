"""Validation speed: ours (structural + semantic) vs jsonschema (structural only) vs orjson.loads.

    python bench/validate_bench.py                 # 1,000 x 1,000-event corpus + one 1,000,000-event trace
    python bench/validate_bench.py --quick         # 100 x 1,000 + one 100,000-event trace
    python bench/validate_bench.py --cli --compare e9f213a main   # the CLI, this tree against others

``--cli`` times ``orchestrace validate`` as a user runs it (a fresh process, bytecode cached) on
``gen -n 200 --size 1000 --seed 0`` (issue 34: 3.0-3.1x ``orjson.loads`` of the same file, 2.4x at
e9f213a), for this source tree with each ``--workers`` count (default 1 and 2) and for each
``--compare`` revision as it runs by default (its ``src/`` taken out with ``git archive`` into
bench/.cache), in alternation, with a read of the file and ``orjson.loads`` of each line in this
process between the runs, so every side sees the same machine load. Ratios are medians over the
median of that read and parse, wall clock and CPU seconds (workers included). It also gives
each tree's start-up (the same command on a 39-event trace) and ``validate_path``'s CPU seconds
in one process (best of 3), which together explain the figure. On a loaded machine a process
waits for a core: wall clock then depends on the load, CPU seconds less so.

The jsonschema and fastjsonschema runs validate the published reference schema on the same
decoded objects (so their figures exclude parsing); ours includes parsing and the duplicate-key
check. Peak memory is measured in a fresh subprocess per input.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson

from orchestrace.core.io import save
from orchestrace.core.paths import data_dir
from orchestrace.core.validate import validate_path
from orchestrace.export.survey import to_survey
from orchestrace.gen import generate, generate_corpus

CACHE = Path(__file__).parent / ".cache"


def _timed(fn):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _peak_rss_mb(path: Path) -> float:
    """Peak RSS of a fresh process validating ``path``. VmHWM, not ru_maxrss: the latter keeps
    the parent's size across fork+exec, which would charge this process's memory to the child."""
    code = (
        "import sys;from orchestrace.core.validate import validate_path;"
        "r=validate_path(sys.argv[1]);assert r.valid, r.findings[:3];"
        "print(next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM'))/1024)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    return float(out.stdout)


SRC = Path(__file__).resolve().parent.parent / "src"
_CPU = (
    "import sys,time;from orchestrace.core.validate import validate_path;b=9e9\n"
    "for _ in range(3):\n t=time.process_time();r=validate_path(sys.argv[1]);b=min(b,time.process_time()-t)\n"
    "assert r.valid, r.findings[:3];print(b)"
)


def _tree(rev: str) -> Path:
    """``src/`` of a git revision, unpacked once into the cache (no worktree, no git state)."""
    sha = subprocess.run(["git", "rev-parse", "--short", rev], capture_output=True, text=True, check=True)
    out = CACHE / f"src-{sha.stdout.strip()}"
    if not (out / "src").is_dir():
        out.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", rev, "src"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out / "src"


def _env(src: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # cached, as a user's
    env["PYTHONPATH"] = str(src)
    return env


def _cli_run(src: Path, path: Path, extra: list[str]) -> tuple[float, float]:
    """(wall, CPU seconds: user + system, workers included) of one ``orchestrace validate -q``."""
    cmd = [sys.executable, "-m", "orchestrace", "validate", "-q", str(path), *extra]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=_env(src), capture_output=True, check=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def _read_and_parse(path: Path) -> list[object]:
    """What the ratios divide by: read the file and ``orjson.loads`` each line, in this process
    (the caller frees the objects after the clock stops)."""
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def cli_bench(compare: list[str], rounds: int, workers: list[int]) -> None:
    """``orchestrace validate`` on the issue's corpus for this tree (with each ``--workers``
    count) and the given revisions (as they run by default)."""
    CACHE.mkdir(exist_ok=True)
    corpus, tiny = CACHE / "gen_200x1000_seed0.jsonl", CACHE / "gen_tiny.json"
    for path, args in ((corpus, ["-n", "200", "--size", "1000", "--seed", "0"]), (tiny, ["--size", "5"])):
        if not path.exists():
            gen = [sys.executable, "-m", "orchestrace", "gen", "-o", str(path), *args]
            subprocess.run(gen, env=_env(SRC), capture_output=True, check=True)
    trees: dict[str, tuple[Path, list[str]]] = {
        **{f"here -w {w}": (SRC, ["--workers", str(w)]) for w in workers},
        **{rev: (_tree(rev), []) for rev in compare},
    }
    for src, extra in trees.values():  # writes the bytecode caches
        _cli_run(src, tiny, extra)
    load0 = os.getloadavg()
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in trees}
    start: dict[str, list[tuple[float, float]]] = {k: [] for k in trees}
    loads: list[tuple[float, float]] = []
    for _ in range(rounds):
        for name, (src, extra) in trees.items():
            t0, c0 = time.perf_counter(), time.process_time()
            docs = _read_and_parse(corpus)
            loads.append((time.perf_counter() - t0, time.process_time() - c0))
            del docs
            runs[name].append(_cli_run(src, corpus, extra))
            start[name].append(_cli_run(src, tiny, extra))
    cpu = {
        name: float(
            subprocess.run(
                [sys.executable, "-c", _CPU, str(corpus)],
                env=_env(src),
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for name, (src, _) in trees.items()
    }
    load1 = os.getloadavg()
    mb = corpus.stat().st_size / 1e6
    print(f"orchestrace validate -q {corpus.name} ({mb:.0f} MB), {rounds} alternating rounds")
    print(
        f"load average (1, 5, 15 min) {', '.join(f'{x:.1f}' for x in load0)} at the start, "
        f"{', '.join(f'{x:.1f}' for x in load1)} at the end; {os.cpu_count()} CPUs"
    )
    print("seconds: median of the rounds [best]; ratios: median over median orjson")

    def med(xs: list[tuple[float, float]], k: int) -> float:
        return statistics.median(x[k] for x in xs)

    def show(xs: list[tuple[float, float]], k: int) -> str:
        return f"{med(xs, k):.3f} [{min(x[k] for x in xs):.3f}]"

    print(
        f"  read + orjson.loads of every line, in this process: wall {show(loads, 0)}, CPU {show(loads, 1)}"
    )
    print(
        f"{'tree':12} {'wall':>15} {'CPU':>15} {'wall/orjson':>12} {'CPU/orjson':>11} "
        f"{'start-up wall':>14} {'start-up CPU':>13} {'validate_path CPU':>18}"
    )
    for name in trees:
        r = runs[name]
        print(
            f"{name:12} {show(r, 0):>15} {show(r, 1):>15} {med(r, 0) / med(loads, 0):12.2f} "
            f"{med(r, 1) / med(loads, 1):11.2f} {med(start[name], 0):14.3f} {med(start[name], 1):13.3f} "
            f"{cpu[name]:18.3f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cli", action="store_true", help="orchestrace validate on gen -n 200 --size 1000")
    ap.add_argument("--compare", nargs="*", default=[], help="git revisions to time beside this tree (--cli)")
    ap.add_argument("--rounds", type=int, default=7, help="alternating rounds (--cli)")
    ap.add_argument(
        "--workers", type=int, nargs="*", default=[1, 2], help="--workers of this tree's runs (--cli)"
    )
    ap.add_argument(
        "--skip-jsonschema-big", action="store_true", help="jsonschema on the big trace takes minutes"
    )
    ap.add_argument("--memory-only", action="store_true", help="only the peak-memory column")
    a = ap.parse_args()
    if a.cli:
        cli_bench(a.compare, a.rounds, a.workers)
        return
    n_traces, big = (100, 100_000) if a.quick else (1000, 1_000_000)
    CACHE.mkdir(exist_ok=True)
    corpus = CACHE / f"corpus_{n_traces}x1000.jsonl"
    bigp = CACHE / f"big_{big}.json"
    # traces in the published schema's shape (no schema_version), so every validator accepts them
    if not corpus.exists():
        save([to_survey(t) for t in generate_corpus(n_traces, size=1000)], corpus)
    if not bigp.exists():
        save(to_survey(generate(seed=0, size=big, topology="centralized")), bigp)
    ref = json.loads((data_dir().parent / "reference" / "trace_schema.json").read_text())  # type: ignore[union-attr]
    import fastjsonschema
    import jsonschema

    js = jsonschema.Draft202012Validator(ref)
    fjs = fastjsonschema.compile(ref)
    if a.memory_only:
        for name, path in (("corpus", corpus), ("big", bigp)):
            print(f"{name}: peak {_peak_rss_mb(path):.0f} MB validating {path.stat().st_size / 1e6:.0f} MB")
        return
    rows = []
    for name, path in (("corpus", corpus), ("big", bigp)):
        data = path.read_bytes()
        t_orjson, docs = _timed(
            lambda data=data, path=path: (
                [orjson.loads(x) for x in data.splitlines()]
                if path.suffix == ".jsonl"
                else [orjson.loads(data)]
            )
        )
        t_ours, res = _timed(lambda path=path: validate_path(path))
        assert res.valid, res.findings[:3]
        t_fjs, _ = _timed(lambda docs=docs: [fjs(d) for d in docs])
        if name == "big" and a.skip_jsonschema_big:
            t_js = float("nan")
        else:
            t_js, _ = _timed(lambda docs=docs: [js.validate(d) for d in docs])
        rss = _peak_rss_mb(path)
        rows.append((name, len(data) / 1e6, t_orjson, t_ours, t_js, t_fjs, rss))
    print(
        f"{'input':8} {'MB':>7} {'orjson':>8} {'ours':>8} {'jsonschema':>11} {'fastjsonschema':>15} {'ours/orjson':>12} {'jsonschema/ours':>16} {'peak MB':>8}"
    )
    for name, mb, to, tu, tj, tf, rss in rows:
        print(
            f"{name:8} {mb:7.0f} {to:8.2f} {tu:8.2f} {tj:11.2f} {tf:15.2f} {tu / to:12.2f} {tj / tu:16.1f} {rss:8.0f}"
        )
    print(f"(max RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")


if __name__ == "__main__":
    main()
