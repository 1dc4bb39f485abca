"""On-policy multi-agent RL of the team's LoRA adapters from recorded traces (a CleanRL-style loop).

Why a compact loop and not TRL's GRPOTrainer: GRPOTrainer owns generation and gives one scalar
per completion for one policy; here rollouts are runtime programs with several agents, each call
answered by its own adapter, and the advantage of a call is the credit of its unit (agent, turn,
...) computed from the trace by ``credit/``. What a step needs is read back from the traces and
their call caches alone (:func:`batch.read_batch`), so a step can be recomputed after the fact.

One iteration (``learn/loop.py`` drives it, one folder per iteration, resumable):

1. collect: ``questions`` training questions x ``group`` runs of the ``team`` program, all in one
   event loop so the trainable backend batches their calls; every trace validated.
2. update: R = the reward spec's total (default: R1 from :func:`program.verify`) of each trace,
   credit ``method/unit`` from the credit module, the advantage of an LLM call = the credit on its
   return event; PPO-clip on the recorded behaviour log-probs, per adapter (sum over adapters of
   each adapter's mean per-sequence token loss), ``epochs`` Adam steps.
3. evaluate: held-out questions never trained on, fixed seeds (the same runs before and after).

Where each part lives: :mod:`.config` (what decides the numbers), :mod:`.rollouts` (recorded runs
of any program on any backend), :mod:`.placement` (local, Ray or a server), :mod:`.forks` (the
leave-one-out game by re-running), :mod:`.batch` (traces -> calls with advantages), :mod:`.loss`
(the clipped surrogate per adapter), :mod:`.checkpoints`, :mod:`.step` (the loop's three verbs),
:mod:`.accuracy` (team, solver, aggregator and held-out accuracy).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from ...core.paths import make_dirs
from ..loop import IterationRecord, run_loop
from ..scalar_log import check_log, open_log
from ..tasks import resolve_ref
from .checkpoints import check_policy_file, load_policy
from .config import CONFIG_FILE, TeamConfig, check_resume
from .placement import RolloutPlace
from .program import adapters_for
from .step import TeamStep, make_step


def train_team(
    cfg: TeamConfig,
    out: str | Path,
    iterations: int,
    *,
    start: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    threads: int | None = None,
    step: TeamStep | None = None,
    place: RolloutPlace | None = None,
    log: str | None = None,
) -> list[IterationRecord]:
    """Run (or resume) the loop; every check that can refuse runs before anything is written.
    ``step``: a loaded model to reuse (back to its starting adapters); ``place``: where rollouts
    run; ``log``: ``tensorboard`` or ``mlflow`` logs every iteration's figures under ``out/<log>``."""
    out = Path(out)
    cfg = replace(cfg, family=resolve_ref(cfg.family))  # a task file by absolute path
    check_log(log)
    cfg.check()
    check_resume(out, cfg)
    if start is not None:
        check_policy_file(start, adapters_for(cfg.adapters, cfg.solvers, cfg.topology))
    if step is None:
        step = make_step(cfg, threads, place)
    else:
        step.restart(cfg)
    return run_in_folder(step, cfg, out, iterations, start=start, progress=progress, log=log)


def run_in_folder(
    step: TeamStep,
    cfg: TeamConfig,
    out: Path,
    iterations: int,
    *,
    start: str | None,
    progress: Callable[[int, int], None] | None,
    log: str | None,
) -> list[IterationRecord]:
    """After every check has passed: load the starting adapters, write the config (once: a resume
    keeps it) and run the loop in ``out``, logging where ``log`` says. The team program's loop and
    a gateway program's share it."""
    if start is not None:
        load_policy(step.model, start)
    step.last_iteration = iterations
    make_dirs(out)
    cfg_path = out / CONFIG_FILE
    if not cfg_path.is_file():
        cfg_path.write_text(json.dumps(asdict(cfg), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    with open_log(log, out):
        return run_loop(step, out, iterations, start_policy=start, progress=progress)


def iteration_line(rec: IterationRecord) -> str:
    """One printed line per iteration with the quantities that say whether it learns: the
    training reward, how far the update moved the adapters (PPO's approximate KL, the share of
    clipped tokens), time, and the held-out accuracies. (The loss of the first epoch is not shown:
    on-policy every ratio is 1 and it is float noise around 0.)"""
    t, e = rec.train, rec.eval
    parts = []
    if t:
        parts.append(
            f"reward {t.get('reward', 0.0):.3f}, KL {t.get('approx_kl', 0.0):.1e}, "
            f"clipped {t.get('clip_fraction', 0.0):.1%}, "
            f"{t.get('rollout_s', 0.0) + t.get('update_s', 0.0):.1f} s "
            f"(rollouts {t.get('rollout_s', 0.0):.1f} + update {t.get('update_s', 0.0):.1f})"
        )
    if e:
        parts.append(
            f"held-out team {e.get('team_accuracy', 0.0):.3f} (solvers {e.get('solver_accuracy', 0.0):.3f}, "
            f"aggregator {e.get('aggregator_accuracy', 0.0):.3f})"
        )
    return f"iteration {rec.iteration}: " + ("; ".join(parts) or "no figures")
