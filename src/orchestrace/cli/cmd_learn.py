"""``orchestrace train|eval stop`` and ``orchestrace bank build|synth|info``: learned stopping (O5).

The command groups ``train`` and ``eval`` also carry the other orchestration decisions
(retry, delegate, swarm) when their module is present.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import typer

from ..core.errors import OrchestraceError
from .output import console, console_err
from .ray_option import RayCommand, RayOption

if TYPE_CHECKING:
    from ..learn.stopping.evaluation import ResultRow

train_app = typer.Typer(help="Train orchestration policies from traces.", no_args_is_help=True)
eval_app = typer.Typer(
    help="Evaluate orchestration policies against published baselines.", no_args_is_help=True
)
bank_app = typer.Typer(help="Sample banks: what StopVote replays.", no_args_is_help=True)
loop_app = typer.Typer(
    help="The RL loop: run with the current policy, learn from the traces, redeploy.", no_args_is_help=True
)


@contextmanager
def _bars() -> Any:
    """Rich progress bars; yields a factory ``(label, total) -> advance(n)``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console_err,
        disable=not console_err.is_interactive,  # piped: no final bars, no empty line
    ) as prog:

        def make(label: str, total: int) -> Any:
            task = prog.add_task(label, total=total or None)
            return lambda n=1: prog.advance(task, n)

        yield make


