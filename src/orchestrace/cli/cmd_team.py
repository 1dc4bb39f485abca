"""``orchestrace train team``: on-policy RL of the team's LoRA adapters from its recorded traces."""

from __future__ import annotations

import typer

from .output import console
from .ray_option import RayCommand, RayOption


def train_team_cmd(
    program: str = typer.Option(
        "team",
        "--program",
        help="team, a runtime program, or module:function running your team given base_url (the gateway)",
    ),
    agents: str = typer.Option(
        None, "--agents", help="the agents of a module:function team, NAME or NAME=ROLE (default: its AGENTS)"
    ),
    program_timeout: float = typer.Option(
        300.0, "--program-timeout", help="seconds one run of a module:function team may take"
    ),
    tasks: str = typer.Option(
        "countries",
        "--tasks",
        help="task file (JSONL or Parquet: id, question, answer[, split, metadata]) or a shipped set "
        "(antonyms, capitals, comparatives, continents, countries, languages, plurals)",
    ),
    verifier: str = typer.Option(
        None,
        "--verifier",
        help="exact, phrase, word, contains, numeric[:TOL], choice or module:function "
        "(default: the shipped set's own, exact for a file)",
    ),
    credit: str = typer.Option(
        "grpo",
        "--credit",
        help="broadcast, grpo, drmas, loo, shapley, c3, loo-fork or shapley-fork (by re-runs "
        "without some answers, or for a --program with an agent's call resampled; agent unit)",
    ),
    unit: str = typer.Option("agent", "--unit", help="credit unit: agent, role, turn, message, token, ..."),
    resamples: int = typer.Option(
        1,
        "--resamples",
        help="loo-fork/shapley-fork: sample the last agent's call again this many times (2 or more: "
        "every sample trains, against the mean of the others)",
    ),
    iterations: int = typer.Option(3, "--iterations", "-k", min=0),
    adapters: str = typer.Option("role", "--adapters", help="shared (one adapter), role or agent (one each)"),
    solvers: int = typer.Option(2, "--solvers", help="solver agents before the aggregator"),
    topology: str = typer.Option(
        "aggregate",
        "--topology",
        help="aggregate (k solvers, an aggregator) or revise (a proposer, a reviser)",
    ),
    questions: int = typer.Option(4, "--questions", help="training questions per iteration"),
    group: int = typer.Option(4, "--group", help="runs per training question"),
    train_pool: int = typer.Option(150, "--train-pool", help="training questions in the split"),
    heldout: int = typer.Option(40, "--heldout", help="held-out questions (never trained on)"),
    eval_runs: int = typer.Option(1, "--eval-runs", help="runs per held-out question"),
    eval_every: int = typer.Option(1, "--eval-every", help="evaluate every N iterations (0 and last always)"),
    lr: float = typer.Option(3e-4, "--lr"),
    epochs: int = typer.Option(2, "--epochs", help="PPO-clip epochs over each iteration's batch"),
    clip: float = typer.Option(0.2, "--clip"),
    target_kl: float = typer.Option(
        None, "--target-kl", help="stop an iteration's epochs once PPO's approximate KL passes this"
    ),
    kl_coef: float = typer.Option(
        0.0, "--kl-coef", help="weight of each token's KL to the base model in the loss (TRL's beta)"
    ),
    overlong_penalty: float = typer.Option(
        0.0, "--overlong-penalty", help="taken off the advantage of every call cut off by its token limit"
    ),
    reward: str = typer.Option(None, "--reward", help="reward spec TOML (default: R1 team success)"),
    seed: int = typer.Option(0, "--seed", min=0),
    threads: int = typer.Option(None, "--threads", help="torch threads (default: torch's choice)"),
    start: str = typer.Option(None, "--start", help="start from these adapters (a policy folder)"),
    out: str = typer.Option("runs/team", "-o", "--out", help="loop folder (resumed if it exists)"),
    log: str = typer.Option(
        None,
        "--log",
        help="tensorboard or mlflow: every iteration's figures in OUT/tensorboard (event files) or OUT/mlflow/mlflow.db",
    ),
    ray: RayOption = None,
    ray_workers: int = typer.Option(2, "--ray-workers", help="Ray actors running rollouts (with --ray)"),
    server: str = typer.Option(
        None, "--server", help="sample on this OpenAI-compatible server (vLLM with LoRA endpoints)"
    ),
    server_adapters: str = typer.Option(
        "runs/served-adapters", "--server-adapters", help="folder the pushed adapters are written to"
    ),
    server_dir: str = typer.Option(
        None, "--server-dir", help="that folder's path on the server (default: the same path)"
    ),
) -> None:
    """Train the agents' own weights: rollouts recorded as traces, reward and credit from them,
    PPO-clip per adapter; held-out team accuracy before and after.

    Example:
      orchestrace train team --tasks countries --credit grpo --unit agent --iterations 3
      orchestrace train team --tasks my_tasks.jsonl --verifier numeric:0.01 --train-pool 80 --heldout 20
      orchestrace train team --ray --ray-workers 2          # rollouts on a local Ray
      orchestrace train team --server http://gpu:8000       # rollouts on a vLLM server
      orchestrace train team --program examples.teams.langgraph_team:run --tasks continents
    """
    from ..learn.gateway.train import ProgramOptions, train_any
    from ..learn.team.accuracy import summarise
    from ..learn.team.config import TeamConfig
    from ..learn.team.placement import RolloutPlace
    from ..learn.team.trainer import iteration_line
    from .cmd_learn import _bars

    cfg = TeamConfig(
        program=program,
        family=tasks,
        verifier=verifier,
        solvers=solvers,
        topology=topology,
        adapters=adapters,
        credit=credit,
        unit=unit,
        resamples=resamples,
        questions=questions,
        group=group,
        train_pool=train_pool,
        heldout=heldout,
        eval_runs=eval_runs,
        eval_every=eval_every,
        lr=lr,
        clip=clip,
        target_kl=target_kl,
        kl_coef=kl_coef,
        overlong_penalty=overlong_penalty,
        epochs=epochs,
        seed=seed,
        reward=reward,
    )
    with _bars() as bars:
        advance = bars(f"train team ({credit}/{unit})", iterations)
        recs = train_any(
            cfg,
            out,
            iterations,
            ProgramOptions(agents=agents, timeout=program_timeout),
            start=start,
            threads=threads,
            progress=lambda _i, _n: advance(),
            place=RolloutPlace(ray, ray_workers, server, server_adapters, server_dir),
            log=log,
        )
    for r in recs:
        console.print(iteration_line(r), highlight=False)
    s = summarise(out)
    console.print(
        f"held-out team accuracy: before {s.before:.3f}, after {s.after:.3f} "
        f"(difference {s.difference:+.3f}, paired 95% CI [{s.ci95[0]:+.3f}, {s.ci95[1]:+.3f}], "
        f"{s.questions} questions)",
        highlight=False,
    )
    console.print(f"adapters {recs[-1].policy}  curves {out}/curves.png", highlight=False)


