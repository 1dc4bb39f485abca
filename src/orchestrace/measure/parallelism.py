"""E2 parallelism: critical path, Critical Steps, serial work, concurrency, useful-agent utilisation.

Our definitions (spec §2.2, §2.3 and §8.5 leave them open; see docs/measure.md):

- **Serial work** ``serial_work_s``: every tool execution (a ``tool_result`` from its call to its
  end) in full, plus each agent's busy time, the union of its own events' effective intervals
  minus the time its tool executions cover (``view.py``): the wall-clock one executor would need
  to do all of it one piece after the other (a *simulated* serial baseline; nothing is re-run).
  A lone agent with events [0, 10], [1, 4], [5, 9] does 10 s of serial work, not 19; three
  agents waiting 10 s each on their own call of one tool at once do 30 s, and one agent's two
  parallel calls of 3 s and 5 s do 8 s.
- **Critical path** ``critical_path_s``: the heaviest dependency path, weighted by effective
  duration, where a dependency that was still running when its successor started only delays it
  to its own start (``view.time_critical_path``). The events it counts have disjoint intervals,
  so it never exceeds the trace's wall-clock span nor the serial work, with no clamp:
  ``parallel_speedup = serial_work_s / critical_path_s`` is >= 1 by definition, 1 for a lone
  agent; null when the trace records no time at all.
- **Steps.** A step is one action of one agent: an ``orchestrator_decision``, ``spawn``,
  ``despawn``, ``message``, ``tool_call``, ``return`` or ``aggregate`` event. A group issued at
  once is one action, as in Kimi's stages, where the main agent's action in a stage is "a direct
  tool call, or spawning a parallel group": a spawn or despawn that directly follows the same
  agent's decision or spawn, a tool call that directly follows the same agent's decision, and a
  tool call that directly follows the same agent's tool call, continue that step, unless they
  wait on an input from another agent or a tool result. So a decision followed by a direct tool
  call is one step, as a decision followed by its spawns is.
  ``tool_result``, ``human_intervention`` and ``safety_event`` are not agent steps.
- **Critical Steps** (Kimi K2.5): the heaviest dependency path weighted by steps. For a trace of
  stages this is exactly ``sum_t (S_main(t) + max_i S_sub,i(t))``; for nested hierarchies a
  sub-agent that spawns contributes its own Critical Steps recursively, with no extra rule, because
  the longest path through its sub-tree is its own critical path. Overlapping stages, parallel
  tool calls and stages without sub-agents (max over none = 0) fall out of the same definition.
  It is a measurement (Kimi uses it as a budget); rewards may read it, we do not add it to any.
- **Concurrency**: an agent is active from its spawn (or first event) to its last event's end
  (or its despawn); ``max_concurrency`` is the peak number of simultaneously active agents,
  ``mean_concurrency`` the time average over the trace's span. Tools are not agents.
- **Useful-agent utilisation**: spawned agents with a ``return`` event from which the final node
  is reachable, over all spawned agents (null without spawns). When the final node is an
  ``aggregate`` with recorded inputs, only recorded edges count (the aggregate says what it
  aggregated); otherwise all dependencies, implicit delivery included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from ..core.graph import EDGE_CODE, EVENT_CODE
from ..core.model import Trace
from .view import TraceView, as_view, longest_path, time_critical_path

STEP_TYPES = ("orchestrator_decision", "spawn", "despawn", "message", "tool_call", "return", "aggregate")
_SPAWNISH = np.asarray([EVENT_CODE["spawn"], EVENT_CODE["despawn"]])
_OPENS_SPAWN_GROUP = np.asarray(
    [EVENT_CODE["orchestrator_decision"], EVENT_CODE["spawn"], EVENT_CODE["despawn"]]
)
_TOOL_CALL = EVENT_CODE["tool_call"]
_OPENS_CALL_GROUP = np.asarray([EVENT_CODE["orchestrator_decision"], _TOOL_CALL])
_TOOL_RESULT = EVENT_CODE["tool_result"]


def step_weights(x: Trace | TraceView) -> np.ndarray:
    """1.0 for events that start a new agent step, 0.0 otherwise (see module docstring)."""
    v = as_view(x)
    g = v.g
    is_step = g.mask(*STEP_TYPES)
    prev = v.prev_same_agent
    has_prev = prev >= 0
    ptype = np.where(has_prev, g.type[np.maximum(prev, 0)], -1)
    # waited: an incoming dependency from another agent or from a tool result
    s, d = v.dep_edges
    waits = (g.agent[s] != g.agent[d]) | (g.type[s] == _TOOL_RESULT)
    waited = np.zeros(v.n, dtype=bool)
    waited[d[waits]] = True
    spawn_cont = np.isin(g.type, _SPAWNISH) & np.isin(ptype, _OPENS_SPAWN_GROUP)
    call_cont = (g.type == _TOOL_CALL) & np.isin(ptype, _OPENS_CALL_GROUP)
    cont = (spawn_cont | call_cont) & ~waited
    return (is_step & ~cont).astype(np.float64)


def critical_path(x: Trace | TraceView) -> dict[str, Any]:
    """Wall-clock critical path: ``{"length_s", "serial_work_s", "path", "finish_s"}``.

    ``path`` holds event indices; ``finish_s`` the replay finish time of each (seconds after the start).
    """
    v = as_view(x)
    length, path, finish = time_critical_path(v)
    return {"length_s": length, "serial_work_s": v.serial_work, "path": path, "finish_s": finish}


def critical_steps(x: Trace | TraceView) -> dict[str, Any]:
    """Kimi's Critical Steps generalised to any dependency graph: ``{"critical", "total", "path"}``."""
    v = as_view(x)
    w = step_weights(v)
    length, path = longest_path(v, w)
    return {"critical": int(round(length)), "total": int(w.sum()), "path": path}


