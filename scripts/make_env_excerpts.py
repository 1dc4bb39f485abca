"""Write the data the registered environments use by default (src/orchestrace/learn/envs/data/)
from the public excerpts vendored for the tests (tests/data/public, see its NOTICE.md):

    PYTHONPATH=src python scripts/make_env_excerpts.py

humaneval-excerpt.jsonl.gz: Reflexion's HumanEval log, its first 12 tasks, as RetryStop tasks;
gsm8k-excerpt.jsonl.gz: RouteLLM's GSM8K outcomes of its first 40 prompts (contaminated ones
left out) priced with FrugalGPT's table, as Delegate outcomes. Same input, same bytes (gzip mtime 0).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson

from orchestrace.learn.datasets import load_humaneval, load_routellm
from orchestrace.learn.envs.defaults import route_lines

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ROOT / "tests" / "data" / "public"
OUT = ROOT / "src" / "orchestrace" / "learn" / "envs" / "data"


def main() -> None:
    tasks = [orjson.dumps(t.__dict__) for t in load_humaneval(PUBLIC)]
    (OUT / "humaneval-excerpt.jsonl.gz").write_bytes(gzip.compress(b"\n".join(tasks) + b"\n", mtime=0))
    lines = route_lines(load_routellm("gsm8k", PUBLIC))
    (OUT / "gsm8k-excerpt.jsonl.gz").write_bytes(gzip.compress(b"\n".join(lines) + b"\n", mtime=0))


if __name__ == "__main__":
    main()
