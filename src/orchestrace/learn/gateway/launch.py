"""Building a gateway from options (``orchestrace serve``): the trainable model with one adapter per
agent, role or shared (optionally loaded from a trained policy folder), or forwarding to a server."""

from __future__ import annotations

import math
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ...core.errors import LoadError
from ..team.program import BadInput
from .completers import BackendCompleter, Completer, ForwardCompleter, SerialModel
from .server import GatewayServer, Limits
from .service import CallDefaults, Gateway, Team, parse_agents


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    runs: str = "runs/gateway"
    agents: str = ""  # "planner,writer=drafting": agent names (and roles); empty: any agent
    adapters: str = "agent"
    server: str | None = None  # forward to this OpenAI-compatible server instead of the local model
    policy: str | None = None  # load the adapters of a trained policy folder
    temperature: float = 0.7
    max_tokens: int = 64
    max_tokens_cap: int = 512
    max_prompt_tokens: int = 4096
    limits: Limits = Limits()
    keep_content: bool = True
    allow_hosts: tuple[str, ...] = ()
    threads: int | None = None
    lora_rank: int = 8
    batch_window: float = 0.01
    verbose: bool = False


def check_options(opts: ServeOptions) -> None:
    """What would serve wrongly rather than fail: a NaN or negative default temperature went to
    every call, a default above the cap was never given, a --server that is no http(s) URL failed
    each call, --policy with --server loaded nothing (the server holds the adapters)."""
    if not (math.isfinite(opts.temperature) and opts.temperature >= 0):
        raise BadInput("OT740", f"--temperature must be a finite number >= 0, got {opts.temperature}")
    if any(not h.strip() for h in opts.allow_hosts):  # "" let in every request that sends no Host
        raise BadInput("OT740", "--allow-host needs a host name, got an empty one")
    if opts.max_tokens > opts.max_tokens_cap:
        raise BadInput(
            "OT740", f"--max-tokens {opts.max_tokens} is above --max-tokens-cap {opts.max_tokens_cap}"
        )
    if opts.server is not None:
        url = urlsplit(opts.server)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise BadInput(
                "OT740", f"--server must be an http(s) URL (http://HOST:PORT), got {opts.server!r}"
            )
        if opts.policy is not None:
            raise BadInput(
                "OT740", "--policy loads adapters into the local model; with --server, the server serves them"
            )


def team_of(opts: ServeOptions) -> Team:
    try:
        roles = parse_agents(opts.agents)
        team = Team(opts.adapters, roles)
    except ValueError as e:
        raise BadInput("OT740", str(e)) from None
    if not roles and opts.server is None and opts.adapters != "shared":
        raise BadInput(
            "OT740",
            f"--adapters {opts.adapters} makes one adapter per {opts.adapters} of the local model: "
            "name the agents with --agents (e.g. --agents planner,writer), or use --adapters shared",
        )
    return team


def local_completer(team: Team, opts: ServeOptions) -> BackendCompleter:
    from ..team.backend import TrainableBackend
    from ..team.checkpoints import check_policy_file, load_policy
    from ..team.model import LoraSettings, TeamModel

    adapters = team.adapters() or ["team"]
    if opts.policy is not None:
        check_policy_file(opts.policy, adapters)
    model = TeamModel(adapters, LoraSettings(rank=opts.lora_rank), threads=opts.threads)
    if opts.policy is not None:
        load_policy(model, opts.policy)
    serial = SerialModel(model)
    return BackendCompleter(
        TrainableBackend(serial),  # type: ignore[arg-type]
        serial,
        batch_window=opts.batch_window,
        max_prompt_tokens=opts.max_prompt_tokens,
    )


def build(opts: ServeOptions, completer: Completer | None = None) -> GatewayServer:
    """The server (not yet serving); ``completer`` replaces the model or ``--server`` (tests)."""
    check_options(opts)
    team = team_of(opts)
    try:  # before the model loads; a file there was an internal error (FileExistsError)
        Path(opts.runs).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LoadError("OT001", f"cannot make the runs folder: {e.strerror or e}", path=opts.runs) from None
    if completer is None:
        completer = ForwardCompleter(opts.server) if opts.server else local_completer(team, opts)
    gateway = Gateway(
        completer,
        team,
        opts.runs,
        defaults=CallDefaults(opts.temperature, opts.max_tokens, opts.max_tokens_cap),
        keep_content=opts.keep_content,
    )
    try:
        return GatewayServer(
            gateway,
            opts.host,
            opts.port,
            limits=opts.limits,
            allow_hosts=opts.allow_hosts,
            verbose=opts.verbose,
        )
    except OSError as e:
        gateway.close()
        raise BadInput("OT741", f"cannot listen on {opts.host}:{opts.port}: {e.strerror or e}") from None


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve(opts: ServeOptions, ready: Callable[[str], None]) -> list[str]:
    """Serve until interrupted (Ctrl-C, or SIGTERM: a background job ignores SIGINT); then close
    every open run. Returns the traces written."""
    server = build(opts)
    ready(server.url)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        server.gateway.close()
    return sorted(server.gateway.finished.values())
