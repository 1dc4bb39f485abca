"""Training runs as the trace browser shows them: the folder a ``train team`` / ``loop stop``
run writes (``iter-NNN/iteration.json`` per completed iteration: its traces, training and
held-out figures; ``iter-NNN/eval/*.events.jsonl``, the held-out runs), read from its files
only (the loop's file format, docs/learn_loop.md), never from the trainer's code.

Trace files are served only from inside the run folder and by position in a listing the
server built, never by a path taken from a request.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.errors import OrchestraceError
from ...core.model import Trace

ITERATION_FILE = "iteration.json"


@dataclass(frozen=True)
class Iteration:
    number: int
    figures: dict[str, float]  # train_* and eval_* figures, as curves.json names them
    traces: list[Path]  # the training runs it recorded (inside the run folder)
    held_out: list[Path]  # its held-out runs (eval/), sorted by name


@dataclass(frozen=True)
class Run:
    folder: Path
    name: str
    iterations: list[Iteration] = field(default_factory=list)

    def curves(self) -> dict[str, list[tuple[int, float]]]:
        """figure name -> (iteration, value) points, in iteration order."""
        out: dict[str, list[tuple[int, float]]] = {}
        for it in self.iterations:
            for k, v in it.figures.items():
                out.setdefault(k, []).append((it.number, v))
        return dict(sorted(out.items()))

    def iteration(self, number: int) -> Iteration | None:
        return next((it for it in self.iterations if it.number == number), None)


def read_run(folder: str | Path) -> Run:
    """The completed iterations of a loop folder, in order (a gap ends them, as the loop's
    resumption counts them). A folder without ``iter-000/iteration.json`` is an error."""
    root = Path(folder).resolve()
    if not (root / "iter-000" / ITERATION_FILE).is_file():
        raise OrchestraceError(
            "OT342",
            "not a training run folder (no iter-000/iteration.json; train team and loop stop write one)",
            path=str(folder),
        )
    its = []
    k = 0
    while (p := root / f"iter-{k:03d}" / ITERATION_FILE).is_file():
        try:
            rec = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise OrchestraceError("OT342", f"unreadable iteration record: {e}", path=str(p)) from None
        if not isinstance(rec, dict):
            raise OrchestraceError("OT342", "an iteration record is a JSON object", path=str(p))
        figures = {f"train_{n}": v for n, v in _numbers(rec.get("train")).items()}
        figures |= {f"eval_{n}": v for n, v in _numbers(rec.get("eval")).items()}
        traces = [t for t in (_inside(root, p.parent, s) for s in rec.get("traces") or []) if t is not None]
        held_out = sorted((p.parent / "eval").glob("*.events.jsonl"))
        its.append(Iteration(k, figures, traces, held_out))
        k += 1
    return Run(root, root.name, its)


def _numbers(d: Any) -> dict[str, float]:
    if not isinstance(d, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in d.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }


def _inside(root: Path, here: Path, name: Any) -> Path | None:
    """A trace path of a record, kept only if it is a file inside the run folder. The loop
    records the paths it was given (absolute ones too), so a run folder copied or moved
    elsewhere finds its files by the part from ``iter-NNN/`` on."""
    if not isinstance(name, str):
        return None
    p = Path(name)
    cands = [p] if p.is_absolute() else [here / p, root / p, Path.cwd() / p]
    tail = [k for k, part in enumerate(p.parts) if re.fullmatch(r"iter-\d{3,}", part)]
    if tail:
        cands.append(root.joinpath(*p.parts[tail[-1] :]))
    for cand in cands:
        c = cand.resolve()
        if c.is_file() and c.is_relative_to(root):
            return c
    return None


def load_run_trace(path: Path) -> Trace:
    from ...core.io import load_one

    return load_one(str(path))


@dataclass(frozen=True)
class Side:
    """One held-out run as the before/after table shows it."""

    trace: Trace
    final: str | None  # the team's answer (metadata.outcome.final)
    reward: float | None  # rewards.team
    answers: dict[str, str]  # agent -> its last returned text


def side(tr: Trace) -> Side:
    answers: dict[str, str] = {}
    for e in tr.events:
        if e.type == "return" and e.agent and isinstance(e.content, str):
            answers[e.agent] = e.content
    outcome = (tr.metadata or {}).get("outcome")
    final = outcome.get("final") if isinstance(outcome, dict) else None
    reward = (tr.rewards or {}).get("team")
    return Side(
        tr,
        None if final is None else str(final),
        reward if isinstance(reward, int | float) else None,
        answers,
    )


def held_out_pairs(run: Run) -> tuple[Iteration, Iteration, list[tuple[str, Path, Path]]] | None:
    """(first, last evaluated iteration, [(run name, before file, after file)]) for the held-out
    runs both iterations recorded under the same file name; None with fewer than two."""
    evaluated = [it for it in run.iterations if it.held_out]
    if len(evaluated) < 2:
        return None
    first, last = evaluated[0], evaluated[-1]
    after = {p.name: p for p in last.held_out}
    pairs = [
        (p.name.removesuffix(".events.jsonl"), p, after[p.name]) for p in first.held_out if p.name in after
    ]
    return first, last, pairs