@train_app.command("stop", cls=RayCommand)
def train_stop_cmd(
    bank: list[str] = typer.Option(
        None,
        "--bank",
        "-b",
        help="training bank(s) (.jsonl[.gz] or embedded name); default: embedded antonyms, "
        "countries, continents, capitals, languages",
    ),
    traces: list[str] = typer.Option(
        None,
        "--traces",
        help="train on recorded vote runs instead of banks (glob, quoted, e.g. 'runs/*.events.jsonl')",
    ),
    eval_traces: list[str] = typer.Option(
        None, "--eval-traces", help="held-out vote runs (glob; default: --eval-bank, or 30% of --traces)"
    ),
    eval_bank: list[str] = typer.Option(
        None,
        "--eval-bank",
        help="held-out bank(s), merged (default: embedded plurals and comparatives, or 30% of --bank)",
    ),
    target: float = typer.Option(
        5.0,
        "--target-samples",
        min=0,
        help="also train each policy family for this mean sample budget, calibrated without labels on "
        "a calibration half of the held-out questions disjoint from the reported half (0: off)",
    ),
    cost: float = typer.Option(
        0.003, "--cost", "-c", help="price of one sample in units of one correct answer"
    ),
    out: str = typer.Option(
        "runs/stop/policy", "-o", "--out", help="policy path (writes .safetensors and .json)"
    ),
    report: str = typer.Option(None, "--report", help="report directory (default: <dir of -o>/report)"),
    algo: str = typer.Option("exact", "--algo", help="exact, reinforce, ppo or grpo"),
    budget: int = typer.Option(40, "--budget"),
    seed: int = typer.Option(0, "--seed", min=0),
    iterations: int = typer.Option(None, "--iterations", help="training iterations (default per algorithm)"),
    aggregate: bool = typer.Option(
        True, "--aggregate/--no-aggregate", help="also train policies with a learned aggregator (O4)"
    ),
    orders: int = typer.Option(
        8, "--orders", min=1, help="replay each held-out question in this many orders"
    ),
    sweep: str = typer.Option(
        None,
        "--sweep",
        help="extra costs for the Pareto curve, comma-separated ('' for none; default 10 costs)",
    ),
    confidence: bool = typer.Option(
        False,
        "--confidence",
        help="the policies also read each sample's token log-probabilities (feature set "
        "counts+confidence; banks built with --logprobs)",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="replace another run's policies and report at -o / --report (all its files); without it "
        "such a run is refused, and only the same command again rewrites its own",
    ),
    log: str = typer.Option(
        None,
        "--log",
        help="tensorboard or mlflow: each policy's training iterations in <folder of -o>/tensorboard (event files) "
        "or <folder of -o>/mlflow/mlflow.db, one run per policy",
    ),
    target_kl: float = typer.Option(
        None, "--target-kl", help="ppo, grpo: stop an update's epochs once the approximate KL passes this"
    ),
    logged: bool = typer.Option(
        False,
        "--logged",
        help="--traces as they happened (loop stop's runs: they stop early and repeat questions): "
        "--iterations of loop stop's update on all of them, no report",
    ),
    start: str = typer.Option(
        None, "--start", help="--logged: start from this stop policy (its budget and cost)"
    ),
    update: str = typer.Option("model", "--update", help="--logged: loop stop's update, model or weighted"),
    ray: RayOption = None,
) -> None:
    """Train a stopping policy and write a report (Pareto + learning curves, PNG and JSON).

    Examples:
      orchestrace train stop                       # embedded banks: train five families, test two others
      orchestrace train stop --bank my.jsonl --cost 0.005 -o runs/p
      orchestrace train stop --traces 'runs/vote/*.events.jsonl' --budget 8 -o runs/p
      orchestrace train stop --algo ppo --sweep ''
      orchestrace train stop --ray                 # the cost sweep's policies trained as Ray tasks
      orchestrace train stop --bank lp.jsonl --confidence --budget 24   # also read log-probabilities
      orchestrace train stop --traces 'runs/loop/iter-*/run-*.events.jsonl' --logged \
          --start runs/loop/start-policy.safetensors --iterations 4 -o runs/loop-offline
    """
    from importlib import import_module

    from ..learn.rl import check_algorithm
    from ..learn.stopping.training import SWEEP_COSTS, train_stop

    try:
        costs = list(SWEEP_COSTS) if sweep is None else [float(x) for x in sweep.split(",") if x.strip()]
    except ValueError:
        raise OrchestraceError("OT631", f"--sweep must be comma-separated numbers, got {sweep!r}") from None
    if logged or start:
        return _train_stop_logged(traces, out, start, budget, cost, seed, iterations, update, logged)
    check_algorithm(algo)  # before any bar is drawn
    with _bars() as bars:
        its = iterations or import_module(f"orchestrace.learn.rl.{algo}").Args().iterations

        def progress(label: str, _a: int, _b: int) -> Any:
            return bars(label, its or 0)

        rep = train_stop(
            bank or None,
            eval_bank or None,
            out=out,
            report_dir=report,
            cost=cost,
            sweep_costs=costs,
            algo=algo,
            budget=budget,
            seed=seed,
            iterations=iterations,
            progress=None if ray is not None else progress,
            map_fn=None if ray is None else partial(_ray_map, ray=ray),
            aggregate=aggregate,
            orders=orders,
            target_samples=target or None,
            train_traces=traces or None,
            eval_traces=eval_traces or None,
            confidence=confidence,
            force=force,
            log=log,
            target_kl=target_kl,
        )
    g = rep.goal
    console.print(
        f"held-out [bold]{rep.eval_bank}[/bold] ({rep.eval_questions} reported questions x {orders} "
        f"orders; budget and priors from {rep.calibration_questions} other held-out questions): "
        f"learned accuracy {g.learned_accuracy:.3f} with {g.learned_mean_samples:.2f} samples "
        f"({g.sample_reduction_x:.1f}x fewer) vs fixed-{budget} {g.fixed_full_accuracy:.3f} "
        f"({g.accuracy_gap_points:+.1f} points, paired 95% CI of the difference [{g.accuracy_gap_ci95_points[0]:+.1f}, "
        f"{g.accuracy_gap_ci95_points[1]:+.1f}] points); "
        f"oracle {g.oracle_mean_samples:.2f} samples"
    )
    ga = rep.goal_with_aggregator
    if ga:
        console.print(
            f"with the learned aggregator: accuracy {ga.learned_accuracy:.3f} with "
            f"{ga.learned_mean_samples:.2f} samples ({ga.sample_reduction_x:.1f}x fewer; "
            f"{ga.accuracy_gap_points:+.1f} points, paired 95% CI [{ga.accuracy_gap_ci95_points[0]:+.1f}, "
            f"{ga.accuracy_gap_ci95_points[1]:+.1f}])"
        )
    for name, t in rep.targets.items():
        how = (  # the constrained optimum: a per-question coin between the two policies bracketing the budget
            f"a mix: per question, the policy trained at sample price {t.mixture_cost:.4g} with probability "
            f"{100 * t.mixture_prob:.0f}%, else the one trained at {t.cost:.4g}"
            if t.mixture_cost is not None
            else f"trained at sample price {t.cost:.4g}"
        )
        console.print(
            f"{name} for a budget of {rep.target_samples:g} samples ({how}): accuracy "
            f"{t.learned_accuracy:.3f} with {t.learned_mean_samples:.2f} samples "
            f"({t.sample_reduction_x:.1f}x fewer, {t.accuracy_gap_points:+.1f} points vs fixed-{budget}, "
            f"paired 95% CI [{t.accuracy_gap_ci95_points[0]:+.1f}, {t.accuracy_gap_ci95_points[1]:+.1f}])"
            + ("" if t.met else " [yellow](no cost in the search range keeps the budget)[/yellow]")
        )
    from ..learn.stopping.report import policy_marks

    for m in policy_marks(rep):
        console.print(
            f"pareto.png mark {m.mark}: {m.path} ({m.method}: accuracy {m.accuracy:.3f}, "
            f"{m.mean_samples:.2f} samples)",
            highlight=False,
        )
    for path in rep.files_written:
        console.print(f"wrote {path}", highlight=False)
    console.print(f"policy {rep.policy}  report {rep.report_dir}  ({rep.seconds} s)")