def eval_team_cmd(
    folders: list[str] = typer.Argument(..., help="train team loop folders (credit methods x seeds)"),
    out: str = typer.Option(None, "-o", "--out", help="write team-report.json and team-report.png here"),
    examples: int = typer.Option(
        2, "--examples", min=0, help="held-out questions whose team answer flipped, per run"
    ),
    seed: int = typer.Option(0, "--seed", min=0, help="bootstrap seed"),
) -> None:
    """Compare train team runs: held-out team accuracy before/after per run and per credit method
    (seeds averaged, paired 95% CI over questions), each method against broadcast, what each agent
    changed, seconds per iteration.

    Example:
      orchestrace eval team runs/team-exp/* -o runs/team-exp
    """
    from ..learn.team.report import REPORT_PNG, team_report

    rep = team_report(folders, out, examples=examples, seed=seed)

    def ci(c: tuple[float, float]) -> str:
        return f"[{c[0]:+.3f}, {c[1]:+.3f}]"

    for r in rep.runs:
        console.print(
            f"{r.folder}: {r.credit} seed {r.seed}, {r.iterations} iterations, "
            f"{r.train_s_per_iteration:.1f} s/iteration (rollouts + update): held-out team accuracy "
            f"{r.before:.3f} -> {r.after:.3f} ({r.difference:+.3f}, paired 95% CI {ci(r.ci95)})",
            highlight=False,
        )
        for a in r.agents:
            habits = ""
            if a.follows_last_before is not None and a.follows_last_after is not None:
                habits = f"; solvers disagree: follows the last {a.follows_last_before:.2f} -> {a.follows_last_after:.2f}"
            if a.picks_right_before is not None and a.picks_right_after is not None:
                habits += f", right when a solver is {a.picks_right_before:.2f} -> {a.picks_right_after:.2f}"
            console.print(
                f"  {a.agent}: accuracy {a.before:.3f} -> {a.after:.3f}, {a.changed:.0%} of answers changed{habits}",
                highlight=False,
            )
        for e in r.examples:
            console.print(
                f"  {e.question}: {e.before} ({'right' if e.team_before else 'wrong'}) -> "
                f"{e.after} ({'right' if e.team_after else 'wrong'})",
                highlight=False,
            )
    console.print(f"per credit method ({rep.questions} held-out questions, seeds averaged per question):")
    for c in rep.credits:
        vs = ""
        if c.minus_broadcast is not None and c.minus_broadcast_ci95 is not None:
            vs = f"; after - broadcast's after {c.minus_broadcast:+.3f} {ci(c.minus_broadcast_ci95)}"
        console.print(
            f"  {c.credit} (seeds {', '.join(map(str, c.seeds))}): {c.before:.3f} -> {c.after:.3f} "
            f"({c.difference:+.3f}, paired 95% CI {ci(c.ci95)}){vs}",
            highlight=False,
        )
    if out is not None:
        console.print(f"curves {out}/{REPORT_PNG}", highlight=False)


