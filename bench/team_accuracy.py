"""Does the team help? Accuracy of the demo programs with the real local model (SmolLM2-135M).

    python bench/team_accuracy.py                        # vote and debate, 12 antonym questions, seed 0
    python bench/team_accuracy.py --programs vote --seeds 0 1 --words hot tall

Each question is run as ``orchestrace run PROGRAM --set ... --seed S`` would run it (the local
backend, loaded once), and the answers are read back from the recorded traces:

- one agent: the share of first answers (round 0 of a debate, every vote) that are right,
  i.e. the accuracy of one sample,
- team: the run's final answer (``outcome.final``); for the debate also the majority of its
  round-0 answers (plain voting before any debate).

An answer is right when its answer word (``examples.antonyms.word``) is one of the gold antonyms.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrace.core.stats import majority
from orchestrace.runtime.backends.smollm2 import SmolLM2Backend
from orchestrace.runtime.programs.antonyms import ANTONYM_FEWSHOT, word
from orchestrace.runtime.runner import execute

GOLD = {
    "hot": {"cold", "cool"},
    "tall": {"short"},
    "fast": {"slow"},
    "happy": {"sad", "unhappy"},
    "up": {"down"},
    "day": {"night"},
    "wet": {"dry"},
    "good": {"bad", "evil"},
    "rich": {"poor"},
    "early": {"late"},
    "full": {"empty"},
    "strong": {"weak"},
}


def config_of(program: str, w: str) -> dict[str, Any]:
    return {"word": w} if program == "debate" else {"question": ANTONYM_FEWSHOT.format(w=w)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", nargs="+", default=["vote", "debate"], choices=["vote", "debate"])
    ap.add_argument("--words", nargs="+", default=list(GOLD), choices=list(GOLD))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    a = ap.parse_args()
    backend = SmolLM2Backend()
    backend.load()
    summary = []
    for program in a.programs:
        one: list[bool] = []
        first_vote: list[bool] = []
        final: list[bool] = []
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            for w in a.words:
                for seed in a.seeds:
                    out = str(Path(tmp) / f"{program}-{w}-s{seed}.events.jsonl")
                    res = asyncio.run(
                        execute(program, out, config=config_of(program, w), seed=seed, backend=backend)
                    )
                    rounds: dict[int, list[str | None]] = {}
                    for e in res.trace.events:
                        if e.type == "return":
                            rounds.setdefault((e.turn or 0) if program == "debate" else 0, []).append(
                                e.content
                            )
                    first = rounds.get(0, [])
                    one += [word(x) in GOLD[w] for x in first]
                    first_vote.append(majority(word(x) for x in first) in GOLD[w])
                    final.append(word(res.outcome.get("final")) in GOLD[w])
                    said = " | ".join(", ".join(str(word(x)) for x in rounds[k]) for k in sorted(rounds))
                    print(f"{program} {w:>7} s{seed}: {said}  -> {res.outcome.get('final')!r}", flush=True)
        n = len(final)
        line = (
            f"{program}: {n} runs, {time.perf_counter() - t0:.0f} s; one agent {sum(one) / len(one):.3f} "
            f"({len(one)} answers), team final answer {sum(final) / n:.3f}"
        )
        if program == "debate":
            line += f", round-0 majority {sum(first_vote) / n:.3f}"
        summary.append(line)
    print("\n".join(summary))


if __name__ == "__main__":
    main()