def _train_stop_logged(
    traces: list[str] | None,
    out: str,
    start: str | None,
    budget: int,
    cost: float,
    seed: int,
    iterations: int | None,
    update: str,
    logged: bool,
) -> None:
    from ..learn.stopping.loop_stop import train_stop_logged

    if not logged or not traces:
        raise OrchestraceError(
            "OT631", "--start and --logged go together, with --traces (the runs to learn from)"
        )
    res = train_stop_logged(
        traces, out, start=start, budget=budget, cost=cost, seed=seed, updates=iterations or 4, update=update
    )
    console.print(
        f"{res.updates} {res.update} updates on {res.runs} recorded runs ({res.decisions} stop decisions; "
        f"budget {res.budget}, cost {res.cost:g})",
        highlight=False,
    )
    for path in res.files:
        console.print(f"wrote {path}", highlight=False)


def _print_results(rows: list[ResultRow]) -> None:
    from rich.table import Table

    t = Table("method", "accuracy", "mean samples", "questions")
    for r in rows:
        t.add_row(r.method, f"{r.accuracy:.4f}", f"{r.mean_samples:.2f}", str(r.questions))
    console.print(t)


def _ray_map(fn: Any, items: Any, *, ray: str) -> list[Any]:
    from ..parallel import parallel_map

    return parallel_map(fn, list(items), ray=ray)


@eval_app.command("stop", cls=RayCommand)
def eval_stop_cmd(
    bank: str = typer.Option(None, "--bank", "-b", help="bank file (.jsonl[.gz]) or an embedded name"),
    policy: str = typer.Option(None, "--policy", "-p", help="a policy written by train stop"),
    budget: int = typer.Option(40, "--budget"),
    fmt: str = typer.Option("table", "--format", help="table or json"),
    ci: bool = typer.Option(False, "--ci", help="add bootstrap 95% CIs (1000 resamples over questions)"),
    bayes: bool = typer.Option(
        False, "--bayes", help="add the Bayes-optimal rule of a model calibrated to the bank"
    ),
    orders: int = typer.Option(8, "--orders", min=1, help="replay each question in this many orders"),
    lofo: bool = typer.Option(
        False,
        "--leave-one-family-out",
        help="train on six embedded families, evaluate on the seventh, for each of the seven",
    ),
    out: str = typer.Option(
        "runs/stop/leave_one_family_out.json", "--out", "-o", help="JSON of --leave-one-family-out"
    ),
    seed: int = typer.Option(0, "--seed", min=0),
    ray: RayOption = None,
) -> None:
    """Every stopping baseline (and a learned policy) on one bank.

    Examples:
      orchestrace eval stop --bank plurals --policy runs/stop/policy --format json   # held out by train stop
      orchestrace eval stop --bank my.jsonl --budget 20
      orchestrace eval stop --bank countries --ray        # methods evaluated as Ray tasks
      orchestrace eval stop --leave-one-family-out       # transfer to unseen families (4-15 min)
    """
    from ..learn.stopping.evaluation import result_rows
    from ..learn.stopping.training import eval_stop

    if fmt not in ("table", "json"):
        raise OrchestraceError("OT665", f"unknown format {fmt!r} (table, json)")
    if lofo:
        if bank or policy:
            raise OrchestraceError(
                "OT666", "--leave-one-family-out uses the seven embedded families: no --bank or --policy"
            )
        _leave_one_family_out(budget, orders, seed, out, ray)
        return
    if not bank:
        raise OrchestraceError("OT666", "give --bank (or --leave-one-family-out)")
    map_fn = map if ray is None else partial(_ray_map, ray=ray)
    res = eval_stop(bank, policy, budget, bayes=bayes, map_fn=map_fn, orders=orders)
    rows = result_rows(res) if ci else [r.row() for r in res]
    if fmt == "json":
        print(json.dumps(msgspec.to_builtins(rows), indent=1))
    else:
        _print_results(rows)


