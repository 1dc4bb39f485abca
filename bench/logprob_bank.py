"""Sample a small bank with token log-probabilities from the offline SmolLM2-135M, every family.

Smaller than the embedded banks (which carry no log-probabilities): QUESTIONS seeded-random
questions per family x SAMPLES samples, float32 (the fastest for the packed GGUF weights with
transformers 5.23), temperature 0.7, the embedded banks' per-question
seeds. Writes bench/data/logprob_smollm2/FAMILY.jsonl.gz; ``bench/stop_confidence.py`` reads them.

    nice python bench/logprob_bank.py --questions 60 --samples 24
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from orchestrace.learn.stopping.banks import DEFAULT_BANKS, save_bank
from orchestrace.learn.stopping.families import family
from orchestrace.learn.stopping.sampling import build_bank
from orchestrace.runtime.backends.local import LocalModel

OUT = Path(__file__).parent / "data" / "logprob_smollm2"


def progress(name: str, total: int, t0: float):
    done = iter(range(1, total + 1))
    return lambda: print(f"{name} {next(done)}/{total} {time.time() - t0:.0f} s", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=60)
    ap.add_argument("--samples", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--families", nargs="*", default=list(DEFAULT_BANKS))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = LocalModel(dtype="float32", threads=2)
    for name in args.families:
        ids = [q.id for q in family(name).questions]
        pick = random.Random(f"{args.seed}:{name}").sample(ids, min(args.questions, len(ids)))
        t0 = time.time()
        bank = build_bank(
            name,
            samples=args.samples,
            question_ids=pick,
            seed=args.seed,
            model=model,
            progress=progress(name, len(pick), t0),
        )
        save_bank(bank, str(out / f"{name}.jsonl.gz"))
        print(f"{name}: {len(bank)} questions x {args.samples} in {time.time() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
