"""Reward specs and R8 hybrid composition: weighted, annealed channels with caps against known hacks.

A spec is a :class:`RewardSpec` (Python) or a TOML file of the same shape::

    total = "hybrid"                      # channel that receives the weighted sum
    [[terms]]
    channel = "team"                      # R1
    [[terms]]
    channel = "r_parallel"                # R7, annealed to zero as PARL does
    weight = 0.1
    schedule = { kind = "linear", start = 1.0, end = 0.0, steps = 1000 }
    [caps]
    max_spawn = 8                         # r_parallel saturates at 8 useful sub-agents
    gate_parallel_by_finish = true        # r_parallel *= r_finish (spurious parallelism)
    max_tool_calls_per_agent = 10         # tool spam
    max_message_tokens = 512              # message padding
    [hooks]                               # optional "module:function" callables
    verifier = "mypkg.judge:score_trace"

hybrid = sum_k weight_k * schedule_k(step) * channel_k, channel_k computed or else recorded in the
trace's rewards. A term whose channel is absent from both counts 0.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec

from ..core.errors import OrchestraceError
from ..core.model import Trace
from ..core.plugins import resolve
from .channels import RewardOut
from .families import r1_team, r2_agent, r3_role, r4_process, r5_tool, r6_verifier
from .orchestration import r7_orchestration
from .schedule import Schedule

#: channel -> family of every fixed-name channel the families produce
CHANNEL_FAMILY = {
    "team": "R1",
    "process": "R4",
    "tool": "R5",
    "tool_spam": "R5",
    "judge": "R6",
    **{
        k: "R7"
        for k in (
            "critical_steps",
            "total_steps",
            "speedup",
            "r_parallel",
            "r_finish",
            "split_correctness",
            "aggregation_quality",
        )
    },
}


#: a channel's former name -> its name: R6's mean judge score on messages was ``verifier``, a word
#: that also names the ``[hooks] verifier`` scoring R1 ``team``. The former name is still read (a spec
#: term, ``credit --channel``, a trace rewarded before the rename); traces are written with the new one
CHANNEL_ALIASES = {"verifier": "judge"}


def renamed_channels(trace: Trace) -> set[str]:
    """The former-name channels in ``trace.rewards`` that ``orchestrace reward`` wrote (its
    ``metadata.reward_channels`` gives them the family of the channel they were renamed to), not a
    value the trace recorded under that name itself."""
    written = (trace.metadata or {}).get("reward_channels") or {}
    return {
        old
        for old, new in CHANNEL_ALIASES.items()
        if old in trace.rewards
        and isinstance(written.get(old), dict)
        and written[old].get("family") == CHANNEL_FAMILY[new]
    }


def channel_value(channels: dict[str, float], name: str) -> float | None:
    """``channels[name]``, else the same channel under its new or former name, else None."""
    if name in channels:
        return channels[name]
    for old, new in CHANNEL_ALIASES.items():
        other = new if name == old else old if name == new else None
        if other is not None and other in channels:
            return channels[other]
    return None


class Term(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    channel: str
    weight: float = 1.0
    schedule: Schedule | None = None

    def lam(self, step: int) -> float:
        return self.weight * (self.schedule(step) if self.schedule is not None else 1.0)


class Caps(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Guards against the MAS reward hacks of survey §6.3."""

    max_spawn: Annotated[int, msgspec.Meta(ge=0)] = 8
    min_subagent_steps: Annotated[int, msgspec.Meta(ge=0)] = 1
    gate_parallel_by_finish: bool = True
    max_tool_calls_per_agent: Annotated[int, msgspec.Meta(ge=0)] | None = None
    penalize_duplicate_tools: bool = True
    tool_spam_penalty: Annotated[float, msgspec.Meta(ge=0)] = 0.5
    max_message_tokens: Annotated[int, msgspec.Meta(ge=0)] | None = None
    penalize_duplicate_messages: bool = True
    max_critical_steps: Annotated[float, msgspec.Meta(ge=0)] | None = None


