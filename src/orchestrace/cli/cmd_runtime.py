"""Runtime commands: run, replay, fork, repair."""

from __future__ import annotations

import os
from typing import Annotated

import orjson
import typer
from rich.markup import escape

from ..core.errors import OrchestraceError
from .output import console, console_err


def _config(pairs: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise OrchestraceError("OT010", f"--set expects KEY=VALUE, got {p!r}")
        try:
            out[k] = orjson.loads(v)
        except orjson.JSONDecodeError:
            out[k] = v
    return out


def _summary(res: object) -> str:
    tr = res.trace  # type: ignore[attr-defined]
    o = res.outcome  # type: ignore[attr-defined]
    return (
        f"{len(tr.events)} events, {len(tr.edges)} edges, {int(tr.costs.get('tokens', 0))} tokens; "
        f"stop: {o.get('stop_reason')}, status: {o.get('status')}; final: {o.get('final')!r}; "
        f"live calls {res.live_calls}, cache hits {res.cache_hits}"  # type: ignore[attr-defined]
    )


def run(
    program: Annotated[
        str,
        typer.Argument(
            help="centralized, pec, debate, vote, route, swarm, team, or module:function returning a Setup."
        ),
    ],
    out: Annotated[
        str | None,
        typer.Option("--out", "-o", help="Trace to write (default runs/PROGRAM-sSEED.events.jsonl)."),
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of every sampled call.")] = 0,
    backend: Annotated[
        str, typer.Option(help="auto (local model if installed, else scripted), local or scripted.")
    ] = "auto",
    base_url: Annotated[
        str | None, typer.Option(help="Any OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1.")
    ] = None,
    model: Annotated[str, typer.Option(help="Model name sent to --base-url.")] = "default",
    logprobs: Annotated[
        bool,
        typer.Option(
            "--logprobs",
            help="Ask --base-url for token log-probabilities, recorded on each call's return event "
            "(the local model always records them).",
        ),
    ] = False,
    set_: Annotated[
        list[str], typer.Option("--set", help="Program option KEY=VALUE (JSON values), repeatable.")
    ] = [],  # noqa: B006
    clock: Annotated[
        str, typer.Option(help="wall (seconds) or logical (t = event index; byte-identical reruns).")
    ] = "wall",
    timeout: Annotated[float, typer.Option(help="Seconds per LLM call before it counts as failed.")] = 60.0,
    retries: Annotated[int, typer.Option(help="Retries of a failed call (429, 5xx, timeout, bad body).")] = 2,
    budget_tokens: Annotated[int | None, typer.Option(help="Stop the run after this many tokens.")] = None,
    budget_usd: Annotated[float | None, typer.Option(help="Stop the run after this many US dollars.")] = None,
    budget_seconds: Annotated[
        float | None, typer.Option(help="Stop the run after this many seconds.")
    ] = None,
    policy: Annotated[
        list[str],
        typer.Option(
            "--policy",
            help="DECISION=PATH: a learned policy answers that decision (e.g. stop=runs/stop/policy).",
        ),
    ] = [],  # noqa: B006
    explore: Annotated[
        bool,
        typer.Option(
            "--explore",
            help="Learned policies draw their actions from their distribution (seeded by the run) instead of "
            "taking the most probable: runs to learn from (train delegate --traces --logged).",
        ),
    ] = False,
) -> None:
    """Run a program (a multi-agent system) and record its trace (+ a call cache beside it).

    Examples:\n
      orchestrace run vote --seed 1\n
      orchestrace run centralized --backend scripted --clock logical -o runs/c.events.jsonl\n
      orchestrace run pec --base-url http://127.0.0.1:8000/v1 --model qwen --budget-tokens 5000\n
      orchestrace run debate --set word=tall --set n=5\n
      orchestrace run vote --set question='"Capital of France?"' --policy stop=runs/stop/policy\n
      orchestrace run swarm --set 'stages=[[3,4,2],[5]]' --policy spawn=runs/swarm/swarm
    """
    from ..runtime.orchestrator import Budget
    from ..runtime.runner import backend_spec
    from ..runtime.runner import run as run_program

    if clock not in ("wall", "logical"):
        raise OrchestraceError("OT010", f"--clock must be wall or logical, got {clock!r}")
    out = out or os.path.join("runs", f"{program.replace(':', '_')}-s{seed}.events.jsonl")
    spec = backend_spec(backend, base_url=base_url, model=model, seed=seed, logprobs=logprobs)
    if explore and not policy:
        raise OrchestraceError("OT606", "--explore makes learned policies sample: give one with --policy")
    trace_policies = None
    if policy:
        from ..learn.policies import load_trace_policies

        trace_policies = load_trace_policies(policy, explore=explore)
    res = run_program(
        program,
        out,
        trace_policies=trace_policies,
        config=_config(set_),
        seed=seed,
        backend=spec,
        clock=clock,  # type: ignore[arg-type]
        timeout=timeout,
        retries=retries,
        budget=Budget(budget_tokens, budget_usd, budget_seconds),
    )
    if res.unread_config:  # most likely a typo in --set; kept in the trace's metadata all the same
        console_err.print(
            f"[yellow]warning:[/yellow] {program} did not read --set {', '.join(res.unread_config)} "
            f"(it reads {', '.join(sorted(res.config_read))})",
            highlight=False,
        )
    if res.outcome.get("status") == "error":
        console.print(f"[red]failed[/red] {res.path} ({spec['kind']}): {_summary(res)}", highlight=False)
        console_err.print(f"[red]error:[/red] {escape(str(res.outcome.get('cause')))}", highlight=False)
        raise typer.Exit(1)
    console.print(f"[green]recorded[/green] {res.path} ({spec['kind']}): {_summary(res)}", highlight=False)


def replay(
    trace: Annotated[
        str, typer.Argument(help="A trace recorded by `orchestrace run` (its .cache.jsonl beside it).")
    ],
    out: Annotated[str | None, typer.Option("--out", "-o", help="Where to write the replayed trace.")] = None,
) -> None:
    """Re-run a recorded trace from its call cache, with zero live calls, and compare.

    Exit code 0 when the replay equals the original, 1 when it differs.

    Examples:\n
      orchestrace replay runs/debate-s1.events.jsonl
    """
    from ..runtime.runner import replay as do_replay
    from ..runtime.runner import same_trace

    res, original = do_replay(trace, out)
    diff = same_trace(res.trace, original)
    if diff is None:
        same_bytes = open(trace, "rb").read() == open(res.path, "rb").read()
        console.print(
            f"[green]identical[/green] {res.path}: {len(res.trace.events)} events, {res.live_calls} live calls, "
            f"{res.cache_hits} cache hits{', byte for byte' if same_bytes else ''}",
            highlight=False,
        )
        return
    console.print(
        f"[red]differs[/red] {escape(str(res.path))}: first difference at event index {diff}", highlight=False
    )
    raise typer.Exit(1)


def fork(
    trace: Annotated[str, typer.Argument(help="A trace recorded by `orchestrace run`.")],
    at: Annotated[str, typer.Option("--at", help="Event id where the counterfactual starts, e.g. e8.")],
    do: Annotated[
        list[str],
        typer.Option(
            "--do",
            help="drop | replace:TEXT | resample[:SEED] (LLM returns, messages); stop | delegate:A,B | "
            "policy:NAME (decisions). Repeat for a sibling group.",
        ),
    ],
    out: Annotated[str | None, typer.Option("--out", "-o", help="Where to write the fork.")] = None,
    offline: Annotated[bool, typer.Option(help="Never call a live backend; fail on a cache miss.")] = False,
    base_url: Annotated[
        str | None, typer.Option(help="Continue live against this OpenAI-compatible server.")
    ] = None,
    model: Annotated[str, typer.Option(help="Model name for --base-url.")] = "default",
) -> None:
    """Fork a run at one event with an intervention: the prefix is replayed from the cache (and is
    identical), the rest continues from the cache where possible and live otherwise.

    Examples:\n
      orchestrace fork runs/debate-s1.events.jsonl --at e8 --do "replace:cold"\n
      orchestrace fork runs/debate-s1.events.jsonl --at e8 --do resample:1\n
      orchestrace fork runs/pec-s0.events.jsonl --at e0 --do stop\n
      orchestrace fork runs/debate-s1.events.jsonl --at e8 --do resample:1 --do resample:2 --do resample:3
    """
    from ..runtime.runner import backend_spec
    from ..runtime.runner import fork as do_fork

    spec = backend_spec(base_url=base_url, model=model) if base_url else None
    if out is not None and len(do) > 1:
        raise OrchestraceError("OT010", "--out names one file: leave it out when forking with several --do")
    for d in do:
        res = do_fork(trace, at, d, out, backend=spec, offline=offline)
        console.print(
            f"[green]forked[/green] {res.path} ({d}): shares the first {res.diverged_at} events; {_summary(res)}",
            highlight=False,
        )


def repair(
    log: Annotated[str, typer.Argument(help="A (possibly truncated) .events.jsonl log.")],
    out: Annotated[
        str | None, typer.Option("--out", "-o", help="Default: LOG with .repaired before .events.jsonl.")
    ] = None,
) -> None:
    """Turn a truncated or damaged event log (e.g. from a killed run) into a valid trace.

    Examples:\n
      orchestrace repair runs/crashed.events.jsonl\n
      orchestrace repair runs/crashed.events.jsonl -o fixed.events.jsonl
    """
    from ..runtime.repair import repair as do_repair

    path, rep = do_repair(log, out)
    console.print(
        f"[green]repaired[/green] {path}: {rep.events} events and {rep.edges} edges kept; dropped "
        f"{rep.bad_lines} unreadable line(s), {len(rep.dropped_events)} invalid event(s), {rep.dropped_edges} edge(s)"
        + ("" if rep.had_header else "; no header (ids from the file name)"),
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    for fn in (run, replay, fork, repair):
        app.command(fn.__name__)(fn)
