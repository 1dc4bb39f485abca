"""Which of issue 32's "watch a run" quantities each training command logs, read back from the
event files of tiny real runs (``--log tensorboard``) with TensorBoard's own reader, not from the
code. Prints one markdown table (command x quantity: the tags found) and every tag per command.

    python bench/watch_scalars.py                 # every command (train team loads SmolLM2-135M)
    python bench/watch_scalars.py --skip-team     # without it (seconds instead of minutes)

The runs are tiny (2-3 iterations, a few questions); their figures mean nothing, only which tags
they wrote. Runs go to a temporary folder (``--keep DIR``: there instead).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

#: (row label, CLI arguments after ``orchestrace``; OUT is replaced by the run's folder)
RUNS: list[tuple[str, list[str]]] = [
    ("train team", ["train", "team", "--questions", "1", "--group", "2", "--train-pool", "2",
                    "--heldout", "1", "--epochs", "2", "--iterations", "1", "-o", "OUT"]),
    ("loop stop (scripted; --update model)", ["loop", "stop", "--backend", "scripted", "--questions", "3",
                                              "--budget", "4", "--iterations", "2", "-o", "OUT"]),
    ("loop stop --update weighted (scripted)", ["loop", "stop", "--backend", "scripted", "--update", "weighted",
                                                "--questions", "3", "--budget", "4", "--iterations", "2", "-o", "OUT"]),
    ("train stop --algo ppo", ["train", "stop", "-b", "countries", "--algo", "ppo", "--iterations", "3",
                               "--sweep", "", "--target-samples", "0", "--no-aggregate", "--orders", "1",
                               "-o", "OUT/policy"]),
    ("train stop --algo exact", ["train", "stop", "-b", "countries", "--algo", "exact", "--iterations", "3",
                                 "--sweep", "", "--target-samples", "0", "--no-aggregate", "--orders", "1",
                                 "-o", "OUT/policy"]),
    ("train delegate (grpo)", ["train", "delegate", "-s", "mmlu", "--iters", "3", "-o", "OUT"]),
    ("train delegate --algo ppo", ["train", "delegate", "-s", "mmlu", "--iters", "3", "--algo", "ppo", "-o", "OUT"]),
    ("train delegate --mode cascade (reinforce)", ["train", "delegate", "-s", "gsm8k", "--mode", "cascade",
                                                   "--iters", "3", "-o", "OUT"]),
    ("train swarm --algo ppo", ["train", "swarm", "--iters", "3", "--eval-tasks", "5", "--algo", "ppo", "-o", "OUT"]),
    ("train swarm --parallel --algo grpo", ["train", "swarm", "--parallel", "--iters", "3", "--eval-tasks", "5",
                                           "--algo", "grpo", "-o", "OUT"]),
    ("train retry -f game24 --algo ppo", ["train", "retry", "-f", "game24", "--iters", "3", "--algo", "ppo",
                                          "-o", "OUT"]),
    ("train retry -f game24 (reinforce)", ["train", "retry", "-f", "game24", "--iters", "3", "-o", "OUT"]),
]  # fmt: skip

#: The issue's quantities and the tags that carry each (full-match regular expressions).
QUANTITIES: list[tuple[str, str]] = [
    ("reward", r"train/reward"),
    ("held-out accuracy", r"heldout/.*"),
    ("per-agent mean advantage", r"train/.*_advantage"),
    (
        "per-agent accuracy (or reward)",
        r"(train|heldout)/.*((solver|aggregator)_?\d*_accuracy|lead_\d+_reward)",
    ),
    ("approx. KL", r"train/approx_kl"),
    ("clip fraction", r"train/clip_fraction"),
    ("entropy", r"train/entropy"),
    ("tokens/s", r"train/.*tokens_per_s"),
    ("s / iteration", r"time/seconds_per_iteration"),
]


def read_tags(folder: Path) -> dict[str, list[int]]:
    """Every scalar tag under ``folder`` (every run in it) with the steps it was logged at."""
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    mux = EventMultiplexer()
    mux.AddRunsFromDirectory(str(folder))
    mux.Reload()
    tags: dict[str, list[int]] = {}
    for run in mux.Runs():
        for tag in mux.GetAccumulator(run).Tags()["scalars"]:
            tags.setdefault(tag, []).extend(e.step for e in mux.Scalars(run, tag))
    return {t: sorted(set(s)) for t, s in sorted(tags.items())}


def cell(tags: dict[str, list[int]], pattern: str) -> str:
    found = [t for t in tags if re.fullmatch(pattern, t)]
    if not found:
        return "-"
    shown = ", ".join(f"`{t}`" for t in found[:3])
    return shown + (f" (+{len(found) - 3})" if len(found) > 3 else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skip-team", action="store_true", help="leave out train team (it loads the model)")
    ap.add_argument("--only", help="only the runs whose label contains this")
    ap.add_argument("--keep", type=Path, help="write the runs here instead of a temporary folder")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="watch-scalars-"))
    found: dict[str, dict[str, list[int]]] = {}
    for i, (label, cli) in enumerate(RUNS):
        if (args.skip_team and label == "train team") or (args.only and args.only not in label):
            continue
        out = root / f"run{i}"
        cmd = [
            sys.executable,
            "-m",
            "orchestrace",
            *(a.replace("OUT", str(out)) for a in cli),
            "--log",
            "tensorboard",
        ]
        print(f"$ orchestrace {' '.join(cli)} --log tensorboard", file=sys.stderr)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"{label} failed ({p.returncode}):\n{p.stderr[-2000:]}")
        found[label] = read_tags(out / "tensorboard")
    print("| command | " + " | ".join(q for q, _ in QUANTITIES) + " |")
    print("|---" * (len(QUANTITIES) + 1) + "|")
    for label, tags in found.items():
        print(f"| `{label}` | " + " | ".join(cell(tags, pat) for _, pat in QUANTITIES) + " |")
    print()
    for label, tags in found.items():
        print(f"- `{label}`: " + ", ".join(f"`{t}` (steps {s[0]}-{s[-1]})" for t, s in tags.items()))


if __name__ == "__main__":
    main()
