"""The RL loop through traces, generic over what is learned (a decision policy, or model weights).

One iteration: run the program with the current policy and record traces -> compute reward and
credit from those traces and update -> evaluate the new policy -> it becomes the current one.
A :class:`LoopStep` supplies the three verbs; :func:`run_loop` owns the rest: one folder per
iteration (``iter-001/`` holds its traces, the policy it produced and ``iteration.json``),
``curves.json`` + ``curves.png`` rewritten after every iteration, and resumption: an iteration
counts as done only once its ``iteration.json`` is written (atomically, last), so a killed run
restarts after the last completed one with that iteration's policy.

Iteration 0 is the starting policy's evaluation (no traces, no update), so every curve has a
baseline point.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

import msgspec

from ..core.errors import BadInput, LoadError, OrchestraceError
from ..core.paths import make_dirs
from .scalar_log import log_scalars

ITERATION_FILE = "iteration.json"


@dataclass(frozen=True)
class IterationRecord:
    """What one iteration did: where its traces and policy are, its training and held-out figures."""

    iteration: int
    policy: str | None  # the policy this iteration produced (None: the starting one, iteration 0)
    traces: list[str] = field(default_factory=list)
    train: dict[str, float] = field(default_factory=dict)  # from the recorded traces (reward, loss...)
    eval: dict[str, float] = field(default_factory=dict)  # held-out figures of ``policy``


class LoopStep(Protocol):
    """The three verbs of an iteration; every path it writes is under the folder it is given."""

    def collect(self, iteration: int, policy: str | None, out_dir: Path) -> list[str]:
        """Run the program with ``policy`` (None: the program's default) on training inputs;
        return the recorded trace paths."""
        ...

    def update(
        self, iteration: int, policy: str | None, traces: list[str], out_dir: Path
    ) -> tuple[str, dict[str, float]]:
        """Reward and credit from ``traces``, one policy update; return the new policy's path and
        training figures."""
        ...

    def evaluate(self, policy: str | None, out_dir: Path) -> dict[str, float]:
        """Held-out figures of ``policy``."""
        ...


# A step may also say how curves.png is drawn: a ``panels`` attribute (a list of :class:`Panel`).


def iteration_dir(out: str | Path, iteration: int) -> Path:
    return Path(out) / f"iter-{iteration:03d}"


def completed(out: str | Path) -> list[IterationRecord]:
    """The completed iterations under ``out``, in order (a gap ends the list). Each record is
    checked against :class:`IterationRecord`'s types and its folder's number: a record of the
    wrong shape (``"eval": "x"``, a figure that is a string) reached the readers of the figures
    as an internal error, and one saying another iteration pointed them at another folder."""
    records = []
    i = 0
    while (p := iteration_dir(out, i) / ITERATION_FILE).is_file():
        try:
            # json, not orjson: the writer's json.dumps writes a NaN figure (a diverged loss) as NaN
            rec = msgspec.convert(json.loads(p.read_bytes()), IterationRecord)
        # JSONDecodeError, UnicodeDecodeError; RecursionError: nested thousands deep (json's recursion)
        except (ValueError, RecursionError, msgspec.ValidationError) as e:
            raise BadInput("OT680", f"unreadable loop iteration record: {e}", path=str(p)) from None
        except OSError as e:
            raise LoadError("OT001", f"cannot read: {e.strerror}", path=str(p)) from None
        if rec.iteration != i:
            raise BadInput(
                "OT680", f"the record of iteration {i} says iteration {rec.iteration}", path=str(p)
            )
        records.append(rec)
        i += 1
    return records


def _write_json_atomic(path: Path, data: object) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


@dataclass(frozen=True)
class Panel:
    """One panel of ``curves.png``: a title and its lines, each a curves.json key (or a pattern
    with one ``*``: a line per matching key, the ``*`` of the label replaced by the match)."""

    title: str
    lines: list[tuple[str, str]]
    ylabel: str = ""
    ylim: tuple[float | None, float | None] | None = None  # None on a side: matplotlib's choice


def _panel_lines(panel: Panel, keys: list[str]) -> list[tuple[str, str]]:
    out = []
    for pattern, label in panel.lines:
        if "*" not in pattern:
            if pattern in keys:
                out.append((pattern, label))
            continue
        head, tail = pattern.split("*", 1)
        for k in keys:
            if k.startswith(head) and k.endswith(tail) and len(k) > len(head) + len(tail):
                out.append((k, label.replace("*", k[len(head) : len(k) - len(tail)])))
    return out


def write_curves(
    out: str | Path, records: list[IterationRecord], panels: list[Panel] | None = None
) -> tuple[Path, Path]:
    """``curves.json`` (one record per iteration: every train_* and eval_* figure) and ``curves.png``:
    the ``panels`` given (a step's own layout), else one panel per figure; iterations are whole
    numbers on the x axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows = [
        {"iteration": r.iteration, **{f"train_{k}": v for k, v in r.train.items()}}
        | {f"eval_{k}": v for k, v in r.eval.items()}
        for r in records
    ]
    out = Path(out)
    js = out / "curves.json"
    _write_json_atomic(js, rows)
    keys = sorted({k for row in rows for k in row if k != "iteration"})
    if panels is None:
        panels = [Panel(k, [(k, k)]) for k in keys]
    drawn = [(p, lines) for p in panels if (lines := _panel_lines(p, keys))]
    cols = 1 if len(drawn) < 3 else 2
    nrows = max(-(-len(drawn) // cols), 1)
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 2.6 * nrows), squeeze=False)
    its = [row["iteration"] for row in rows]
    for ax, (panel, lines) in zip(axes.flat, drawn, strict=False):
        for key, label in lines:
            pts = [(row["iteration"], row[key]) for row in rows if key in row]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", ms=4, label=label)
        ax.set_title(panel.title, fontsize=10)
        ax.set_ylabel(panel.ylabel, fontsize=9)
        if panel.ylim is not None:
            ax.set_ylim(*panel.ylim)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(min(its) - 0.25, max(its) + 0.25)  # every panel on the same iterations
        ax.set_xlabel("iteration", fontsize=9)
        ax.grid(alpha=0.3)
        if len(lines) > 1 or lines[0][1] != panel.title:
            ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(drawn) :]:
        ax.set_visible(False)
    fig.tight_layout()
    png = out / "curves.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return js, png


def log_record(rec: IterationRecord) -> None:
    """An iteration's figures to the open scalar log (``--log``): ``train/*`` from its traces,
    ``heldout/*`` from its evaluation."""
    log_scalars(
        rec.iteration,
        {f"train/{k}": v for k, v in rec.train.items()} | {f"heldout/{k}": v for k, v in rec.eval.items()},
    )


def run_loop(
    step: LoopStep,
    out: str | Path,
    iterations: int,
    *,
    start_policy: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[IterationRecord]:
    """Run (or resume) ``iterations`` update iterations under ``out``; return every record.

    ``progress(done, total)`` is called after each iteration (a progress bar in the CLI).
    """
    if iterations < 0:
        raise OrchestraceError("OT681", f"iterations must be >= 0, got {iterations}")
    out = make_dirs(out)
    records = completed(out)
    if not records:
        d = iteration_dir(out, 0)
        d.mkdir(exist_ok=True)
        rec0 = IterationRecord(0, start_policy, eval=step.evaluate(start_policy, d))
        _write_json_atomic(d / ITERATION_FILE, asdict(rec0))
        records = [rec0]
        write_curves(out, records, getattr(step, "panels", None))
        log_record(rec0)
    current = records[-1].policy if records[-1].policy is not None else start_policy
    for i in range(len(records), iterations + 1):
        d = iteration_dir(out, i)
        if d.exists():  # a killed iteration: start it again from scratch
            shutil.rmtree(d)
        d.mkdir()
        traces = step.collect(i, current, d)
        new_policy, train = step.update(i, current, traces, d)
        rec = IterationRecord(i, new_policy, traces, train, step.evaluate(new_policy, d))
        _write_json_atomic(d / ITERATION_FILE, asdict(rec))
        records.append(rec)
        write_curves(out, records, getattr(step, "panels", None))
        log_record(rec)
        current = new_policy
        if progress is not None:
            progress(i, iterations)
    return records