def _leave_one_family_out(budget: int, orders: int, seed: int, out: str, ray: str | None) -> None:
    from ..learn.stopping.transfer import leave_one_family_out, write_transfer

    map_fn = map if ray is None else partial(_ray_map, ray=ray)
    with _bars() as bars:
        advance = bars("leave-one-family-out: held-out families", 7)
        rep, _ = leave_one_family_out(
            budget=budget, orders=orders, seed=seed, map_fn=lambda fn, ks: _counted(map_fn(fn, ks), advance)
        )
    write_transfer(rep, out)
    print_transfer(rep, out)


def _counted(items: Any, advance: Any) -> Any:
    for x in items:
        advance()
        yield x


def print_transfer(rep: Any, out: str) -> None:
    """The leave-one-family-out table: the learned policy (plain, stopping also where SPRT does,
    online-adapted) at the default cost, the adapted Bayes rules and ConSol's default SPRT per
    held-out family and pooled (every row in the JSON)."""
    from rich.table import Table

    from ..learn.stopping.training import DEFAULT_COST

    budget, orders, seed = rep.budget, rep.orders, rep.seed
    t = Table(
        "held out", "method", "accuracy", f"fixed-{budget}", "mean samples", "diff (points)", "paired 95% CI",
        "dominated by",
        title=f"leave-one-family-out ({orders} orders, seed {seed}); {rep.protocol}",
    )  # fmt: skip
    shown = {f"learned{kind}(c={DEFAULT_COST:g})" for kind in ("", "+sprt", "-online")} | {"consol-sprt"}
    for r in rep.rows:
        if r.method in shown or r.method.startswith("bayes-adapted"):
            t.add_row(
                r.family, r.method, f"{r.accuracy:.4f}", f"{r.fixed_accuracy:.4f}", f"{r.mean_samples:.2f}",
                f"{r.gap_points:+.2f}", f"[{r.gap_ci95_points[0]:+.2f}, {r.gap_ci95_points[1]:+.2f}]",
                ", ".join(r.dominated_by[:2]) + (f" (+{len(r.dominated_by) - 2})" if len(r.dominated_by) > 2 else "")
                or "no",
            )  # fmt: skip
    console.print(t)
    for f in rep.families:
        console.print(
            f"{f.family}: learned front ({f.learned_front_points} costs) {f.learned_front_dominated} points "
            f"dominated by a rule, with SPRT {f.sprt_front_dominated}, online-adapted {f.online_front_dominated}; oracle {f.oracle_mean_samples:.2f} samples; label-free prior "
            f"a={f.label_free_prior.a:g} b={f.label_free_prior.b:g} alpha={f.label_free_prior.alpha:g} "
            f"from {f.calibration_questions} questions ({f.calibration_samples} samples)",
            highlight=False,
        )
    console.print(f"report {out}")


