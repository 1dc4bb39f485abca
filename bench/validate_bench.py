"""Validation speed: ours (structural + semantic) vs jsonschema (structural only) vs orjson.loads.

    python bench/validate_bench.py                 # 1,000 x 1,000-event corpus + one 1,000,000-event trace
    python bench/validate_bench.py --quick         # 100 x 1,000 + one 100,000-event trace

The jsonschema and fastjsonschema runs validate the published reference schema on the same
decoded objects (so their figures exclude parsing); ours includes parsing and the duplicate-key
check. Peak memory is measured in a fresh subprocess per input.
"""

from __future__ import annotations

import argparse
import json
import resource
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--skip-jsonschema-big", action="store_true", help="jsonschema on the big trace takes minutes"
    )
    ap.add_argument("--memory-only", action="store_true", help="only the peak-memory column")
    a = ap.parse_args()
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