def parallel_speedup(serial_work_s: float, critical_path_s: float) -> float | None:
    """Serial work over critical-path time; None when the trace records no time (0/0). At least
    1 for the values of ``critical_path``: the path's length never exceeds the serial work."""
    if critical_path_s <= 0.0:
        return None
    return serial_work_s / critical_path_s


# ---------------------------------------------------------------- Kimi's stage formula


Stages = Sequence[tuple[int, Sequence["int | Stages"]]]


def kimi_critical_steps(stages: Stages) -> int:
    """``sum_t (S_main(t) + max_i S_sub,i(t))``; a sub-agent given as stages counts recursively.

    >>> kimi_critical_steps([(1, []), (1, [6, 9, 4, 7]), (1, [])])
    12
    """
    return sum(
        main + max((_sub_steps(s, kimi_critical_steps) for s in subs), default=0) for main, subs in stages
    )


def kimi_total_steps(stages: Stages) -> int:
    """Every step of every agent.

    >>> kimi_total_steps([(1, []), (1, [6, 9, 4, 7]), (1, [])])
    29
    """
    return sum(main + sum(_sub_steps(s, kimi_total_steps) for s in subs) for main, subs in stages)


def _sub_steps(s: Any, f: Any) -> int:
    return int(s) if isinstance(s, int) else f(s)


# ---------------------------------------------------------------- concurrency and utilisation


def agent_intervals(x: Trace | TraceView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(agent codes, start, end) of every acting agent's lifetime."""
    v = as_view(x)
    g = v.g
    actors = v.actors
    na = len(g.agents)
    start = np.full(na, np.inf)
    end = np.full(na, -np.inf)
    np.minimum.at(start, g.agent, g.t)
    np.maximum.at(end, g.agent, g.t_end)
    # a spawned agent exists from its spawn; a despawned one until its despawn
    ev = v.trace.events
    name_code = {a: i for i, a in enumerate(g.agents)}
    for code, fn in ((EVENT_CODE["spawn"], np.minimum), (EVENT_CODE["despawn"], np.maximum)):
        idx = np.nonzero(g.type == code)[0]
        tgt = np.fromiter(
            (name_code.get(ev[i].to or "", -1) for i in idx.tolist()), dtype=np.int64, count=len(idx)
        )
        ok = tgt >= 0
        arr = start if fn is np.minimum else end
        fn.at(arr, tgt[ok], g.t[idx[ok]])
    return actors, start[actors], end[actors]


def concurrency_profile(x: Trace | TraceView) -> tuple[np.ndarray, np.ndarray]:
    """The concurrency step function: (change times, active agents from each time on).

    Closed intervals: at equal times starts count before ends, so an agent living for an instant
    is seen.
    """
    v = as_view(x)
    _, start, end = agent_intervals(v)
    times = np.concatenate([start, end])
    delta = np.concatenate([np.ones(len(start), dtype=np.int64), -np.ones(len(end), dtype=np.int64)])
    order = np.lexsort((-delta, times))
    return times[order], np.cumsum(delta[order])


def concurrency(x: Trace | TraceView) -> dict[str, Any]:
    """``{"max", "mean"}`` concurrently active agents: peak of the profile, and total agent
    lifetime over the trace's span (the time average)."""
    v = as_view(x)
    times, active = concurrency_profile(v)
    if not len(times):
        return {"max": 0, "mean": 0.0}
    _, start, end = agent_intervals(v)
    peak = int(active.max())
    span = float(v.g.t_end.max() - v.g.t.min())
    mean = float(np.sum(end - start)) / span if span > 0 else float(peak)
    return {"max": peak, "mean": mean}


def spawned_agents(x: Trace | TraceView) -> list[str]:
    """Names of agents targeted by a spawn event, in order of first spawn."""
    v = as_view(x)
    ev = v.trace.events
    return list(dict.fromkeys(ev[i].to for i in v.g.nodes("spawn").tolist() if ev[i].to))


def useful_agents(x: Trace | TraceView) -> dict[str, bool]:
    """For each spawned agent: does one of its returns reach the final node?"""
    v = as_view(x)
    g = v.g
    spawned = spawned_agents(v)
    if not spawned or v.final_node < 0:
        return dict.fromkeys(spawned, False)
    fin = v.final_node
    g_in = g.dst == fin
    if g.type[fin] == EVENT_CODE["aggregate"] and g_in.any():
        # an aggregate says what it aggregated: follow recorded edges only
        keep = (g.etype != EDGE_CODE["temporal"]) | (g.agent[g.src] == g.agent[g.dst])
        a = csr_matrix(
            (np.ones(int(keep.sum()), dtype=np.int8), (g.dst[keep], g.src[keep])), shape=(v.n, v.n)
        )
    else:
        a = v.deps_rev
    ancestors = np.zeros(v.n, dtype=bool)
    ancestors[breadth_first_order(a, fin, directed=True, return_predecessors=False)] = True
    ev = v.trace.events
    useful = dict.fromkeys(spawned, False)
    for i in np.nonzero(ancestors & (g.type == EVENT_CODE["return"]))[0].tolist():
        who = ev[i].from_ or ev[i].agent
        if who in useful:
            useful[who] = True
    return useful


def useful_agent_utilization(x: Trace | TraceView) -> float | None:
    u = useful_agents(x)
    return sum(u.values()) / len(u) if u else None