@bank_app.command("build")
def bank_build_cmd(
    family: str = typer.Option(
        ...,
        "--family",
        "-f",
        help="antonyms, countries, continents, capitals, languages, plurals or comparatives",
    ),
    out: Path = typer.Option(..., "-o", "--out", help="bank file (.jsonl or .jsonl.gz)"),
    samples: int = typer.Option(40, "--samples", "-n"),
    limit: int = typer.Option(None, "--limit", help="first N questions only"),
    temperature: float = typer.Option(0.7, "--temperature"),
    seed: int = typer.Option(0, "--seed", min=0),
    base_url: str = typer.Option(
        None, "--base-url", help="OpenAI-compatible server (default: offline SmolLM2-135M)"
    ),
    model: str = typer.Option("default", "--model", help="model name on the server"),
    logprobs: bool = typer.Option(
        False,
        "--logprobs",
        help="ask the server for token log-probabilities (the local model always gives them)",
    ),
    traces: Path = typer.Option(
        None,
        "--traces",
        help="folder for one vote trace per question (default: BANK.traces next to the bank)",
    ),
) -> None:
    """Sample every question of a task family from a real model into a bank, recording each
    question's samples as a vote trace (the bank is what those traces read back as); each sample
    keeps the model's token log-probabilities when the model gives them.

    Examples:
      orchestrace bank build -f antonyms -o antonyms.jsonl.gz --limit 50
      orchestrace bank build -f countries -o c.jsonl --base-url http://127.0.0.1:8000/v1 --model qwen
    """
    from ..learn.stopping.banks import save_bank
    from ..learn.stopping.families import family as get_family
    from ..learn.stopping.sampling import build_bank, remote_sampler

    n = len(get_family(family).questions)
    sampler = remote_sampler(base_url, model, logprobs) if base_url else None
    trace_dir = str(traces or out.parent / (out.name.removesuffix(".gz").removesuffix(".jsonl") + ".traces"))
    with _bars() as bars:
        tick = bars(f"{family} x{samples}", min(n, limit or n))
        b = build_bank(
            family,
            samples=samples,
            limit=limit,
            temperature=temperature,
            seed=seed,
            model=sampler,
            progress=tick,
            traces_dir=trace_dir,
        )
    save_bank(b, str(out))
    console.print(f"wrote {len(b)} questions x {samples} samples to {out}; their traces to {trace_dir}")


@bank_app.command("synth")
def bank_synth_cmd(
    out: Path = typer.Option(..., "-o", "--out"),
    questions: int = typer.Option(500, "--questions", "-n"),
    seed: int = typer.Option(0, "--seed", min=0),
    like: str = typer.Option(None, "--like", help="calibrate the generator to this bank"),
) -> None:
    """Write a synthetic bank (default generator parameters, or calibrated to a bank with --like)."""
    from ..learn.stopping.banks import SynthParams, calibrate, load_bank, save_bank, synthetic_bank

    params = calibrate(load_bank(like)) if like else SynthParams()
    save_bank(synthetic_bank(questions, params, seed), str(out))
    console.print(f"wrote {questions} synthetic questions to {out}: {params}")


@bank_app.command("traces")
def bank_traces_cmd(
    bank: str = typer.Argument(..., help="bank (.jsonl[.gz] or embedded name)"),
    out: str = typer.Option(..., "-o", "--out", help="folder for one vote trace per question"),
) -> None:
    """Write a bank as vote traces, one per question (train stop --traces reads them back exactly)."""
    from ..learn.stopping.banks import load_bank
    from ..learn.stopping.traces import bank_to_traces

    paths = bank_to_traces(load_bank(bank), out)
    console.print(f"wrote {len(paths)} traces to {out}")


@bank_app.command("info")
def bank_info_cmd(bank: str = typer.Argument(..., help="bank file or embedded name")) -> None:
    """Size, one-sample accuracy (the mean over all samples of each question) and majority accuracy."""
    from ..learn.stopping.banks import calibrate, load_bank, one_sample_accuracy
    from ..learn.stopping.evaluation import run_rule, tables
    from ..learn.stopping.rules import Method, fixed_k

    b = load_bank(bank)
    k = b.min_samples
    full = run_rule(b, tables(b, k), Method(f"fixed-{k}", "fixed-k", k, fixed_k(k)), k)
    console.print(
        f"{b.name}: {len(b)} questions, {k} samples each; one sample {one_sample_accuracy(b, k):.3f} "
        f"(mean over the {k}), majority of {k} {full.accuracy:.3f}; calibrated {calibrate(b)}"
    )


