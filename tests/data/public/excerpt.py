"""Rebuild this folder: the first records of the public logs the learn tests replay, and a few
whole real logs (one Claude Code session with its sub-agents, two Who&When runs, two ChatDev
runs, the Codex rollout) that the measure, viewer and credit tests read.

Run from the repository root with the public data beside it:
``python tests/data/public/excerpt.py ../shared/data``. Each excerpt keeps the original folder
layout, so the loaders in ``orchestrace.learn.datasets`` read it with ``root=`` this folder.
Records and files are copied unchanged (only truncated to the first N); licenses are in each
LICENSE file.
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
N_ENVS, N_TASKS, N_PUZZLES, N_PROMPTS = 12, 12, 12, 40
ALFWORLD = "reflexion/alfworld_runs/root/reflexion_run_logs"
HUMANEVAL = (
    "reflexion/programming_runs/root/reflexion_humaneval_py_pass_at_1/reflexion_humaneval_py_pass_at_1.jsonl"
)
GAME24 = "tree-of-thoughts/logs/game24/gpt-4_0.7_naive_{}_sample_100_start900_end1000.json"
GSM8K = "routellm/routellm/evals/gsm8k"
PRICES = "frugalgpt/config/serviceinfo.json"
WHOLE = [
    "claude-code/test/test_data/real_projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
    "claude-code/test/test_data/real_projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1",
    "who-and-when/Who&When/Hand-Crafted/1.json",
    "who-and-when/Who&When/Algorithm-Generated/1.json",
    "codex",
]
#: ChatDev runs: their .log and the three chain configs beside it (not the generated program)
CHATDEV = [
    "chatdev/WareHouse/ArtCanvas_THUNLP_20230825093558",
    "chatdev/WareHouse/DigitalClock_THUNLP_20230825093556",
]
LICENSED = (
    "reflexion",
    "tree-of-thoughts",
    "routellm",
    "frugalgpt",
    "claude-code",
    "who-and-when",
    "chatdev",
)


def _out(rel: str) -> Path:
    p = HERE / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def main(src: Path) -> None:
    for k in range(15):
        rel = f"{ALFWORLD}/env_results_trial_{k}.json"
        envs = json.loads((src / rel).read_text(encoding="utf-8"))[:N_ENVS]
        _out(rel).write_text(json.dumps(envs, indent=1) + "\n", encoding="utf-8")
    lines = (src / HUMANEVAL).read_text(encoding="utf-8").splitlines(keepends=True)[:N_TASKS]
    _out(HUMANEVAL).write_text("".join(lines), encoding="utf-8")
    for kind in ("cot", "standard"):
        rel = GAME24.format(kind)
        puzzles = json.loads((src / rel).read_text(encoding="utf-8"))[:N_PUZZLES]
        _out(rel).write_text(json.dumps(puzzles, indent=1) + "\n", encoding="utf-8")
    csv.field_size_limit(1 << 30)
    with (src / GSM8K / "gsm8k_responses.csv").open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        rows = [next(reader) for _ in range(N_PROMPTS + 1)]  # header + N prompts
    with _out(f"{GSM8K}/gsm8k_responses.csv").open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    prompts = {r[0].strip() for r in rows[1:]}
    bad = [
        line
        for line in (src / GSM8K / "contaminated_prompts.jsonl").read_text(encoding="utf-8").splitlines(True)
        if json.loads(line).get("eval_prompt", "").strip() in prompts
    ]
    _out(f"{GSM8K}/contaminated_prompts.jsonl").write_text("".join(bad), encoding="utf-8")
    shutil.copyfile(src / PRICES, _out(PRICES))
    for rel in WHOLE:
        if (src / rel).is_dir():
            shutil.copytree(src / rel, _out(rel), dirs_exist_ok=True)
        else:
            shutil.copyfile(src / rel, _out(rel))
    for rel in CHATDEV:
        for f in [*(src / rel).glob("*.log"), *(src / rel).glob("*Config.json")]:
            shutil.copyfile(f, _out(f"{rel}/{f.name}"))
    for top in LICENSED:
        shutil.copyfile(src / top / "LICENSE", _out(f"{top}/LICENSE"))
    # shared/data/codex has no LICENSE file; codemie-ai/codemie-code is Apache-2.0: the stock text
    shutil.copyfile(src / "frugalgpt" / "LICENSE", _out("codex/LICENSE"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
