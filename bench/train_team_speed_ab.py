"""Before/after speed of one ``train team`` iteration, with the same loss, from two source trees.

One side: ``our_loop`` of ``bench/train_team_speed.py`` from the tree given (one warm-up and
``--iterations`` timed iterations of the default config, 4 questions x 4 runs, ``--threads 2``),
then, from the starting adapters, the loss on fixed recorded traces as the tests recompute it
(epoch 0, one Adam step, epoch 1: the epoch-1 loss and clip fraction are where a different
computation would show). Run the two trees alternately in one command, the machine being shared:

    python bench/train_team_speed_ab.py --collect /tmp/ab          # the fixed traces, once
    git archive 1d115ee src bench | tar -x -C /tmp/before           # the tree before
    for r in 1 2; do
      uptime; PYTHONPATH=/tmp/before/src python bench/train_team_speed_ab.py /tmp/before /tmp/ab
      uptime; PYTHONPATH=$PWD/src python bench/train_team_speed_ab.py $PWD /tmp/ab
    done

Each side prints one JSON line (its tree, the 1-minute load average, our_loop's figures, the
fixed-trace losses).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path


def collect(folder: Path) -> None:
    from orchestrace.learn.team.config import TeamConfig
    from orchestrace.learn.team.step import make_step

    step = make_step(TeamConfig(), threads=2)
    d = folder / "iter-001"
    d.mkdir(parents=True, exist_ok=True)
    (folder / "paths.json").write_text(json.dumps(step.collect(1, None, d)), encoding="utf-8")


def one_side(tree: str, traces: Path, iterations: int) -> dict:
    sys.path.insert(0, str(Path(tree) / "bench"))
    import torch
    from train_team_speed import our_loop

    from orchestrace.learn.team.batch import read_batch
    from orchestrace.learn.team.config import TeamConfig
    from orchestrace.learn.team.loss import policy_loss

    cfg = TeamConfig()
    with tempfile.TemporaryDirectory() as tmp:
        figs, (_, step) = our_loop(cfg, 2, iterations, Path(tmp))
    model = step.model
    for name, state in step.initial.items():
        model.load_adapter_state(name, state)
    params = [p for n in model.adapters for p in model.trainable(n)]
    opt = torch.optim.Adam(params, lr=cfg.lr)
    batch = read_batch(json.loads((traces / "paths.json").read_text()), step.spec, cfg.credit, cfg.unit)
    opt.zero_grad()
    l0, _ = policy_loss(model, batch.rows, cfg.clip, backward=True)
    norm = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params if p.grad is not None)))
    opt.step()
    opt.zero_grad()
    l1, f1 = policy_loss(model, batch.rows, cfg.clip, backward=True)
    return {
        "tree": tree,
        "load_avg_1min": os.getloadavg()[0],
        **{k: round(v, 3) for k, v in figs.items()},
        "fixed_traces": {
            "epoch0_loss": float(l0),
            "epoch0_grad_norm": norm,
            "epoch1_loss": float(l1),
            "epoch1_clip_fraction": f1["clip_fraction"],
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree", nargs="?", help="the source tree whose bench/train_team_speed.py runs")
    ap.add_argument("traces", nargs="?", help="the folder --collect wrote")
    ap.add_argument("--collect", help="record the fixed traces into this folder and stop")
    ap.add_argument("--iterations", type=int, default=1)
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if a.collect:
        collect(Path(a.collect))
        return
    if not (a.tree and a.traces):
        ap.error("give a tree and the traces folder (or --collect)")
    print(json.dumps(one_side(a.tree, Path(a.traces), a.iterations)), flush=True)


if __name__ == "__main__":
    main()