bench_app = typer.Typer(help="Benchmarks that train: grids of train team runs.", no_args_is_help=True)


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _seeds(text: str) -> list[int]:
    """--seeds 0,1,2; a word there (int("x")) or a negative seed was an internal error."""
    try:
        seeds = [int(s) for s in _csv(text)]
    except ValueError:
        seeds = [-1]
    if any(s < 0 for s in seeds):  # numpy refuses a negative seed once the cell runs
        raise typer.BadParameter(f"comma-separated integers >= 0, got {text!r}", param_hint="--seeds")
    return seeds


def bench_team_cmd(
    families: str = typer.Option(
        "continents,plurals,languages", "--families", help="task sets, comma-separated"
    ),
    topologies: str = typer.Option("agg2,agg3,revise", "--topologies", help="agg2, agg3, revise"),
    credits: str = typer.Option(
        "broadcast,grpo,loo-fork,shapley-fork,c3",
        "--credits",
        help="broadcast, grpo, loo-fork, shapley-fork, c3, loo-fork-rloo (loo-fork, the last agent's "
        "call sampled 3 more times, all 4 samples trained)",
    ),
    seeds: str = typer.Option("0,1,2", "--seeds"),
    iterations: int = typer.Option(3, "--iterations", "-k", min=1),
    questions: int = typer.Option(2, "--questions", help="training questions per iteration"),
    group: int = typer.Option(4, "--group", help="runs per training question"),
    train_pool: int = typer.Option(100, "--train-pool"),
    heldout: int = typer.Option(40, "--heldout", help="held-out questions (evaluated at the start and end)"),
    eval_runs: int = typer.Option(
        1, "--eval-runs", help="runs per held-out question (their mean is its accuracy)"
    ),
    kl_coef: float = typer.Option(0.0, "--kl-coef", help="each token's KL to the base model in the loss"),
    overlong_penalty: float = typer.Option(
        0.0, "--overlong-penalty", help="taken off the advantage of every call cut off by its token limit"
    ),
    reward: str = typer.Option(None, "--reward", help="reward spec TOML (default: R1 team success)"),
    lr: float = typer.Option(2e-3, "--lr"),
    epochs: int = typer.Option(2, "--epochs"),
    threads: int = typer.Option(None, "--threads", help="torch threads (default: torch's choice)"),
    report_only: bool = typer.Option(False, "--report-only", help="write the table from finished cells only"),
    out: str = typer.Option("runs/bench-team", "-o", "--out", help="grid folder (finished cells are kept)"),
) -> None:
    """Per-agent credit vs broadcast over families x topologies x credit methods x seeds: every cell a
    train team run (resumable: finished cells are kept), then one table (per family and pooled,
    paired 95% CIs against the start and against broadcast) and one figure. The defaults are the
    settings of the grid in docs/train_team.md; a folder holds one setting (other settings: OT699).

    Example:
      orchestrace bench team --families continents --topologies agg3 --credits broadcast,loo-fork --seeds 0
    """
    from ..learn.team.config import TeamConfig
    from ..learn.team.grid import cells, grid_report, markdown, run_grid, write_report

    grid = cells(_csv(families), _csv(topologies), _csv(credits), _seeds(seeds))
    if not report_only:
        base = TeamConfig(
            questions=questions, group=group, train_pool=train_pool, heldout=heldout, eval_runs=eval_runs,
            kl_coef=kl_coef, overlong_penalty=overlong_penalty, reward=reward, lr=lr, epochs=epochs,
        )  # fmt: skip
        res = run_grid(
            grid,
            base,
            iterations,
            out,
            threads=threads,
            progress=lambda c, what: console.print(f"{what} {c.name}", highlight=False),
        )
        console.print(f"cells run now: {len(res.ran)}, kept from before: {len(res.kept)}", highlight=False)
    rep = grid_report(out)
    _, _, png = write_report(rep, out)
    console.print(markdown(rep), highlight=False, markup=False)
    console.print(f"finished cells: {len(rep.cells)}  table {out}/grid.md  figure {png}", highlight=False)


def register(app: typer.Typer) -> None:
    """Joins the ``train`` and ``eval`` groups of ``cmd_learn`` (registered in module order, so
    before or after)."""
    from .cmd_learn import eval_app, train_app

    train_app.command("team", cls=RayCommand)(train_team_cmd)
    bench_app.command("team")(bench_team_cmd)
    app.add_typer(bench_app, name="bench")
    eval_app.command("team")(eval_team_cmd)
