"""``orchestrace train|eval retry|delegate|swarm``: typer command functions (no logic here).

``cmd_learn`` hooks them into the ``train`` and ``eval`` groups, e.g.
``train_app.command("retry")(train_retry_cmd)``. Every command prints a short table, or the full
JSON result with ``--format json``; ``-o DIR`` writes the policy and ``*-result.json`` there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import typer

from ..core.paths import check_folder
from .output import console

if TYPE_CHECKING:
    from ..learn.experiments.delegate import DelegateLoggedTraining, DelegateReport
    from ..learn.experiments.retry import RetryReport
    from ..learn.experiments.swarm import SwarmParallelEval, SwarmReport

_FORMAT = typer.Option("table", "--format", help="table or json")
_SEED = typer.Option(0, "--seed", min=0, help="training/bootstrap seed (the data split is fixed)")
_LOG = typer.Option(
    None,
    "--log",
    help="tensorboard or mlflow: every training iteration's figures in OUT/tensorboard (event files) or "
    "OUT/mlflow/mlflow.db (a local MLflow store)",
)
_TARGET_KL = typer.Option(
    None,
    "--target-kl",
    help="ppo, grpo: stop an update's epochs once PPO's approximate KL passes this (reinforce and exact "
    "take one gradient step per batch: nothing to stop)",
)
_DATA = typer.Option(None, "--data", help="public data folder (default: $ORCHESTRACE_DATA or shared/data)")
_ALGO = typer.Option(
    "reinforce",
    "--algo",
    help="reinforce, ppo, grpo or exact (exact PG: RetryStop and Delegate routing only; hyperparameters per env "
    "and algorithm)",
)


def _emit(result: msgspec.Struct, fmt: str, rows: list[tuple[str, ...]], header: tuple[str, ...]) -> None:
    """The result as JSON (the keys and values of its result file), or the table then the files written."""
    if fmt == "json":
        console.print_json(json.dumps(msgspec.to_builtins(result)))
        return
    from rich.table import Table

    t = Table(*header)
    for r in rows:
        t.add_row(*r)
    console.print(t)
    for path in getattr(result, "files_written", None) or []:
        console.print(f"wrote {path}", highlight=False)


def _comparisons(result: msgspec.Struct, what: str, scope: str = "") -> None:
    """One plain line per baseline (paired difference of ``what``, 95% CI, verdict), then one
    line saying which baselines the learned policy beats, ties and loses to."""
    from ..learn.experiments.protocol import comparisons

    found = comparisons(result)
    for c in found:
        verdict = {
            "wins": "[green]learned wins[/green]",
            "loses": "[red]learned loses[/red]",
            "tie": "no significant difference (the CI contains 0)"
            + (
                "; learned is lower" if c.mean < 0 else "; learned is higher" if c.mean > 0 else "; identical"
            ),
        }[c.verdict]
        console.print(
            f"{scope}learned - {c.baseline} ({what}): {c.mean:+.4f}, paired 95% CI [{c.lo:+.4f}, {c.hi:+.4f}]: "
            f"{verdict}",
            highlight=False,
        )
    if found:
        by = {v: [c.baseline for c in found if c.verdict == v] for v in ("wins", "tie", "loses")}
        parts = [
            f"beats {', '.join(by['wins'])}" if by["wins"] else "beats no baseline",
            f"ties {', '.join(by['tie'])}" if by["tie"] else "",
            f"[red]loses to {', '.join(by['loses'])}[/red]" if by["loses"] else "",
        ]
        console.print(f"{scope}the learned policy {'; '.join(p for p in parts if p)}", highlight=False)


def _check_format(fmt: str) -> None:
    from ..core.errors import OrchestraceError

    if fmt not in ("table", "json"):
        raise OrchestraceError("OT665", f"unknown format {fmt!r} (table, json)")


def _retry_rows(fam: str, r: RetryReport) -> list[tuple[str, ...]]:
    ct, cb = r.fixed_caps[str(r.cap_chosen_on_train)], r.fixed_caps[str(r.cap_best_in_hindsight)]
    lo, hi = r.learned.reward.ci95
    d = r.learned_minus_train_cap
    return [
        (fam, "learned", f"{r.learned.reward.mean:.4f} [{lo:.4f}, {hi:.4f}]", f"{r.learned.success:.3f}",
         f"{r.learned.mean_attempts:.2f}", f"{d.mean:+.4f} [{d.ci95[0]:+.4f}, {d.ci95[1]:+.4f}]"),
        (fam, f"cap {r.cap_chosen_on_train} (train)", f"{ct.reward:.4f}", f"{ct.success:.3f}",
         f"{ct.mean_attempts:.2f}", ""),
        (fam, f"cap {r.cap_best_in_hindsight} (hindsight)", f"{cb.reward:.4f}", f"{cb.success:.3f}",
         f"{cb.mean_attempts:.2f}", ""),
    ]  # fmt: skip


_RETRY_HEADER = ("family", "method", "reward [95% CI]", "success", "attempts", "learned - train cap")


def train_retry_cmd(
    family: list[str] = typer.Option(
        ["alfworld", "humaneval", "game24"],
        "--family",
        "-f",
        help="alfworld, humaneval, game24, game24-standard",
    ),
    cost: float = typer.Option(None, "--cost", help="price of one attempt in successes (default per family)"),
    iters: int = typer.Option(300, "--iters"),
    out: Path = typer.Option(Path("runs/retry"), "-o", "--out", help="directory for policies and results"),
    algo: str = _ALGO,
    seed: int = _SEED,
    data: Path = _DATA,
    fmt: str = _FORMAT,
    target_kl: float = _TARGET_KL,
    log: str = _LOG,
) -> None:
    """Train RetryStop give-up policies on real Reflexion / Game-of-24 outcomes.

    Examples:
      orchestrace train retry
      orchestrace train retry -f alfworld --algo ppo
      orchestrace train retry -f game24 --cost 0.005 -o runs/g24 --format json
    """
    from ..learn.experiments import train_retry, write_trained
    from ..learn.scalar_log import open_log

    _check_format(fmt)
    check_folder(out)  # -o FILE was refused only after training
    with open_log(log, out):
        r = write_trained(
            out,
            train_retry(
                family,
                cost,
                seed=seed,
                iters=iters,
                algo=algo,
                data=data,
                target_kl=target_kl,
                progress=fmt != "json",
            ),
        )
    rows = [row for fam, v in r.families.items() for row in _retry_rows(fam, v)]
    _emit(r, fmt, rows, _RETRY_HEADER)
    if fmt != "json":
        for fam, v in r.families.items():
            _comparisons(v, "reward", f"{fam}: ")


def eval_retry_cmd(
    policy: Path = typer.Option(..., "--policy", "-p", help="a retry-<family>.safetensors from train retry"),
    family: str = typer.Option("alfworld", "--family", "-f"),
    cost: float = typer.Option(None, "--cost", help="default: the cost the policy was trained with"),
    seed: int = _SEED,
    data: Path = _DATA,
    fmt: str = _FORMAT,
) -> None:
    """Evaluate a RetryStop policy on a family's held-out tasks (any family: transfer).

    Example:
      orchestrace eval retry -p runs/retry/retry-alfworld.safetensors -f humaneval
    """
    from ..learn.experiments import eval_retry

    _check_format(fmt)
    r = eval_retry(policy, family, cost, seed=seed, data=data)
    _emit(r, fmt, _retry_rows(family, r), _RETRY_HEADER)
    if fmt != "json":
        _comparisons(r, "reward", f"{family}: ")


def _delegate_rows(r: DelegateReport) -> list[tuple[str, ...]]:
    rows = []
    for k, v in r.methods.items():
        lo, hi = v.reward.ci95
        qpd = v.quality_per_dollar
        rows.append((k, f"{v.reward.mean:.4f} [{lo:.4f}, {hi:.4f}]", f"{v.quality:.4f}",
                     f"{v.usd_per_1k_queries:.4f}", "" if qpd is None else f"{qpd:.1f}"))  # fmt: skip
    return rows


_DELEGATE_HEADER = ("method", "reward [95% CI]", "quality", "USD / 1k queries", "quality per USD")


def _logged_summary(r: DelegateLoggedTraining) -> str:
    snips = r.snips_reward_new_router
    return (
        f"{r.runs} runs ({r.sampled_runs} sampled): logged reward {r.logged_reward:.4f}; "
        f"new router, importance-weighted estimate {'n/a' if snips is None else f'{snips:.4f}'} "
        f"({r.runs_agreeing_with_new_router} runs agree with it); shares {r.share}"
    )


def train_delegate_cmd(
    source: str = typer.Option(
        "mmlu", "--source", "-s", help="gsm8k, mmlu (RouteLLM) or alpaca (AlpacaEval)"
    ),
    lam: float = typer.Option(
        0.1, "--lambda", help="cost weight: 1 = one average call of the priciest model"
    ),
    mode: str = typer.Option("route", "--mode", help="route (one model) or cascade (cheap first; gsm8k)"),
    iters: int = typer.Option(200, "--iters"),
    out: Path = typer.Option(Path("runs/delegate"), "-o", "--out"),
    algo: str = typer.Option(
        None, "--algo", help="reinforce, ppo, grpo or exact (default: grpo to route, reinforce to cascade)"
    ),
    traces: list[str] = typer.Option(
        None, "--traces", help="route runs (glob; one per query and model) instead of --source"
    ),
    logged: bool = typer.Option(
        False, "--logged", help="with --traces: learn from the runs as they happened (one model per query)"
    ),
    start: Path = typer.Option(
        None, "--start", help="with --logged: the policy to update (the one that recorded)"
    ),
    seed: int = _SEED,
    data: Path = _DATA,
    fmt: str = _FORMAT,
    target_kl: float = _TARGET_KL,
    log: str = _LOG,
) -> None:
    """Train a Delegate router (quality - lambda x cost) on real model outcomes and prices.

    Examples:
      orchestrace train delegate -s mmlu --lambda 0.1
      orchestrace train delegate -s mmlu --lambda 0.1 --algo grpo
      orchestrace train delegate -s alpaca --lambda 0.05 --format json
      orchestrace train delegate -s gsm8k --lambda 0.2 --mode cascade --algo ppo
      orchestrace train delegate --traces 'runs/route/*.events.jsonl' --lambda 0.1
      orchestrace train delegate --traces 'runs/routed/*.events.jsonl' --logged --start runs/delegate/delegate-mmlu
    """
    from ..learn.experiments import train_delegate, train_delegate_logged, write_trained
    from ..learn.scalar_log import open_log

    _check_format(fmt)
    check_folder(out)  # -o FILE was refused only after training
    if logged:
        if not traces:
            from ..core.errors import OrchestraceError

            raise OrchestraceError("OT606", "--logged learns from recorded runs: give them with --traces")
        with open_log(log, out):
            logged_run = write_trained(
                out, train_delegate_logged(traces, lam, start=start, seed=seed, target_kl=target_kl)
            )
        if fmt == "json":
            console.print_json(json.dumps(msgspec.to_builtins(logged_run)))
            return
        console.print(_logged_summary(logged_run), highlight=False)
        for path in logged_run.files_written or []:
            console.print(f"wrote {path}", highlight=False)
        return
    with open_log(log, out):
        r = write_trained(out, train_delegate(
            source, lam, seed=seed, iters=iters, mode=mode, algo=algo, data=data, traces=traces or None,
            target_kl=target_kl, progress=fmt != "json",
        ))  # fmt: skip
    _emit(r, fmt, _delegate_rows(r), _DELEGATE_HEADER)
    if fmt != "json":
        _comparisons(r, "reward")


def eval_delegate_cmd(
    source: str = typer.Option("mmlu", "--source", "-s"),
    policy: Path = typer.Option(
        None, "--policy", "-p", help="a delegate-<source>.safetensors (default: baselines)"
    ),
    lam: float = typer.Option(None, "--lambda", help="default: the policy's lambda, else 0.1"),
    seed: int = _SEED,
    data: Path = _DATA,
    fmt: str = _FORMAT,
) -> None:
    """Held-out routing comparison: learned router, single models, threshold router, oracle.

    Example:
      orchestrace eval delegate -s mmlu -p runs/delegate/delegate-mmlu.safetensors
    """
    from ..learn.experiments import eval_delegate

    _check_format(fmt)
    r = eval_delegate(source, policy, lam, seed=seed, data=data)
    _emit(r, fmt, _delegate_rows(r), _DELEGATE_HEADER)
    if fmt != "json":
        _comparisons(r, "reward")


def _swarm_rows(r: SwarmReport) -> list[tuple[str, ...]]:
    rows = []
    for k, v in r.methods.items():
        lo, hi = v.r_perf.ci95
        rows.append((k, f"{v.r_perf.mean:.4f} [{lo:.4f}, {hi:.4f}]", f"{v.finish_rate:.3f}",
                     f"{v.critical_over_serial.mean:.3f}", f"{v.on_budget:.3f}", f"{v.spawned_per_stage:.2f}"))  # fmt: skip
    return rows


_SWARM_HEADER = (
    "method",
    "r_perf [95% CI]",
    "finish rate",
    "critical / serial",
    "on budget",
    "spawned/stage",
)


def _swarm_parallel_rows(r: SwarmParallelEval) -> list[tuple[str, ...]]:
    rows = []
    for k, v in r.methods.items():
        lo, hi = v.r_perf.ci95
        rows.append((k, f"{v.r_perf.mean:.4f} [{lo:.4f}, {hi:.4f}]", f"{v.finish_rate:.3f}",
                     f"{v.critical_over_serial:.3f}", f"{v.on_budget:.3f}"))  # fmt: skip
    return rows


_SWARM_PARALLEL_HEADER = (
    "method (every lead)",
    "r_perf [95% CI]",
    "finish rate",
    "critical / serial",
    "on budget",
)


def train_swarm_cmd(
    iters: int = typer.Option(None, "--iters", help="default 300 (200 with --parallel)"),
    l1: float = typer.Option(0.2, "--l1", help="initial r_parallel weight (annealed to 0)"),
    l2: float = typer.Option(1.0, "--l2", help="initial r_finish weight (annealed to 0)"),
    parallel: bool = typer.Option(
        False, "--parallel", help="train the PettingZoo Parallel Swarm: one policy shared by every lead"
    ),
    branches: int = typer.Option(3, "--branches", help="leads acting at once (with --parallel)"),
    eval_tasks: int = typer.Option(None, "--eval-tasks", help="default 200 (100 with --parallel)"),
    credit: str = typer.Option(
        "team",
        "--credit",
        help="each lead's reward (with --parallel): team, or its loo / difference / shapley credit",
    ),
    out: Path = typer.Option(Path("runs/swarm"), "-o", "--out"),
    traces: list[str] = typer.Option(
        None,
        "--traces",
        help="train on the staged tasks of recorded swarm runs (glob) instead of generated DAGs",
    ),
    algo: str = _ALGO,
    seed: int = _SEED,
    fmt: str = _FORMAT,
    target_kl: float = _TARGET_KL,
    log: str = _LOG,
) -> None:
    """Train the Swarm spawn policy with the PARL reward under a Critical Steps budget.

    Examples:
      orchestrace train swarm --iters 300 -o runs/swarm
      orchestrace train swarm --traces 'runs/swarm-runs/*.events.jsonl'
      orchestrace train swarm --algo grpo
      orchestrace train swarm --parallel --algo grpo   # 3 leads, one shared policy
      orchestrace train swarm --parallel --credit loo  # each lead rewarded by its LOO credit
    """
    from ..learn.experiments import train_swarm, train_swarm_parallel, write_trained
    from ..learn.scalar_log import open_log

    _check_format(fmt)
    check_folder(out)  # -o FILE was refused only after training
    if parallel and traces:
        from ..core.errors import OrchestraceError

        raise OrchestraceError("OT606", "--traces trains the single-orchestrator Swarm; drop --parallel")
    if parallel:
        with open_log(log, out):
            rp = write_trained(out, train_swarm_parallel(seed=seed, iters=iters or 200, branches=branches, l1=l1,
                               l2=l2, algo=algo, eval_tasks=eval_tasks or 100, credit=credit,
                               target_kl=target_kl, progress=fmt != "json"))  # fmt: skip
        _emit(rp, fmt, _swarm_parallel_rows(rp), _SWARM_PARALLEL_HEADER)
        if fmt != "json":
            _comparisons(rp, "r_perf")
        return
    with open_log(log, out):
        r = write_trained(out, train_swarm(seed=seed, iters=iters or 300, l1=l1, l2=l2, algo=algo,
                                           eval_tasks=eval_tasks or 200, traces=traces or None,
                                           target_kl=target_kl, progress=fmt != "json"))  # fmt: skip
    _emit(r, fmt, _swarm_rows(r), _SWARM_HEADER)
    if fmt != "json":
        _comparisons(r, "r_perf")


def eval_swarm_cmd(
    policy: Path = typer.Option(None, "--policy", "-p", help="a swarm.safetensors (default: baselines only)"),
    parallel: bool = typer.Option(False, "--parallel", help="every lead of the PettingZoo Parallel Swarm"),
    branches: int = typer.Option(3, "--branches", help="leads acting at once (with --parallel)"),
    eval_tasks: int = typer.Option(None, "--eval-tasks", help="default 200 (100 with --parallel)"),
    seed: int = _SEED,
    fmt: str = _FORMAT,
) -> None:
    """Held-out DAGs: Critical Steps vs serial, finish rate, r_perf for the policy and baselines.

    Examples:
      orchestrace eval swarm -p runs/swarm/swarm.safetensors
      orchestrace eval swarm --parallel -p runs/swarm/swarm-parallel.safetensors
    """
    from ..learn.experiments import eval_swarm, eval_swarm_parallel

    _check_format(fmt)
    if parallel:
        rp = eval_swarm_parallel(policy, branches=branches, eval_tasks=eval_tasks or 100, seed=seed)
        _emit(rp, fmt, _swarm_parallel_rows(rp), _SWARM_PARALLEL_HEADER)
        if fmt != "json":
            _comparisons(rp, "r_perf")
        return
    r = eval_swarm(policy, eval_tasks=eval_tasks or 200, seed=seed)
    _emit(r, fmt, _swarm_rows(r), _SWARM_HEADER)
    if fmt != "json":
        _comparisons(r, "r_perf")
