"""A small world for the trace browser's tests: a store of generated traces, a real runtime fork
with its parent, the viewer tests' XSS trace, and a training-run folder written by the loop."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from msgspec.structs import replace

from orchestrace.core.io import save
from orchestrace.core.model import Trace
from orchestrace.gen import generate_corpus
from orchestrace.learn.loop import run_loop
from orchestrace.runtime.runner import fork, run
from orchestrace.store import ingest

from .test_browser import XSS, xss_trace

N_GEN = 24


@dataclass(frozen=True)
class World:
    store: Path
    run_dir: Path
    parent: Trace
    child: Trace  # a fork of parent
    xss: Trace
    gen: list[Trace]


class _Step:
    """A loop step that records generated traces and scores a held-out run per iteration."""

    def __init__(self, xss: Trace) -> None:
        self.xss = xss

    def collect(self, iteration: int, policy: str | None, out_dir: Path) -> list[str]:
        paths = []
        for k, tr in enumerate(generate_corpus(2, seed=100 + 10 * iteration, size=20)):
            p = out_dir / f"run-{k}.json"
            save(replace(tr, trace_id=f"train-{iteration}-{k}"), p)
            paths.append(str(p))
        if iteration == 1:
            p = out_dir / "xss.json"
            save(self.xss, p)
            paths.append(str(p))
        return paths

    def update(
        self, iteration: int, policy: str | None, traces: list[str], out_dir: Path
    ) -> tuple[str, dict[str, float]]:
        return str(out_dir / "policy.json"), {"reward": 0.25 * iteration, "loss": 1.0 / (1 + iteration)}

    def evaluate(self, policy: str | None, out_dir: Path) -> dict[str, float]:
        it = int(out_dir.name.rpartition("-")[2])
        (out_dir / "eval").mkdir()
        right = it >= 2
        for q in ("q0", "q1"):
            tr = generate_corpus(1, seed=7, size=20)[0]
            md = {"outcome": {"status": "ok", "final": f"answer {q} {'right' if right else 'wrong'}"}}
            if q == "q1":  # XSS in a held-out answer, both before and after
                md["outcome"]["final"] = XSS[0]
            tr = replace(tr, trace_id=f"eval-{it}-{q}", metadata=md, rewards={"team": float(right)})
            save(tr, out_dir / "eval" / f"{q}-g0.events.jsonl")
        return {"team_accuracy": 0.5 + 0.2 * it}


def build(tmp: Path) -> World:
    gen = [
        replace(tr, trace_id=f"gen-{k:02d}") for k, tr in enumerate(generate_corpus(N_GEN, seed=5, size=30))
    ]
    save(gen, tmp / "gen.jsonl")
    parent_path = tmp / "deb.events.jsonl"
    parent = run("debate", str(parent_path), backend={"kind": "scripted", "seed": 1}, seed=7).trace
    first = next(e for e in parent.events if e.type == "return")
    child = fork(str(parent_path), first.id, "replace:boiling").trace
    xss = xss_trace()
    save(xss, tmp / "xss.json")
    store = tmp / "traces.duckdb"
    files = [tmp / "gen.jsonl", parent_path, Path(fork_path(tmp)), tmp / "xss.json"]
    rep = ingest(str(store), [str(f) for f in files], workers=1)
    assert rep.failed == 0, rep.failures
    run_dir = tmp / "team-run"
    run_loop(_Step(xss), run_dir, 2)
    return World(store, run_dir, parent, child, xss, gen)


def fork_path(tmp: Path) -> str:
    return str(next(tmp.glob("deb.fork-*.events.jsonl")))
