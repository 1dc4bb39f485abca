"""``train team --program module:function``: train the adapters of any team, written with any agent
framework, through the gateway.

The function runs the user's team on one task against a base URL: ``fn(question, base_url)``
(and ``examples``, the task set's (question, answer) pairs, when it takes them),
sync or async, returning the team's answer (or None: the run's last completion is the answer).
Each rollout of ``train team`` becomes a gateway run whose trace is the rollout's trace, with the
``team`` program's metadata (``runtime.config``: task set and question), so the rest of the loop
is the ``team`` loop unchanged: reward (the task's verifier), credit methods and units, PPO-clip
per adapter, checkpoints and resume, held-out before/after with paired CIs, ``--server``, and
``--ray`` (:class:`GatewayRolloutWorker`: each Ray worker runs its share of the runs through a
gateway and a model of its own).

A run whose program raises, hangs past ``timeout`` or never calls the gateway is recorded as an
error trace (``metadata.outcome.status = "error"`` with the reason), left out of the update and
counted in the iteration's figures (``failed_runs``); in the held-out evaluation it counts as a
wrong answer.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.io import load_one
from ...core.model import Trace
from ...core.plugins import import_user_module
from ..loop import IterationRecord
from ..scalar_log import check_log
from ..team.checkpoints import check_policy_file, save_policy
from ..team.config import TeamConfig, check_resume, reward_spec, split
from ..team.forks import FORK_METHODS
from ..team.model import LoraSettings, TeamModel
from ..team.placement import RolloutPlace
from ..team.program import BadInput, family, question
from ..team.remote import RolloutWorker
from ..team.rollouts import Rollout
from ..team.step import TeamStep
from ..team.trainer import run_in_folder
from .completers import BackendCompleter, Completer, SerialModel
from .replay import ForkRun, ReplayPlan, plan_forks
from .server import GatewayServer, start_in_thread
from .service import CURRENT_RUN, CallDefaults, Gateway, Team, parse_agents

TeamFunction = Callable[..., Any]


def _module(name: str) -> Any:
    """A module by dotted name, or by the path of its ``.py`` file (``examples/teams/x.py``)."""
    if not name.endswith(".py"):
        return import_user_module(name)
    path = Path(name).resolve()
    if not path.is_file():
        raise ImportError(f"no file {name}")
    mod_name = f"orchestrace_team_{path.stem}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException as e:
        del sys.modules[mod_name]
        if isinstance(e, ImportError | KeyboardInterrupt):
            raise
        raise ImportError(f"{type(e).__name__} while importing it: {e}") from None  # the user's code
    return mod


def load_team_function(spec: str) -> TeamFunction:
    """``module:function`` or ``path/to/file.py:function`` -> the function; a clear error when it
    does not exist or is not one."""
    mod_name, sep, fn_name = spec.rpartition(":")
    if not sep or not mod_name or not fn_name:
        raise BadInput("OT742", f"--program {spec!r}: expected module:function or file.py:function")
    try:
        mod = _module(mod_name)
    except ImportError as e:
        raise BadInput("OT742", f"--program {spec!r}: cannot import {mod_name!r} ({e})") from None
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise BadInput("OT742", f"--program {spec!r}: module {mod_name!r} has no function {fn_name!r}")
    return fn


def is_gateway_program(spec: str) -> bool:
    """A ``module:function`` whose function takes ``base_url``: a team run through the gateway (a
    runtime program's function takes a config dict)."""
    if ":" not in spec:
        return False
    return _takes(load_team_function(spec), "base_url")


def team_agents(spec: str, agents: str | None) -> dict[str, str]:
    """The team's agents: ``--agents``, else the function's module's ``AGENTS`` list."""
    if agents:
        text = agents
    else:
        names = getattr(_module(spec.rpartition(":")[0]), "AGENTS", None)
        if not names:
            raise BadInput(
                "OT743",
                f"name the agents of {spec} with --agents (or give its module an AGENTS list): "
                "the model needs one adapter per agent or role before the first call",
            )
        text = ",".join(names) if not isinstance(names, str) else names
    try:
        return parse_agents(text)
    except ValueError as e:
        raise BadInput("OT743", str(e)) from None


@dataclass(frozen=True)
class RunSpec:
    """One run of the program: where its trace goes, its id, seed, task (``runtime.config``),
    metadata, and the replay plan of a fork."""

    path: str
    trace_id: str
    seed: int
    config: dict[str, Any]
    metadata: dict[str, Any]
    plan: ReplayPlan | None = None


@dataclass
class RunOutcome:
    answer: str | None = None
    error: str | None = None


class GatewayRollouts:
    """Rollouts of a gateway program: every rollout a gateway run, all running at once (a thread
    each for a sync function, one event loop for an async one) so the model batches their calls.
    ``served``: a :class:`~orchestrace.learn.team.served.ServedRollouts` whose adapters are pushed
    before each batch (its backend answers the calls)."""

    def __init__(
        self,
        completer: Completer,
        team: Team,
        fn: TeamFunction,
        *,
        defaults: CallDefaults,
        timeout: float,
        served: Any = None,
    ) -> None:
        self.fn, self.timeout, self.team, self.served = fn, timeout, team, served
        self.takes_examples = _takes(fn, "examples")
        if "agents" in sys.modules:  # an Agents SDK team: its spans join the run's trace
            from .spans import install_run_spans

            install_run_spans()
        if "opentelemetry.sdk.trace" in sys.modules:  # an OTel-instrumented team: the same
            from .otel_run import install_run_span_processor

            install_run_span_processor()
        self.gateway = Gateway(completer, team, Path("."), defaults=defaults, auto_runs=False)
        self.server = GatewayServer(self.gateway, "127.0.0.1", 0)
        start_in_thread(self.server)
        self.opened = 0

    def _run_id(self) -> str:
        self.opened += 1
        return f"r{self.opened}"

    def run(self, model: TeamModel | None, rollouts: list[Rollout]) -> list[Trace]:
        if self.served is not None:
            self.served.push()
        self._run_all(
            [
                RunSpec(
                    r.path,
                    r.trace_id,
                    r.seed,
                    r.config,
                    {"runtime": {"program": r.program, "config": r.config, "seed": r.seed}},
                )
                for r in rollouts
            ]
        )
        return [load_one(r.path) for r in rollouts]

    def run_forks(self, forks: list[ForkRun]) -> None:
        """Run the user's program again for each fork of a recorded run (``replay.py``), all at
        once, with the adapters that recorded the runs (pushed already with ``--server``)."""
        self._run_all([RunSpec(f.out, f.trace_id, f.seed, f.config, f.metadata, f.plan) for f in forks])

    def _run_all(self, specs: list[RunSpec]) -> None:
        runs = []
        fam = None
        for s in specs:
            fam = family(str(s.config["family"]))
            q = question(fam, str(s.config["question"]))
            rid = self._run_id()
            self.gateway.open_run(
                rid,
                path=s.path,
                seed=s.seed,
                task_id=q.question,
                trace_id=s.trace_id,
                own_seeds=True,
                metadata=s.metadata,
                plan=s.plan,
            )
            runs.append((rid, q.question))
        self.shots = shot_pairs(fam) if fam is not None else []
        outcomes = self._execute(runs)
        for (rid, _), o in zip(runs, outcomes, strict=True):
            error = o.error
            if error is None and self.gateway.calls_of(rid) == 0:
                error = "the program made no call through the gateway (does it use the base_url it is given?)"
            self.gateway.finish_run(rid, o.answer if error is None else None, error=error)

    def _kwargs(self, rid: str) -> dict[str, Any]:
        kw: dict[str, Any] = {"base_url": f"{self.server.url}/runs/{rid}/v1"}
        if self.takes_examples:
            kw["examples"] = list(self.shots)
        return kw

    def _execute(self, runs: list[tuple[str, str]]) -> list[RunOutcome]:
        outs = [RunOutcome() for _ in runs]
        if inspect.iscoroutinefunction(self.fn):

            async def one(i: int, rid: str, q: str) -> None:
                CURRENT_RUN.set((self.gateway, rid))
                try:
                    outs[i] = _answer(await asyncio.wait_for(self.fn(q, **self._kwargs(rid)), self.timeout))
                except TimeoutError:
                    outs[i] = RunOutcome(error=f"the program did not finish within {self.timeout:g} s")
                except Exception as e:
                    outs[i] = RunOutcome(error=f"the program raised {type(e).__name__}: {e}")

            async def all_runs() -> None:
                await asyncio.gather(*(one(i, rid, q) for i, (rid, q) in enumerate(runs)))

            asyncio.run(all_runs())
            return outs

        def target(i: int, rid: str, q: str) -> None:
            CURRENT_RUN.set((self.gateway, rid))
            try:
                outs[i] = _answer(self.fn(q, **self._kwargs(rid)))
            except Exception as e:
                outs[i] = RunOutcome(error=f"the program raised {type(e).__name__}: {e}")

        threads = [
            threading.Thread(target=target, args=(i, rid, q), daemon=True, name=f"team-{rid}")
            for i, (rid, q) in enumerate(runs)
        ]
        for t in threads:
            t.start()
        deadline = time.monotonic() + self.timeout
        for i, t in enumerate(threads):
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():  # left running; its later calls are refused (the run has ended)
                outs[i] = RunOutcome(error=f"the program did not finish within {self.timeout:g} s")
        return outs

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.gateway.close()
        if self.served is not None:
            self.served.close()


def _takes(fn: TeamFunction, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def shot_pairs(fam: Any) -> list[tuple[str, str]]:
    """The task set's worked examples as (question, answer) pairs (a program taking ``examples``
    gets them: the small model needs them to answer in the expected form)."""
    return [(str(s[0]), str(s[1])) if isinstance(s, tuple) else (s.question, s.gold) for s in fam.shots]


def _answer(value: Any) -> RunOutcome:
    return RunOutcome(answer=None if value is None else str(value))


class GatewayRolloutWorker(RolloutWorker):
    """A Ray rollout worker for a gateway program: its own model, gateway and copy of the program
    (``module:function`` or a file's path must be importable there: on one machine it is)."""

    def __init__(
        self,
        adapters: list[str],
        rank: int,
        threads: int | None,
        program: str,
        mode: str,
        roles: dict[str, str],
        defaults: CallDefaults,
        timeout: float,
        *,
        model_cache: str | None = None,
    ) -> None:
        super().__init__(adapters, rank, threads, model_cache=model_cache)
        from ..team.backend import TrainableBackend

        serial = SerialModel(self.model)
        self.runner = GatewayRollouts(
            BackendCompleter(TrainableBackend(serial), serial, batch_window=0.02),  # type: ignore[arg-type]
            Team(mode, roles),
            load_team_function(program),
            defaults=defaults,
            timeout=timeout,
        )

    def record(self, rollouts: list[Rollout]) -> None:
        self.runner.run(None, rollouts)


@dataclass
class ProgramStep(TeamStep):
    """The ``team`` loop's step with gateway rollouts: error runs are left out of the update."""

    failed: int = 0
    forker: GatewayRollouts | None = None  # runs the forks (fork credit): here, beside Ray workers too
    fork_figures: dict[str, float] = field(default_factory=dict)

    def collect(self, iteration: int, policy: str | None, out_dir: Path) -> list[str]:
        paths = super().collect(iteration, policy, out_dir)
        ok = [p for p in paths if not _failed(load_one(p))]
        self.failed = len(paths) - len(ok)
        return ok

    def fork(self, paths: list[str]) -> None:
        """The forks of the runs that did not fail (``replay.py``), run through the gateway; their
        counts go into the iteration's figures."""
        assert self.forker is not None
        forks = plan_forks(
            [p for p in paths if not _failed(load_one(p))], subsets=self.cfg.credit == "shapley-fork"
        )
        self.forker.run_forks(forks)
        done = [load_one(f.out) for f in forks]
        self.fork_figures = {
            "forks": float(len(done)),
            "forks_failed": float(sum(_failed(t) for t in done)),
            "forks_diverged": float(sum(bool(t.metadata["fork"]["diverged"]) for t in done)),
            "forks_replayed_calls": float(sum(t.metadata["fork"]["replayed"] for t in done)),
        }

    def update(
        self, iteration: int, policy: str | None, traces: list[str], out_dir: Path
    ) -> tuple[str, dict[str, float]]:
        if not traces:  # every run failed: nothing to learn from; the adapters stay as they were
            self._ensure(policy)
            path = save_policy(self.model, self.optimizer, out_dir / "policy", self.cfg, iteration)
            self.loaded = path
            return path, {"failed_runs": float(self.failed), "calls": 0.0, **self.fork_figures}
        path, figures = super().update(iteration, policy, traces, out_dir)
        return path, {**figures, "failed_runs": float(self.failed), **self.fork_figures}


def _failed(trace: Trace) -> bool:
    return (trace.metadata or {}).get("outcome", {}).get("status") == "error"


@dataclass(frozen=True)
class ProgramOptions:
    """How a gateway program is run (not part of the configuration)."""

    agents: str | None = None  # "a,b=role" (default: the module's AGENTS)
    timeout: float = 300.0  # seconds one run of the program may take
    max_tokens: int | None = None  # new tokens for calls that give none (default: the task set's)


def program_completer(model: TeamModel, place: RolloutPlace) -> tuple[BackendCompleter, Any]:
    """The trainable model answers the calls, or a server the adapters are pushed to (``--server``)."""
    from ..team.backend import TrainableBackend

    serial = SerialModel(model)
    if place.server is None:
        return BackendCompleter(TrainableBackend(serial), serial, batch_window=0.02), None  # type: ignore[arg-type]
    from ..team.served import ServedRollouts

    served = ServedRollouts(
        model, base_url=place.server, adapter_dir=place.server_adapters, server_dir=place.server_dir
    )
    return BackendCompleter(served.backend, serial, batch_window=0.02), served


def make_program_step(
    cfg: TeamConfig, opts: ProgramOptions, threads: int | None = None, place: RolloutPlace | None = None
) -> ProgramStep:
    fn = load_team_function(cfg.program)
    team = Team(cfg.adapters, team_agents(cfg.program, opts.agents))
    model = TeamModel(team.adapters(), LoraSettings(rank=cfg.lora_rank), threads=threads)
    params = [p for name in model.adapters for p in model.trainable(name)]
    optimizer = model.torch.optim.Adam(params, lr=cfg.lr)
    train_ids, heldout_ids = split(cfg)
    max_tokens = opts.max_tokens or int(getattr(family(cfg.family), "max_new_tokens", 64))
    defaults = CallDefaults(temperature=cfg.temperature, max_tokens=max_tokens)
    place = place or RolloutPlace()
    remote: Any
    forker = None
    if place.ray is not None and place.server is not None:
        raise BadInput("OT695", "rollouts run either on Ray workers or on a server, not both")
    if place.ray is not None:
        from ..team.remote import RayRollouts

        remote = RayRollouts(
            model,
            address=place.ray,
            workers=place.ray_workers,
            threads=threads,
            worker=GatewayRolloutWorker,
            worker_args=(cfg.program, team.mode, team.roles, defaults, opts.timeout),
        )
        if cfg.credit in FORK_METHODS:  # forks run here (as the team program's do), on the same adapters
            completer, _ = program_completer(model, RolloutPlace())
            forker = GatewayRollouts(completer, team, fn, defaults=defaults, timeout=opts.timeout)
    else:
        completer, served = program_completer(model, place)
        remote = forker = GatewayRollouts(
            completer, team, fn, defaults=defaults, timeout=opts.timeout, served=served
        )
    step = ProgramStep(
        cfg,
        model,
        None,
        optimizer,
        reward_spec(cfg),
        None,
        train_ids,
        heldout_ids,
        initial={name: model.adapter_state(name) for name in model.adapters},
        remote=remote,
    )
    step.forker = forker
    return step


def check_program(cfg: TeamConfig, opts: ProgramOptions) -> list[str]:
    """Everything that can refuse a gateway program's run, before anything is written: the
    adapters it will have."""
    cfg.check()
    if cfg.resamples != 1:
        raise BadInput(
            "OT695",
            "--resamples is for the team program: a gateway program's forks resample every agent once",
        )
    load_team_function(cfg.program)
    team = Team(cfg.adapters, team_agents(cfg.program, opts.agents))
    return team.adapters()


def train_program(
    cfg: TeamConfig,
    out: str | Path,
    iterations: int,
    opts: ProgramOptions,
    *,
    start: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    threads: int | None = None,
    place: RolloutPlace | None = None,
    log: str | None = None,
) -> list[IterationRecord]:
    """Run (or resume) the loop on a gateway program; every check that can refuse runs first.
    ``log``: ``tensorboard`` or ``mlflow`` logs every iteration's figures under ``out/<log>``."""
    out = Path(out)
    check_log(log)
    adapters = check_program(cfg, opts)
    check_resume(out, cfg)
    reward_spec(cfg)
    if start is not None:
        check_policy_file(start, adapters)
    step = make_program_step(cfg, opts, threads, place)
    try:
        return run_in_folder(step, cfg, out, iterations, start=start, progress=progress, log=log)
    finally:
        step.remote.close()
        if step.forker is not None and step.forker is not step.remote:
            step.forker.close()


def train_any(
    cfg: TeamConfig,
    out: str | Path,
    iterations: int,
    opts: ProgramOptions,
    *,
    start: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    threads: int | None = None,
    place: RolloutPlace | None = None,
    log: str | None = None,
) -> list[IterationRecord]:
    """``train team``: a gateway program (a function taking ``base_url``) through the gateway,
    any other program (``team``, a runtime program) through the runtime."""
    if is_gateway_program(cfg.program):
        return train_program(
            cfg, out, iterations, opts, start=start, progress=progress, threads=threads, place=place, log=log
        )
    if opts.agents:
        raise BadInput("OT743", "--agents names the agents of a gateway program (a function taking base_url)")
    from ..team.trainer import train_team

    return train_team(
        cfg, out, iterations, start=start, progress=progress, threads=threads, place=place, log=log
    )