class Hooks(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Optional callables, or ``"module:function"`` strings in TOML."""

    verifier: Any = None
    agent: Any = None
    prm: Any = None
    judge: Any = None
    rubrics: dict[str, Any] = msgspec.field(default_factory=dict)


class RewardSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    terms: list[Term] = msgspec.field(default_factory=lambda: [Term(channel="team")])
    total: str = "hybrid"
    team_channel: str = "team"
    parallel_form: Literal["kimi", "speedup"] = "kimi"
    finish_form: Literal["kimi", "terminated"] = "kimi"
    caps: Caps = msgspec.field(default_factory=Caps)
    hooks: Hooks = msgspec.field(default_factory=Hooks)


def load_spec(path: str | os.PathLike[str]) -> RewardSpec:
    """Read a TOML reward spec; mistakes become OrchestraceError with the file name. One UTF-8
    byte-order mark (Windows editors write one) is accepted, as the JSON readers accept it."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        raw = tomllib.loads(data.removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except OSError as e:
        raise OrchestraceError("OT001", f"cannot read reward spec: {e.strerror}", path=str(path)) from None
    except tomllib.TOMLDecodeError as e:
        raise OrchestraceError("OT403", f"reward spec is not valid TOML: {e}", path=str(path)) from None
    except UnicodeDecodeError as e:
        line = e.object.count(b"\n", 0, e.start) + 1
        raise OrchestraceError(
            "OT403", f"reward spec is not UTF-8: byte 0x{e.object[e.start]:02x}", path=str(path), line=line
        ) from None
    return spec_from_dict(raw, path=str(path))


def spec_from_dict(raw: dict[str, Any], *, path: str | None = None) -> RewardSpec:
    """A RewardSpec from decoded TOML; OT403 for anything that would make a wrong total silently:
    a non-finite number (TOML has nan and inf), a negative cap, a total or team channel that
    overwrites a computed channel, a hook that is not a ``module:function`` string."""
    if (where := _non_finite(raw, "$")) is not None:
        raise OrchestraceError("OT403", f"bad reward spec: a number must be finite - at `{where}`", path=path)
    if (bad := _bad_hook(raw.get("hooks"))) is not None:
        where, value = bad
        raise OrchestraceError(
            "OT403",
            f'bad reward spec: a hook is a "package.module:function" string, got {value!r:.80} - at `{where}`',
            path=path,
        )
    try:
        spec = msgspec.convert(raw, RewardSpec)
    except (msgspec.ValidationError, ValueError) as e:
        raise OrchestraceError("OT403", f"bad reward spec: {e}", path=path) from None
    for name in ("total", "team_channel"):
        if not getattr(spec, name).strip():
            raise OrchestraceError(
                "OT403", f"bad reward spec: a channel name is needed - at `$.{name}`", path=path
            )
    if _overwrites_computed(spec.total) or spec.total == spec.team_channel:
        raise OrchestraceError(
            "OT403",
            f"bad reward spec: total {spec.total!r} would overwrite a computed channel; name it e.g. 'hybrid'",
            path=path,
        )
    if spec.team_channel != "team" and _overwrites_computed(spec.team_channel):
        # R1 wrote the outcome there, then the family computing that channel replaced it
        raise OrchestraceError(
            "OT403",
            f"bad reward spec: team_channel {spec.team_channel!r} is a computed channel, so the team "
            "outcome would be overwritten; name the channel the traces record it under, e.g. 'team'",
            path=path,
        )
    return spec


def _overwrites_computed(channel: str) -> bool:
    """Would a channel of this name be overwritten by (or overwrite) one the families compute?"""
    return channel in CHANNEL_FAMILY or channel in CHANNEL_ALIASES or "/" in channel


def _bad_hook(hooks: Any) -> tuple[str, Any] | None:
    """(where, value) of the first ``[hooks]`` value that is not a ``module:function`` string (an
    integer there reached ``resolve`` and was an internal error), or None."""
    if not isinstance(hooks, dict):
        return None  # not a table: msgspec.convert says so with the place
    named = [(f"$.hooks.{k}", hooks[k]) for k in ("verifier", "agent", "prm", "judge") if k in hooks]
    rubrics = hooks.get("rubrics")
    if isinstance(rubrics, dict):
        named += [(f"$.hooks.rubrics.{k}", v) for k, v in rubrics.items()]
    for where, value in named:
        if not isinstance(value, str) or not value.partition(":")[2]:
            return where, value
    return None


def _non_finite(value: Any, where: str) -> str | None:
    """The path of the first nan or inf in a decoded TOML value, or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else where
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        if (found := _non_finite(v, f"{where}[{k}]" if isinstance(k, int) else f"{where}.{k}")) is not None:
            return found
    return None


def compute_rewards(trace: Trace, spec: RewardSpec | None = None, *, step: int = 0) -> RewardOut:
    """All reward channels R1-R7 of one trace plus the R8 hybrid total under ``spec`` at ``step``."""
    spec = spec or RewardSpec()
    caps, hooks = spec.caps, spec.hooks
    out = r1_team(trace, resolve(hooks.verifier), channel=spec.team_channel)
    out.merge(r2_agent(trace, resolve(hooks.agent)))
    out.merge(r3_role(trace, {k: resolve(v) for k, v in hooks.rubrics.items()}))  # type: ignore[misc]
    out.merge(r4_process(trace, resolve(hooks.prm)))
    out.merge(
        r5_tool(
            trace,
            spam_penalty=caps.tool_spam_penalty,
            max_calls_per_agent=caps.max_tool_calls_per_agent,
            penalize_duplicates=caps.penalize_duplicate_tools,
        )
    )
    out.merge(
        r6_verifier(
            trace,
            resolve(hooks.judge),
            max_message_tokens=caps.max_message_tokens,
            penalize_duplicates=caps.penalize_duplicate_messages,
        )
    )
    r7 = r7_orchestration(
        trace,
        parallel_cap=caps.max_spawn,
        min_steps=caps.min_subagent_steps,
        parallel_form=spec.parallel_form,
        finish_form=spec.finish_form,
    )
    if caps.gate_parallel_by_finish:
        r7.channels["r_parallel"] *= r7.channels["r_finish"]
    out.merge(r7)
    if caps.max_critical_steps is not None and out.channels["critical_steps"] > caps.max_critical_steps:
        out.channels[spec.team_channel] = 0.0  # over the Critical-Steps budget: the outcome does not count
    # a term may name a channel the trace recorded (a judge's score, a run's own reward); a
    # computed channel of the same name wins. Read from the computed channels alone, such a term
    # counted 0 while the written trace still held the recorded value
    stale = renamed_channels(trace)  # recomputed under the new name
    channels = {**{k: v for k, v in trace.rewards.items() if k not in stale}, **out.channels}
    for t in spec.terms:  # a typo ("teamm") counted 0 and dropped the team reward from the total
        if (
            channel_value(channels, t.channel) is None
            and t.channel not in CHANNEL_FAMILY
            and "/" not in t.channel
        ):
            raise OrchestraceError(
                "OT403",
                f"bad reward spec: term channel {t.channel!r} is neither computed nor recorded in trace "
                f"{trace.trace_id!r} (computed: {', '.join(sorted(k for k in out.channels if '/' not in k))})",
            )
    out.add(spec.total, hybrid(channels, spec.terms, step), "R8")
    return out


def hybrid(channels: dict[str, float], terms: list[Term], step: int) -> float:
    """R8: sum_k lambda_k(step) * channel_k."""
    return sum(t.lam(step) * (channel_value(channels, t.channel) or 0.0) for t in terms)


def apply_rewards(trace: Trace, spec: RewardSpec | None = None, *, step: int = 0) -> Trace:
    """A copy of the trace whose ``rewards`` hold every channel (existing ones kept unless recomputed).

    The family of each channel and whether it is annealed go to ``metadata.reward_channels``
    (reporting checklist item 3).
    """
    spec = spec or RewardSpec()
    return with_rewards(trace, compute_rewards(trace, spec, step=step), spec, step=step)


def with_rewards(trace: Trace, res: RewardOut, spec: RewardSpec, *, step: int = 0) -> Trace:
    """``apply_rewards`` with the channels already computed (callers that also report them)."""
    annealed = {
        CHANNEL_ALIASES.get(t.channel, t.channel)
        for t in spec.terms
        if t.schedule is not None and t.schedule.kind != "constant"
    }
    stale = renamed_channels(trace)  # a re-rewarded trace keeps no copy under the former name
    meta = dict(trace.metadata or {})
    meta["reward_channels"] = {k: {"family": fam, "annealed": k in annealed} for k, fam in res.family.items()}
    meta["reward_step"] = step
    kept = {k: v for k, v in trace.rewards.items() if k not in stale}
    return msgspec.structs.replace(trace, rewards={**kept, **res.channels}, metadata=meta)


RewardFn = Callable[[Trace], RewardOut]
