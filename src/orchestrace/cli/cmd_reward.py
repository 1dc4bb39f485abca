"""Reward and credit commands: ``orchestrace reward`` and ``orchestrace credit``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.table import Table

from ..core.errors import OrchestraceError
from ..core.model import Trace
from .output import console, console_err, fmt_number
from .progress import stream_traces
from .ray_option import RayCommand, RayOption

_MAX_SHOWN = 50  # traces whose credits the tables list

_SHOWN = ("team", "process", "tool", "judge", "critical_steps", "r_parallel", "r_finish")


def reward(
    paths: Annotated[list[str], typer.Argument(help="Trace files or directories.")],
    spec: Annotated[Path | None, typer.Option("--spec", "-s", help="Reward spec (TOML).")] = None,
    step: Annotated[int, typer.Option(min=0, help="Training step for annealing schedules.")] = 0,
    out: Annotated[
        str | None, typer.Option("--out", "-o", help="Write traces with the reward channels.")
    ] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Compute reward channels R1-R8 for each trace (the R8 total under the spec).

    Examples:\n
      orchestrace reward run.json\n
      orchestrace reward --spec reward.toml --step 500 corpus.jsonl -o rewarded.jsonl
    """
    from ..core.io import save
    from ..reward import RewardSpec, compute_rewards, load_spec, with_rewards

    if format not in ("table", "json"):
        raise OrchestraceError("OT010", f"--format must be table or json, got {format!r}")
    rs = load_spec(spec) if spec is not None else RewardSpec()
    rows: list[tuple[str, dict[str, float]]] = []  # (trace id, channels) for the table

    def rewarded() -> Iterator[Trace]:  # one trace in memory at a time; each computed once
        source: list[str] = []
        for t in stream_traces(paths, "reward", quiet=quiet, source=source):
            try:
                r = compute_rewards(t, rs, step=step)
            except OrchestraceError as e:  # about this trace: name its file too (OT402 named none)
                e.path = e.path or source[0]
                raise
            if format == "json":
                console.out(
                    orjson.dumps({"trace_id": t.trace_id, "rewards": r.channels, "family": r.family}).decode()
                )
            elif len(rows) < _MAX_SHOWN:  # "-" where no message is judged: R6 is 0 there by default
                shown = {k: v for k, v in r.channels.items() if k != "judge" or r.per_event.get("judge")}
                rows.append((t.trace_id, shown))
            yield with_rewards(t, r, rs, step=step)

    n = save(rewarded(), out) if out is not None else sum(1 for _ in rewarded())
    if format == "table":
        cols = [c for c in (*_SHOWN, rs.total) if c == "judge" or any(c in ch for _, ch in rows)]
        table = Table("trace", *cols)
        for tid, ch in rows:
            table.add_row(tid, *(fmt_number(ch[c]) if c in ch else "-" for c in cols))
        console.print(table)
        team = (
            "from the spec's [hooks] verifier"
            if rs.hooks.verifier
            else "rewards.team or metrics.task_success"
        )
        console.print(
            f"team: R1 team outcome ({team}); judge: R6 mean judge score of the messages "
            "(attrs.judge_score or [hooks] judge; '-': no message judged)",
            highlight=False,
            markup=False,
        )
        if n > _MAX_SHOWN:
            console.print(f"(the first {_MAX_SHOWN} of {n} traces shown)")
    if out is not None:
        console_err.print(f"wrote {n} trace(s) with reward channels -> {out}")


