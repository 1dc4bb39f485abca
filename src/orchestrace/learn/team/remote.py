"""Rollouts on Ray workers (``train team --ray``): the same runs as a local run.

Each worker is a Ray actor holding its own copy of the base model (loaded once from the
dequantised cache). Before every batch of rollouts the driver sends the current adapter tensors
(``ray.put`` once, about 1.8 MB per adapter at r=8); a worker runs its contiguous shard of the
rollouts in one event loop (its calls batched as in a local run) into a private folder and returns
the trace and call-cache files as bytes, which the driver writes where the local run would have.
What a rollout samples does not depend on where it ran: every request carries its own seed,
sampling uses a generator per request, the clock is logical, and the recorded backend name is
the same. Its behaviour log-probs do, in the last bits: a worker's batches have fewer rows than
the local run's, and CPU matrix kernels round differently for different batch sizes.
Training (reward, credit, the update, saving) stays on the driver.

On one machine the workers and the driver each hold a model (about 0.6 GB each in fp32).
A program given as ``module:function`` must be importable on the workers.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...core.io import load_one
from ...core.model import Trace
from ...runtime.cache import cache_path
from .model import LoraSettings, TeamModel, cache_root
from .rollouts import Rollout, run_rollouts


class RolloutWorker:
    """One rollout process: a model, the trainable backend over it, the adapters last pushed."""

    def __init__(
        self, adapters: list[str], rank: int, threads: int | None, *, model_cache: str | None = None
    ) -> None:
        from .backend import TrainableBackend

        if model_cache is not None:  # the driver's dequantised weights (see ``RayRollouts``)
            os.environ["ORCHESTRACE_MODEL_CACHE"] = model_cache
        self.model = TeamModel(adapters, LoraSettings(rank=rank), threads=threads)
        self.backend = TrainableBackend(self.model)

    def record(self, rollouts: list[Rollout]) -> None:
        """Run the rollouts here (a subclass may run another kind of program)."""
        run_rollouts(self.backend, rollouts)

    def run(self, states: dict[str, dict[str, Any]], rollouts: list[Rollout]) -> list[tuple[bytes, bytes]]:
        """(trace file, call cache file) of every rollout, run with the adapters ``states``."""
        for name, state in states.items():
            self.model.load_adapter_state(name, state)
        with tempfile.TemporaryDirectory() as tmp:
            here = [
                replace(r, path=str(Path(tmp) / str(i) / Path(r.path).name)) for i, r in enumerate(rollouts)
            ]
            self.record(here)
            return [(Path(r.path).read_bytes(), Path(cache_path(r.path)).read_bytes()) for r in here]


class RayRollouts:
    """Spreads rollouts over ``workers`` Ray actors; results in the order of the rollouts.
    ``worker``: the actor class, built as ``worker(adapters, rank, threads, *worker_args)``."""

    def __init__(
        self,
        model: TeamModel,
        *,
        address: str,
        workers: int,
        threads: int | None,
        worker: type[RolloutWorker] = RolloutWorker,
        worker_args: tuple[Any, ...] = (),
    ) -> None:
        import ray

        from ...parallel import LOCAL, ensure_ray
        from .program import BadInput

        if workers < 1:
            raise BadInput("OT695", f"ray workers must be >= 1, got {workers}")
        ensure_ray(address)
        actor = ray.remote(num_cpus=1)(worker)
        self.ray = ray
        # the private local cluster's processes run with a HOME of their own (``parallel.start_local``),
        # so each worker missed the driver's model cache and dequantised the GGUF again: 1-4 minutes
        # per worker on 2 busy cores (the Ray tests' timeouts); on one machine they share it
        cache = str(cache_root()) if address in ("", LOCAL) else None
        self.workers = [
            actor.remote(model.adapters, model.lora.rank, threads, *worker_args, model_cache=cache)
            for _ in range(workers)
        ]

    def run(self, model: TeamModel, rollouts: list[Rollout]) -> list[Trace]:
        states = self.ray.put({name: model.adapter_state(name) for name in model.adapters})
        n = len(self.workers)
        size = -(-len(rollouts) // n)
        shards = [rollouts[i : i + size] for i in range(0, len(rollouts), size)]
        refs = [w.run.remote(states, shard) for w, shard in zip(self.workers, shards, strict=False)]
        for shard, files in zip(shards, self.ray.get(refs), strict=True):
            for r, (trace, cache) in zip(shard, files, strict=True):
                Path(r.path).parent.mkdir(parents=True, exist_ok=True)
                Path(r.path).write_bytes(trace)
                Path(cache_path(r.path)).write_bytes(cache)
        return [load_one(r.path) for r in rollouts]

    def close(self) -> None:
        for w in self.workers:
            self.ray.kill(w)
        self.workers = []
