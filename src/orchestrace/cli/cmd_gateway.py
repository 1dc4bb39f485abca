"""``orchestrace serve``: the gateway, an OpenAI-compatible endpoint that records every call."""

from __future__ import annotations

import typer

from .output import console, console_err


def serve_cmd(
    agents: str = typer.Option(
        "", "--agents", help="the team's agents, NAME or NAME=ROLE, comma-separated (others are refused)"
    ),
    adapters: str = typer.Option("agent", "--adapters", help="one LoRA adapter per agent, role, or shared"),
    runs: str = typer.Option("runs/gateway", "--runs", help="folder of the runs' traces and call caches"),
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (loopback by default)"),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="0 picks a free port"),
    server: str = typer.Option(
        None, "--server", help="forward calls to this OpenAI-compatible server (model = the adapter)"
    ),
    policy: str = typer.Option(None, "--policy", help="serve these trained adapters (a policy folder)"),
    temperature: float = typer.Option(0.7, "--temperature", help="for calls that give none"),
    max_tokens: int = typer.Option(64, "--max-tokens", min=1, help="new tokens for calls that give none"),
    max_tokens_cap: int = typer.Option(512, "--max-tokens-cap", min=1, help="the most a call may ask"),
    max_prompt_tokens: int = typer.Option(4096, "--max-prompt-tokens", min=1),
    max_body: int = typer.Option(4 * 1024 * 1024, "--max-body", min=1, help="bytes per request"),
    max_concurrent: int = typer.Option(64, "--max-concurrent", min=1, help="calls served at once"),
    keep_content: bool = typer.Option(
        True, "--keep-content/--no-content", help="prompts and completions in the traces (secrets redacted)"
    ),
    allow_host: list[str] = typer.Option(
        [], "--allow-host", help="another Host name clients may use (with --host)"
    ),
    threads: int = typer.Option(None, "--threads", help="torch threads"),
    verbose: bool = typer.Option(False, "--verbose", help="log method, path and status of each request"),
) -> None:
    """Serve the team's model over the OpenAI protocol and record every call as a trace.

    A call names its agent in `model` (or the X-Orchestrace-Agent header) and its run in the base
    URL (http://HOST:PORT/runs/RUN/v1) or the X-Orchestrace-Run header; POST /runs/RUN/end closes a
    run. Each run is RUNS/RUN.events.jsonl with its call cache (token ids, log-probs, adapter).
    A team's OpenTelemetry spans (OTLP/HTTP; OTEL_EXPORTER_OTLP_ENDPOINT=http://HOST:PORT/runs/RUN)
    join its run's trace when the run ends: tools, agents invoking agents, handoffs (docs/gateway.md).

    Example:
      orchestrace serve --agents researcher,writer --port 8000
      orchestrace serve --server http://gpu:8000 --agents planner,coder --adapters role
    """
    from ..learn.gateway.launch import ServeOptions, serve
    from ..learn.gateway.server import Limits, is_loopback

    if not is_loopback(host):
        console_err.print(
            f"warning: listening on {host}, not loopback: anyone who can reach this address can "
            "call the model, and every call is recorded",
            highlight=False,
        )
    opts = ServeOptions(
        host=host,
        port=port,
        runs=runs,
        agents=agents,
        adapters=adapters,
        server=server,
        policy=policy,
        temperature=temperature,
        max_tokens=max_tokens,
        max_tokens_cap=max_tokens_cap,
        max_prompt_tokens=max_prompt_tokens,
        limits=Limits(max_body=max_body, max_concurrent=max_concurrent),
        keep_content=keep_content,
        allow_hosts=tuple(allow_host),
        threads=threads,
        verbose=verbose,
    )
    written = serve(
        opts,
        lambda url: console.print(
            f"gateway on {url}/runs/RUN/v1 (agents: {agents or 'any'}; traces in {runs}; "
            f"OpenTelemetry spans to {url}/runs/RUN/v1/traces); Ctrl-C stops",
            highlight=False,
        ),
    )
    console.print(f"{len(written)} run(s) recorded in {runs}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