@loop_app.command("stop")
def loop_stop_cmd(
    tasks: str = typer.Option(
        "antonyms", "--tasks", help="question family (training and held-out questions)"
    ),
    iterations: int = typer.Option(3, "--iterations", "-k", min=0),
    questions: int = typer.Option(8, "--questions", min=1, help="training runs per iteration"),
    budget: int = typer.Option(8, "--budget", min=2, help="most answers per run"),
    width: int = typer.Option(1, "--width", min=1, help="workers sampling at once (parallel waves)"),
    cost: float = typer.Option(0.01, "--cost", help="price of one answer in units of one correct answer"),
    update: str = typer.Option(
        "model",
        "--update",
        help="model: the policy's value under the answer process the runs show (no weights); "
        "weighted: importance-weighted clipped steps on each decision's credit",
    ),
    kl: float = typer.Option(0.1, "--kl", min=0.0, help="model: penalty on the KL to the current policy"),
    known: int = typer.Option(
        3, "--known", min=1, help="model: runs that went on from a state before its transitions are trusted"
    ),
    lr: float = typer.Option(0.3, "--lr", help="weighted: plain gradient step size"),
    window: int = typer.Option(
        0, "--window", min=0, help="iterations whose runs each update reuses (0: all)"
    ),
    max_weight: float = typer.Option(
        2.0, "--max-weight", min=1.0, help="weighted: truncation of the importance weights"
    ),
    seed: int = typer.Option(0, "--seed", min=0),
    backend: str = typer.Option("local", "--backend", help="local (SmolLM2-135M) or scripted"),
    base_url: str = typer.Option(None, "--base-url", help="any OpenAI-compatible server instead"),
    model: str = typer.Option("default", "--model", help="model name sent to --base-url"),
    out: str = typer.Option("runs/loop/stop", "-o", "--out", help="loop folder (resumed if it exists)"),
    start: str = typer.Option(None, "--start", help="start from this stop policy (e.g. from train stop)"),
    target_kl: float = typer.Option(
        None,
        "--target-kl",
        help="weighted: stop an update's gradient steps once PPO's approximate KL passes this (the model "
        "update has no steps to stop: --kl bounds its move)",
    ),
    log: str = typer.Option(
        None,
        "--log",
        help="tensorboard or mlflow: every iteration's figures in OUT/tensorboard (event files) or OUT/mlflow/mlflow.db",
    ),
) -> None:
    """Learn the stop decision from the vote runs it drives; resumable; curves in OUT/curves.png.

    Examples:
      orchestrace loop stop --tasks antonyms --iterations 3
      orchestrace loop stop --tasks capitals --width 2 --base-url http://127.0.0.1:8000/v1
    """
    from ..learn.stopping.loop_stop import StopLoopConfig, check_update, loop_stop
    from ..runtime.runner import backend_spec

    check_update(update)
    spec = (
        None
        if backend == "local" and not base_url
        else backend_spec(backend, base_url=base_url, model=model, seed=seed)
    )
    cfg = StopLoopConfig(
        tasks, iterations, questions, budget, width, cost, update=update, kl=kl, known=known, lr=lr, seed=seed,
        backend=spec, start=start, window=window, max_weight=max_weight, target_kl=target_kl,
    )  # fmt: skip
    with _bars() as bars:
        advance = bars(f"loop stop ({tasks})", iterations)
        recs = loop_stop(cfg, out, progress=lambda _i, _n: advance(), log=log)
    for r in recs:
        ev = ", ".join(f"{k} {v:.3f}" for k, v in r.eval.items())
        tr = ", ".join(f"{k} {v:.3f}" for k, v in r.train.items())
        console.print(f"iteration {r.iteration}: train ({tr})  held-out ({ev})", highlight=False)
    console.print(f"curves {out}/curves.png  policy {recs[-1].policy}")


def _hook_other_decisions() -> None:
    """Retry / delegate / swarm commands (``experiment_commands``) join the train and eval groups."""
    from . import experiment_commands

    for app, verb in ((train_app, "train"), (eval_app, "eval")):
        for what in ("retry", "delegate", "swarm"):
            app.command(what)(getattr(experiment_commands, f"{verb}_{what}_cmd"))


def register(app: typer.Typer) -> None:
    _hook_other_decisions()
    app.add_typer(train_app, name="train")
    app.add_typer(eval_app, name="eval")
    app.add_typer(bank_app, name="bank")
    app.add_typer(loop_app, name="loop")