def credit(
    paths: Annotated[
        list[str], typer.Argument(help="Trace files or directories (group methods use all of them).")
    ],
    method: Annotated[
        str, typer.Option("--method", "-m", help="broadcast, grpo, drmas, loo, difference, shapley, c3, coma")
    ] = "grpo",
    unit: Annotated[
        str,
        typer.Option(
            "--unit",
            "-u",
            help="team, orchestrator, role, agent, turn, message, tool, token; comma list or all",
        ),
    ] = "agent",
    channel: Annotated[str, typer.Option(help="Reward channel used as R.")] = "team",
    partition: Annotated[
        bool, typer.Option("--partition", help="Exact partition: unit credits sum to R.")
    ] = False,
    samples: Annotated[int, typer.Option(min=1, help="Permutations for Shapley beyond 12 players.")] = 256,
    seed: Annotated[int, typer.Option(min=0, help="Seed for sampled Shapley.")] = 0,
    baseline: Annotated[str, typer.Option(help="broadcast baseline: none or mean")] = "none",
    opt: Annotated[
        list[str] | None,
        typer.Option(
            "--opt", help="Method option key=value: variant, reward, alpha, q=module:function (repeatable)."
        ),
    ] = None,
    out: Annotated[
        str | None, typer.Option("--out", "-o", help="Write traces with credits on their events.")
    ] = None,
    top: Annotated[
        int, typer.Option(min=0, help="Units shown per trace: the largest credits (by size).")
    ] = 5,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    ray: RayOption = None,
) -> None:
    """Assign credit at one or more units; each event's credit is stored under "METHOD/UNIT".

    Examples:\n
      orchestrace credit --method grpo --unit agent group/*.json -o credited.jsonl\n
      orchestrace credit --method shapley --unit agent,tool --partition run.json\n
      orchestrace credit --method c3 --unit message tree/ -o tree.credited.jsonl\n
      orchestrace credit --method drmas --unit message --opt reward=agent runs.jsonl\n
      orchestrace credit --method shapley --unit agent big.jsonl --ray -o out.jsonl   # per-trace work on Ray
    """
    from ..core.io import save
    from ..credit import METHODS, REST, UNITS, check_method_options, iter_credit
    from ..credit.methods import REST_CREDIT, credit_at, streamable

    if method not in METHODS:
        raise OrchestraceError("OT413", f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    units = list(UNITS) if unit == "all" else [u.strip() for u in unit.split(",") if u.strip()]
    opts: dict[str, object] = {}
    if method == "shapley":
        opts.update(samples=samples, seed=seed)
    if method == "broadcast":
        opts["baseline"] = baseline
    given = _method_options(opt or [])
    check_method_options(method, given)
    opts.update(given)
    tables = {u: Table("trace", "unit", "credit", title=f"{method}/{u}") for u in units}
    rest_shown: set[str] = set()  # unit levels whose table lists the residual unit
    n = 0
    without_q = 0  # coma: units whose events record no Q-values, credited 0

    def credited() -> Iterator[Trace]:  # streamed one trace at a time when the method allows it
        nonlocal n, without_q
        traces = stream_traces(paths, "credit", quiet=quiet)
        if ray is not None and streamable(method, **opts):  # per-trace methods: one Ray task per batch
            from ..parallel import parallel_imap

            args = (method, units, channel, partition, opts)
            stream = parallel_imap(credit_at, list(enumerate(traces)), ray=ray, args=args, batch=8)
        else:  # group methods compare traces; their arithmetic is cheap, so they stay local
            stream = iter_credit(traces, method, units, channel=channel, partition=partition, **opts)
        for t in stream:
            n += 1
            without_q += sum(t.metadata["credit"][f"{method}/{u}"].get("units_without_q", 0) for u in units)
            if n <= _MAX_SHOWN:
                for u, table in tables.items():
                    level = t.metadata["credit"][f"{method}/{u}"]
                    vals = level["units"]
                    scale = max([abs(v) for v in vals.values()] + [abs(level.get("target") or 0.0)])
                    shown = {k: _snap(v, scale) for k, v in vals.items()}
                    for name, v in sorted(shown.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:top]:
                        table.add_row(t.trace_id, name, "0" if v == 0 else f"{v:+.4g}")
                        if name == REST:
                            rest_shown.add(u)
            yield t

    if out is not None:
        save(credited(), out)
    else:
        for _ in credited():
            pass
    for table in tables.values():
        console.print(table)
    if rest_shown:  # the residual unit, which no option names, said once
        console.print(
            f"{REST}: the events in no unit of the level ({', '.join(sorted(rest_shown))}); never a player, "
            f"its {method} credit is {REST_CREDIT[method]}",
            highlight=False,
            markup=False,
        )
    if n > _MAX_SHOWN:
        console.print(f"(credits of the first {_MAX_SHOWN} of {n} traces shown)")
    if without_q:  # a 0 that means "no data", said once rather than shown as a credit
        console_err.print(
            f"note: {without_q} unit(s) record no Q-values for the {channel} channel (attrs.q and "
            "attrs.q_alternatives: a number is the team channel's, an object keys Q by channel; or "
            "--opt q=...): their coma credit is 0",
            highlight=False,
        )
    if out is not None:
        console_err.print(f"wrote {n} trace(s) with credits -> {out}")


def _snap(v: float, scale: float) -> float:
    """A credit as shown: 0 where it is float noise, under 1e-12 of the trace's largest credit or
    reward (a partition's 1 - 1 printed as -1.11e-16)."""
    return 0.0 if abs(v) <= 1e-12 * scale else v


def _method_options(pairs: list[str]) -> dict[str, object]:
    from ..core.plugins import resolve

    out: dict[str, object] = {}
    for kv in pairs:
        if "=" not in kv:
            raise OrchestraceError("OT010", f"--opt expects key=value, got {kv!r}")
        k, v = kv.split("=", 1)
        if k in ("q", "game"):
            out[k] = resolve(v)
        elif k in ("alpha", "eps"):
            try:
                out[k] = float(v)
            except ValueError:
                raise OrchestraceError("OT010", f"--opt {k} needs a number, got {v!r}") from None
        elif k in ("variant", "reward"):
            out[k] = v
        else:
            raise OrchestraceError("OT010", f"unknown --opt {k!r} (variant, reward, alpha, eps, q, game)")
    return out


def register(app: typer.Typer) -> None:
    app.command("reward")(reward)
    app.command("credit", cls=RayCommand)(credit)
